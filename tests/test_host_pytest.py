"""A project that declares nothing to install runs on verify-dag's interpreter: without the pytest
plugins verify-dag's own dependencies brought there, with every other plugin installed there
(verify_dag/phases/tester/env/host.py)."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import sys
from pathlib import Path

import pytest
from conftest import BRANCH, Repo, calc_base, verify_json

from verify_dag.phases.tester.env import bytecode, host

# What each test sees of the plugins, by pytest's own account (its plugin manager's names).
PROBE = """\
import json


def test_plugins(pytestconfig):
    names = sorted(n for n, _ in pytestconfig.pluginmanager.list_name_plugin())
    print("PLUGINS=" + json.dumps(names))
    assert not pytestconfig.pluginmanager.has_plugin("anyio")
    assert pytestconfig.pluginmanager.has_plugin("xdist")
"""


def _dist_of(plugin: str) -> str:
    (ep,) = [ep for ep in metadata.entry_points(group=host.GROUP) if ep.name == plugin]
    assert ep.dist is not None
    return str(ep.dist.metadata["Name"])


def test_the_plugins_of_verify_dags_dependencies_and_only_those() -> None:
    names = host.dependency_plugins()
    # anyio comes with httpx, a runtime dependency: its plugin is verify-dag's, not a project's.
    assert "anyio" in names and _dist_of("anyio") == "anyio"
    # pytest-xdist and pytest-timeout come with the dev extra, not with verify-dag itself: they
    # are what a developer installed beside it, and stay on.
    assert _dist_of("xdist") == "pytest-xdist" and _dist_of("timeout") == "pytest-timeout"
    assert not {"xdist", "xdist.looponfail", "timeout"} & set(names)
    argv = host.pytest_argv()
    assert argv is not None and argv[:3] == [sys.executable, "-m", "pytest"]
    assert argv[3:] == host.not_ours() == [a for n in names for a in ("-p", f"no:{n}")]


def test_a_suite_and_its_reruns_do_without_them(repo: Repo, tmp_path: Path) -> None:
    calc_base(repo)
    repo.write("tests/test_plugins.py", PROBE)
    # A failing test: the exerciser and the debugger re-run it alone, the same way.
    repo.write("tests/test_calc.py", "def test_add():\n    assert 1 + 1 == 3\n")
    repo.commit("probe and a failing test")
    rc, doc = verify_json(repo, tmp_path, *BRANCH)
    tester = next(s for s in doc["skillResults"] if s["skill"] == "tester")
    assert rc == 1
    # test_plugins passed: anyio's plugin was off, xdist's (not verify-dag's) on.
    assert tester["notes"].startswith("1 passed, 1 failed, 0 errors, 0 skipped"), tester["notes"]
    titles = [i["title"] for i in doc["issues"]]
    assert titles == ["Test failed: tests/test_calc.py::test_add"], titles
    failed = next(i for i in doc["issues"] if "test_add" in i["title"])
    (reproduced,) = [v for v in doc["exerciserVerification"] if v["issue"] == failed["id"]]
    assert reproduced["status"] == "CONFIRMED", reproduced
    # The debugger re-ran it at the merge base, where it passes, with the same plugins off.
    (diagnosis,) = doc["debugger"]
    assert diagnosis["preExisting"] == "no", diagnosis
    assert " ".join(["-m", "pytest", *host.not_ours()]) in diagnosis["command"]


def test_the_list_is_kept_under_the_interpreters_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bytecode, "location", lambda: tmp_path)
    host.dependency_plugins.cache_clear()
    try:
        found = host.dependency_plugins()
        kept = tmp_path / f"{bytecode.key()}.pytest-plugins.json"
        assert json.loads(kept.read_text(encoding="utf-8")) == list(found)
        # The next process reads it instead of every distribution's metadata.
        kept.write_text('["kept-name"]', encoding="utf-8")
        host.dependency_plugins.cache_clear()
        assert host.dependency_plugins() == ("kept-name",)
        # Anything but a list of names is found again.
        kept.write_text('{"not": "a list"}', encoding="utf-8")
        host.dependency_plugins.cache_clear()
        assert host.dependency_plugins() == found
        # The bytecode tree's clean-up keeps what its key names, and removes another key's.
        stale = tmp_path / "0123456789abcdef01234567.pytest-plugins.json"
        stale.write_text("[]", encoding="utf-8")
        assert bytecode.host_tree() == tmp_path / bytecode.key()
        assert kept.is_file() and not stale.exists()
    finally:
        host.dependency_plugins.cache_clear()
