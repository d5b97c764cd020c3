"""A run's workspace: one checkout per commit per host, shared by the run's phases and removed
when the run ends; and the DAG that runs static analysis beside the suite."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, verify_json

from verify_dag import git, workspace
from verify_dag.cli import main
from verify_dag.errors import EXIT_USAGE, FatalError
from verify_dag.models import VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.tasks import workflow


def test_a_run_checks_out_each_commit_once_and_removes_it_at_the_end(
    scenario: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[str, Path]] = []
    by: dict[str, str] = {}  # commit: the thread that checked it out
    real = git.checkout_into

    def spy(repo: Any, sha: str, path: Path) -> Path:
        made.append((sha, path))
        by[sha] = threading.current_thread().name
        return real(repo, sha, path)

    monkeypatch.setattr(git, "checkout_into", spy)
    rc, doc = verify_json(scenario, tmp_path, "--scope=branch", "--base=base")
    assert rc == 1  # a failing test: the debugger checks the merge base out too
    head, base = scenario.head(), scenario.git("rev-parse", "base")
    assert sorted(sha for sha, _ in made) == sorted([head, base])
    # A branch scope's commit is known before the scope phase runs: the client checked it out
    # while its worker started (workspace.prefetch), and triage found it made. The merge base
    # is the debugger's to check out, when it needs it.
    assert by[head] == f"checkout-{head[:12]}"
    assert not by[base].startswith("checkout-")
    run_dir = workspace.run_dir(doc["run"]["id"])
    assert all(path.is_relative_to(run_dir) for _, path in made)
    assert not run_dir.exists()
    assert not any(p.name.endswith(".gone") for p in workspace.root().iterdir())
    # The phases that read the checkout did run on it: triage, static, tester, debugger.
    tester = next(s for s in doc["skillResults"] if s["skill"] == "tester")
    assert "1 passed, 1 failed" in tester["notes"]


def test_an_early_checkout_of_a_run_never_sent_is_removed(
    scenario: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI begins a branch scope's checkout before it builds the request; a request that
    is then refused (a bad setting) sends no run, and the checkout goes with the error."""
    made: list[str] = []
    real = git.checkout_into

    def spy(where: Any, sha: str, path: Path) -> Path:
        made.append(threading.current_thread().name)
        return real(where, sha, path)

    monkeypatch.setattr(git, "checkout_into", spy)
    monkeypatch.setenv("VERIFY_DAG_COMMENT_DENSITY", "lots")
    rc = main(["verify", str(scenario.path), "--scope=branch", "--base=base"])
    assert rc == EXIT_USAGE, capsys.readouterr().err
    assert made == [f"checkout-{scenario.head()[:12]}"]
    assert not workspace.root().exists() or not any(workspace.root().iterdir())


def test_a_snapshot_scope_is_checked_out_by_its_phases_not_ahead_of_them(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staged scope verifies a snapshot of the index that the scope phase makes: nothing is
    checked out ahead of the phases (HEAD would be the wrong commit), the snapshot once."""
    repo.write("a.py", "x = 1\n")
    repo.commit("one")
    repo.write("a.py", "x = 2\n")
    repo.git("add", "a.py")
    made: list[tuple[str, str]] = []
    real = git.checkout_into

    def spy(where: Any, sha: str, path: Path) -> Path:
        made.append((sha, threading.current_thread().name))
        return real(where, sha, path)

    monkeypatch.setattr(git, "checkout_into", spy)
    rc, doc = verify_json(repo, tmp_path, "--scope=staged")
    assert doc["scope"]["mode"] == "staged", rc
    assert made and not any(thread.startswith("checkout-") for _, thread in made), made
    # Triage's, the first: the snapshot, not HEAD (which the static baseline may check out).
    snapshot = made[0][0]
    assert snapshot != repo.head() and [sha for sha, _ in made].count(snapshot) == 1, made


def test_a_checkout_is_made_once_and_shared(repo: Repo) -> None:
    repo.write("a.py", "x = 1\n")
    sha = repo.commit("one")
    first = workspace.ensure("run-1", repo.path, sha)
    (first / "marker").write_text("left by a phase\n")
    again = workspace.ensure("run-1", repo.path, sha)
    assert again == first and (again / "marker").exists()
    assert workspace.home(first) == first.parent
    assert workspace.home(repo.path) is None
    other = workspace.ensure("run-2", repo.path, sha)
    assert other != first
    assert workspace.release("run-1") and not first.exists() and other.exists()
    assert not workspace.release("run-1")


def test_stale_workspaces_are_swept(repo: Repo) -> None:
    repo.write("a.py", "x = 1\n")
    sha = repo.commit("one")
    old = workspace.ensure("old-run", repo.path, sha)
    workspace.ensure("new-run", repo.path, sha)
    past = time.time() - workspace.TTL - 60
    os.utime(workspace.run_dir("old-run"), (past, past))
    assert workspace.sweep() == 1
    assert not old.exists() and workspace.run_dir("new-run").exists()


def test_run_ids_cannot_name_other_directories(repo: Repo) -> None:
    for bad in ("..", "a/b", "", "x" * 200):
        with pytest.raises(FatalError):
            workspace.run_dir(bad)


def test_static_runs_beside_the_suite_and_the_reviewers_after_static() -> None:
    """The canvas: the collecting chord's header is the tester, a chain of static analysis
    then the reviewers' own chord, and last the derived probes; nothing the reviewers read is
    missing when they start."""
    for depth in ("light", "deep"):
        plan = workflow.plan(VerifyRequest(source=parse_source("/r"), depth=depth))
        tasks = plan.canvas.tasks
        names = [getattr(t, "task", None) for t in tasks]
        assert names[:3] == ["verify_dag.scope", "verify_dag.engineer", "verify_dag.triage"]
        fan = tasks[3]
        tester, analysis, probe = fan.tasks
        assert tester.task == "verify_dag.test"
        assert probe.task == "verify_dag.probe"
        static, reviews = analysis.tasks
        assert static.task == "verify_dag.static"
        assert reviews.body.task == "verify_dag.reviews"
        assert all(t.task.startswith("verify_dag.review.") for t in reviews.tasks)
        # Celery folds what follows a chord into its body: collect, then the rest of the run.
        collect, *rest = fan.body.tasks
        assert collect.task == "verify_dag.collect"
        assert collect.kwargs["context_id"] == static.id
        assert [t.task for t in rest] == [
            "verify_dag.exerciser",
            "verify_dag.debugger",
            "verify_dag.report",
        ]


@pytest.mark.redis
def test_every_worker_host_removes_its_checkouts_when_the_run_ends(
    scenario: Repo, tmp_path: Path
) -> None:
    """Two worker "hosts" (caches and mirrors of their own, sharing the broker and the store):
    static analysis on one, the rest on the other. Each made the checkouts its tasks needed;
    the report task's host removes its own and tells the other to remove its."""
    from conftest import verify_branch
    from redis_workers import fresh_db, logs, workers

    broker = fresh_db(15)
    store = tmp_path / "store"
    base = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    caches = {name: tmp_path / name / "cache" for name in ("w1", "w2")}
    env = {**base, "VERIFY_DAG_STORE": str(store)}
    log_dir = tmp_path / "logs"
    queues = {"w1": "git,test,exercise", "w2": "static,review"}
    with contextlib.ExitStack() as stack:
        for name, cache in caches.items():
            own = {
                **env,
                "VERIFY_DAG_CACHE": str(cache),
                "VERIFY_DAG_MIRRORS": str(cache.parent / "mirrors"),
            }
            stack.enter_context(workers(broker, [name], log_dir / name, own, queues=queues))
        out = tmp_path / "report.json"
        proc = subprocess.run(
            verify_branch(scenario, f"--broker={broker}", f"--store={store}", "--format=json",
                          f"--output={out}", "--timeout=120"),
            capture_output=True, text=True, timeout=180, env=env,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr + logs(log_dir / "w1") + logs(log_dir / "w2")
        run_id = json.loads(out.read_text())["run"]["id"]
        deadline = time.monotonic() + 20
        left = [c / "runs" / run_id for c in caches.values()]
        while any(p.exists() for p in left) and time.monotonic() < deadline:
            time.sleep(0.2)
        for cache in caches.values():
            assert (cache / "runs").is_dir(), f"{cache}: no checkout was made there"
            assert not (cache / "runs" / run_id).exists(), logs(log_dir / "w2")
