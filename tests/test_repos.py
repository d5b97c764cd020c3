"""Where a run's repository comes from: worker mirrors of URLs, bundles of local states.

Workers share nothing but the broker (and the report store); a local run of uncommitted changes
is shipped as a bundle, so a worker that cannot see the user's repository still verifies exactly
what the user had.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, calc_base, make_repo, run_cli
from redis_workers import fresh_db, logs, workers

from verify_dag import git, report, repos, store
from verify_dag.errors import FatalError
from verify_dag.models import RunState, VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.phases import scope


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # Twice run_cli's usual bound: these runs clone the repository from its URL first.
    return run_cli(*args, env=env, timeout=240)


def project(path: Path) -> Repo:
    """A branch off ``base`` that adds an unused import, with a passing test."""
    repo = make_repo(path)
    calc_base(repo)
    repo.write("src/calc.py", "import heapq\n\n\ndef add(a, b):\n    return a + b\n")
    repo.commit("calc: import")
    return repo


def titles(doc: dict[str, Any]) -> list[str]:
    return sorted(i["title"] for i in doc["issues"])


# --- URLs: the worker's own mirror -----------------------------------------------------------


@pytest.fixture
def remote(tmp_path: Path) -> tuple[Repo, Path]:
    """A working repository and a bare "server" copy of it, reachable by file:// URL."""
    work = project(tmp_path / "work")
    server = tmp_path / "server.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work.path), str(server)], check=True)
    work.git("remote", "add", "origin", str(server))
    return work, server


def test_url_is_verified_from_a_mirror_that_follows_the_remote(
    remote: tuple[Repo, Path], tmp_path: Path
) -> None:
    work, server = remote
    url = server.as_uri()
    out = tmp_path / "one.json"
    res = cli("verify", url, "--scope=branch", "--base=base", "--format=json", f"--output={out}")
    # An unused import is below --fail-on 7; no reviewer or exerciser can run here: 4.
    assert res.returncode == 4, res.stderr
    doc = json.loads(out.read_text())
    report.validate(doc)
    assert doc["scope"]["headSha"] == work.head()
    # The run names the repository as the user did, not the worker's mirror it read.
    assert doc["run"]["repo"] == url
    assert any("F401" in t and "heapq" in t for t in titles(doc)), titles(doc)
    mirrors = [p for p in repos.mirrors_dir().glob("*.git") if p.is_dir()]
    assert len(mirrors) == 1 and git.is_bare(mirrors[0])

    # The remote moves on: the next run fetches into the same mirror and sees the new head.
    work.write("src/calc.py", "def add(a, b):\n    return a + b\n")
    new_head = work.commit("calc: no import")
    work.git("push", "-q", "origin", "HEAD:main")
    out = tmp_path / "two.json"
    res = cli("verify", url, "--scope=all", "--format=json", f"--output={out}")
    assert out.is_file(), res.stderr
    doc = json.loads(out.read_text())
    assert doc["scope"]["headSha"] == new_head and doc["scope"]["mode"] == "all", res.stderr
    assert not any("heapq" in t for t in titles(doc))
    assert [p for p in repos.mirrors_dir().glob("*.git") if p.is_dir()] == mirrors
    # The user's repository was never written by the runs of its URL.
    assert work.git("status", "--porcelain") == ""


def test_unreachable_url_is_a_run_error_with_git_reason(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = cli(
        "verify",
        (tmp_path / "nowhere.git").as_uri(),
        "--scope=all",
        "--format=json",
        f"--output={out}",
    )
    assert res.returncode == 3, res.stderr
    doc = json.loads(out.read_text())
    report.validate(doc)
    assert doc["status"] == "error"
    assert "cannot mirror" in doc["error"]["message"]
    assert "does not appear to be a git repository" in doc["error"]["message"]


@pytest.mark.parametrize("flags", [(), ("--scope=staged",), ("--files=a.py",), ("--module=src",)])
def test_url_needs_a_whole_or_branch_scope(tmp_path: Path, flags: tuple[str, ...]) -> None:
    res = cli("verify", "https://example.com/team/app.git", *flags)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "needs a local checkout" in res.stderr, res.stderr


def test_display_source_hides_passwords() -> None:
    assert (
        git.display_source("https://bot:s3cret@example.com/a.git")
        == "https://bot:***@example.com/a.git"
    )
    assert git.display_source("https://example.com/a.git") == "https://example.com/a.git"
    assert git.display_source("/srv/repos/a") == "/srv/repos/a"


# --- local paths on a fleet: pinned states in a bundle ---------------------------------------


def test_prepare_pins_the_work_tree_and_bundles_it(tmp_path: Path) -> None:
    repo = project(tmp_path / "r")
    repo.write("src/calc.py", "import heapq\nimport zipfile\n\n\ndef add(a, b):\n    return a+b\n")
    repo.git("add", "src/calc.py")
    repo.write("notes.txt", "untracked\n")
    before = repo.git("status", "--porcelain")
    where = tmp_path / "store"
    req = VerifyRequest(source=parse_source(str(repo.path)), scope="staged", store=str(where))
    shipped = repos.prepare(req, "run-1")
    assert repo.git("status", "--porcelain") == before  # index and work tree untouched
    assert repo.git("for-each-ref", "refs/verify-dag") == ""  # no refs of ours left behind
    snap = shipped.snapshot
    assert snap is not None and snap.head == repo.head() and snap.index != snap.head
    assert snap.untracked == ("notes.txt",)
    assert shipped.bundle == str(where / "run-1" / repos.BUNDLE)

    # A worker elsewhere sees only the bundle: the same scope comes out of its copy.
    local = repos.localize(RunState(run_id="run-1", request=shipped))
    assert local.request.repo != str(repo.path) and git.is_bare(local.request.repo)
    there, here = scope.run(local.request), scope.run(req)
    assert (there.mode, there.new_commit, there.included) == (here.mode, snap.index, here.included)


def test_missing_bundle_names_where_it_looked(tmp_path: Path) -> None:
    req = VerifyRequest(
        source=parse_source("/elsewhere/app"),
        bundle=str(tmp_path / "gone.bundle"),
        store=str(tmp_path / "store"),
    )
    with pytest.raises(FatalError, match="snapshot bundle of run run-2 is not on") as caught:
        repos.localize(RunState(run_id="run-2", request=req))
    assert str(tmp_path / "gone.bundle") in caught.value.message
    assert "must share the report store" in (caught.value.hint or "")


@pytest.fixture
def broker() -> str:
    return fresh_db(8)


@pytest.fixture
def worker_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    env["VERIFY_DAG_STORE"] = str(tmp_path / "shared-store")
    env["VERIFY_DAG_MIRRORS"] = str(tmp_path / "worker-mirrors")
    return env


def test_uncommitted_run_ships_to_a_worker_that_cannot_see_the_repository(
    tmp_path: Path, broker: str, worker_env: dict[str, str]
) -> None:
    repo = project(tmp_path / "laptop" / "app")
    # Unstaged: a second unused import the user has not committed or staged.
    repo.write(
        "src/calc.py", "import heapq\nimport zipfile\n\n\ndef add(a, b):\n    return a + b\n"
    )
    submit = cli(
        "verify",
        str(repo.path),
        "--scope=unstaged",
        f"--broker={broker}",
        "--no-wait",
        f"--store={worker_env['VERIFY_DAG_STORE']}",
    )
    assert submit.returncode == 0, submit.stderr
    run_id = submit.stdout.strip()
    # The laptop goes away before any worker starts: only the bundle is left.
    laptop_copy = tmp_path / "laptop-copy"
    (tmp_path / "laptop").rename(laptop_copy)
    shared = Path(worker_env["VERIFY_DAG_STORE"])
    with workers(broker, ["w"], tmp_path / "logs", worker_env):
        deadline = time.monotonic() + 120
        while not (shared / run_id / store.META_JSON).is_file():
            assert time.monotonic() < deadline, logs(tmp_path / "logs")
            time.sleep(0.2)
    res = cli("report", run_id, "--format=json", f"--store={shared}")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    report.validate(doc)
    assert doc["status"] == "ok" and doc["scope"]["mode"] == "unstaged", doc["error"]
    assert any("F401" in t and "zipfile" in t for t in titles(doc)), titles(doc)
    _, _, meta = store.load(worker_env["VERIFY_DAG_STORE"], run_id)
    assert meta.repo == str(repo.path)
    # The worker's copy came from the bundle stored with the run.
    assert (shared / run_id / repos.BUNDLE).is_file()
    assert (Path(worker_env["VERIFY_DAG_MIRRORS"]) / "runs" / f"{run_id}.git").is_dir()


def test_backend_table_is_read_from_the_commit_in_a_bare_copy(
    remote: tuple[Repo, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verify_dag import backends
    from verify_dag.reviewers import runner

    work, _server = remote
    # timeout: one of the keys a repository may set (a backend it may not: test_repo_settings).
    work.write("pyproject.toml", "[tool.verify-dag]\ntimeout = 45\n")
    work.commit("backend")
    bare = repos.mirror(work.path.as_uri(), refresh=True, need=[])
    request = VerifyRequest(source=parse_source(str(bare)), scope="all")
    state = RunState(run_id="run-3", request=request, scope=scope.run(request))
    for key in [k for k in os.environ if k.startswith("VERIFY_DAG_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    chosen = backends.resolve(runner.backends_config(state), "reviewer")
    assert chosen is not None and (chosen.kind, chosen.timeout) == ("claude", 45.0)


def test_old_run_copies_are_swept(tmp_path: Path) -> None:
    repo = project(tmp_path / "r")
    where = tmp_path / "store"
    first = repos.prepare(
        VerifyRequest(source=parse_source(str(repo.path)), store=str(where)), "old-run"
    )
    old = repos.run_copy("old-run", first.store, first.bundle)
    stale = old.stat().st_mtime - repos.RUN_COPY_TTL - 60
    os.utime(old, (stale, stale))
    second = repos.prepare(
        VerifyRequest(source=parse_source(str(repo.path)), store=str(where)), "new-run"
    )
    new = repos.run_copy("new-run", second.store, second.bundle)
    assert new.is_dir() and not old.exists()
    assert sorted(p.name for p in new.parent.iterdir()) == ["new-run.git", "new-run.git.lock"]
