"""The result cache (verify_dag/resultcache.py): an unchanged re-verify takes its tool findings,
suite results and reviewer replies from the cache and says so; an edit re-runs exactly what
depends on it; a broken or unwritable cache never fails a run; ``--no-cache`` bypasses it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, verify_json
from fakes import logged_calls

from verify_dag import resultcache
from verify_dag.phases.static import baseline
from verify_dag.tools import runner

BRANCH = ("--scope=branch", "--base=base")


def skill(doc: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [s for s in doc["skillResults"] if s["skill"] == name]
    return found


def detail(doc: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [s for s in doc["skillDetails"] if s["skill"] == name]
    return found


def cached(doc: dict[str, Any], name: str) -> list[str]:
    return [c["what"] for c in detail(doc, name)["cached"]]


def verdict(doc: dict[str, Any]) -> list[tuple[int, str, Any]]:
    """What a report says about the change, without the ids and notes that differ per run."""
    return sorted((i["severity"], i["title"], i["location"]) for i in doc["issues"])


@pytest.fixture
def ruff_files(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The files each real ruff run was given (the embedded worker runs in this process)."""
    seen: list[list[str]] = []
    real = runner._run

    def spy(spec: Any, files: Any, *args: Any, **kwargs: Any) -> runner.ToolRun:
        if spec.name == "ruff":
            seen.append(sorted(files))
        return real(spec, files, *args, **kwargs)

    monkeypatch.setattr(runner, "_run", spy)
    return seen


@pytest.fixture
def classified(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many findings each real baseline classification was given."""
    seen: list[int] = []
    real = baseline.classify

    def spy(scope: Any, toolchain: Any, findings: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(findings))
        return real(scope, toolchain, findings, *args, **kwargs)

    monkeypatch.setattr(baseline, "classify", spy)
    return seen


def test_an_unchanged_change_is_answered_from_the_cache(
    scenario: Repo, tmp_path: Path, ruff_files: list[list[str]], classified: list[int]
) -> None:
    rc1, first = verify_json(scenario, tmp_path, *BRANCH)
    rc2, again = verify_json(scenario, tmp_path, *BRANCH)
    assert cached(first, "static-analysis") == [] and cached(first, "tester") == []
    # Same verdict, exit code and counts; the parts that were not computed again say so.
    assert (rc2, verdict(again)) == (rc1, verdict(first)) and rc1 == 1
    assert cached(again, "static-analysis") == ["ruff: 2 of 2 file(s)", "baseline classification"]
    # Whether each finding was already there at the merge base: decided once, in run 1.
    assert classified == [1]

    def static(doc: dict[str, Any]) -> list[tuple[str, Any]]:
        return [
            (i["title"], i["baseline"])
            for i in doc["issues"]
            if i["sources"] == ["static-analysis"]
        ]

    assert static(again) == static(first)
    assert [b for _, b in static(again)] == ["introduced"]
    assert cached(again, "tester") == ["suite"]
    assert "1 passed, 1 failed" in skill(again, "tester")["notes"]
    assert "from the result cache: suite (stored 20" in skill(again, "tester")["notes"]
    entry = detail(again, "tester")["cached"][0]
    assert len(entry["key"]) == 64 and entry["stored"].endswith("Z")
    assert ruff_files == [["src/calc.py", "tests/test_calc.py"]]  # ruff ran once, in run 1
    # The failing test's re-runs: alone at the head (the exerciser's reproduction) and at the
    # merge base (the debugger's), each kept with the answer it gave.
    assert cached(first, "debugger") == [] and "re-runs" not in str(cached(first, "exerciser"))
    assert cached(again, "debugger") == ["re-runs at the merge base"]
    assert "re-runs of the reported issues" in cached(again, "exerciser")
    assert again["debugger"] == first["debugger"] and first["debugger"]
    assert again["exerciserVerification"] == first["exerciserVerification"]
    assert "CONFIRMED" in {v["status"] for v in again["exerciserVerification"]}


def test_a_rerun_that_settled_nothing_is_tried_again(repo: Repo, tmp_path: Path) -> None:
    # The test fails at the base too, but another way: the debugger cannot say "yes", and its
    # "undetermined" is not kept; the exerciser's reproduction (CONFIRMED) is.
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    repo.write("tests/test_x.py", "def test_x():\n    assert 1 == 2\n")
    repo.commit("x fails")
    repo.git("tag", "base")
    repo.write("tests/test_x.py", "def test_x():\n    raise ValueError('another way')\n")
    repo.commit("x fails another way")
    verify_json(repo, tmp_path, *BRANCH)
    _, again = verify_json(repo, tmp_path, *BRANCH)
    assert [d["preExisting"] for d in again["debugger"]] == ["undetermined"]
    assert cached(again, "debugger") == []
    assert "re-runs of the reported issues" in cached(again, "exerciser")


def test_a_one_file_edit_reruns_that_files_lint_and_the_suite(
    scenario: Repo, tmp_path: Path, ruff_files: list[list[str]]
) -> None:
    verify_json(scenario, tmp_path, *BRANCH)
    scenario.write(
        "tests/test_calc.py",
        "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
        "def test_mul():\n    assert mul(3, 4) == 13\n",
    )
    scenario.commit("fix the test")
    rc, doc = verify_json(scenario, tmp_path, *BRANCH)
    assert ruff_files == [["src/calc.py", "tests/test_calc.py"], ["tests/test_calc.py"]]
    assert cached(doc, "static-analysis") == ["ruff: 1 of 2 file(s)"]
    assert cached(doc, "tester") == []  # the tree changed: the suite ran again
    assert "2 passed, 0 failed" in skill(doc, "tester")["notes"]
    # The failing test is fixed and the lint finding left is below --fail-on; no reviewer or
    # exerciser can run here: 4, not 1.
    assert rc == 4
    assert any("F841" in i["title"] for i in doc["issues"])


def test_no_cache_takes_nothing_and_keeps_nothing(
    scenario: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "results"
    monkeypatch.setenv(resultcache.CACHE_ENV, str(store))
    _, first = verify_json(scenario, tmp_path, *BRANCH, "--no-cache")
    assert not store.exists()
    verify_json(scenario, tmp_path, *BRANCH)
    _, bypassed = verify_json(scenario, tmp_path, *BRANCH, "--no-cache")
    assert store.is_dir()
    for name in ("static-analysis", "tester"):
        assert "cached" not in skill(bypassed, name)
    assert verdict(bypassed) == verdict(first)


def test_a_corrupt_entry_is_ignored_and_replaced(
    scenario: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "results"
    monkeypatch.setenv(resultcache.CACHE_ENV, str(store))
    _, first = verify_json(scenario, tmp_path, *BRANCH)
    entries = sorted(store.rglob("*.json"))
    assert entries
    for n, path in enumerate(entries):
        # Truncated, not JSON at all, and valid JSON that is not the entry its name says.
        path.write_text(['{"format": 1, "ki', "\x00garbage", '{"format": 1}'][n % 3])
    _, again = verify_json(scenario, tmp_path, *BRANCH)
    assert cached(again, "static-analysis") == [] and cached(again, "tester") == []
    assert verdict(again) == verdict(first)
    for path in entries:  # each was stored anew by the run that ignored it
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record["key"] == path.stem and "value" in record


def test_a_cache_that_cannot_be_written_never_fails_a_run(
    scenario: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory would be\n")
    monkeypatch.setenv(resultcache.CACHE_ENV, str(blocker / "results"))
    rc, doc = verify_json(scenario, tmp_path, *BRANCH)
    rc2, again = verify_json(scenario, tmp_path, *BRANCH)
    assert (rc, rc2) == (1, 1) and doc["status"] == "ok"
    assert verdict(again) == verdict(doc)
    assert cached(again, "tester") == []


def test_a_reviewers_reply_is_reused_for_the_same_prompt_backend_and_model(
    scenario: Repo, tmp_path: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, first = verify_json(scenario, tmp_path, *BRANCH)
    _, again = verify_json(scenario, tmp_path, *BRANCH)
    assert len(logged_calls(fake_claude)) == 1
    assert skill(again, "reviewer")["status"] == skill(first, "reviewer")["status"] == "COMPLETED"
    assert cached(again, "reviewer") == ["reply"]
    monkeypatch.setenv("VERIFY_DAG_MODEL", "another-model")  # another model: asked again
    _, third = verify_json(scenario, tmp_path, *BRANCH)
    assert len(logged_calls(fake_claude)) == 2
    assert cached(third, "reviewer") == []


def test_keys_tell_their_parts_apart() -> None:
    assert resultcache.key("ab", "c") != resultcache.key("a", "bc")
    assert resultcache.key("a", "b") == resultcache.key("a", "b")
    with pytest.raises(ValueError):
        resultcache.put("tool", "../../etc/passwd", {})
