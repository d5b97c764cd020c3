"""Judgement reviewers on the fleet: they run on the `review` queue only, and a reviewer task
delivered twice under one task id returns its first answer (the model is asked once).

Real Redis (database 6), real worker processes, the fake model CLI under its real name.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery
from conftest import Repo, make_scenario, verify_branch
from fakes import install, logged_calls
from redis_workers import fresh_db, logs, workers

from verify_dag.models import RunState, VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.phases import scope

DB = 6


@pytest.fixture
def review_fleet(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """w1 serves every queue but `review` and has no model backend; w2 serves `review` only and
    has the (fake) Claude CLI configured. A reviewer that ran on w1 would say NOT_RUN."""
    broker = fresh_db(DB)
    log_dir = tmp_path / "logs"
    calls = tmp_path / "model-calls.jsonl"
    bin_dir = tmp_path / "fakebin"
    install(bin_dir, ["claude"])
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERIFY_DAG_BACKEND", "FAKE_MODEL_"))
    }
    base["VERIFY_DAG_STORE"] = str(tmp_path / "store")
    base["VERIFY_DAG_MIRRORS"] = str(tmp_path / "mirrors")
    reviewer_env = {
        **base,
        "PATH": f"{bin_dir}{os.pathsep}{base['PATH']}",
        "VERIFY_DAG_BACKEND": "claude",
        "FAKE_MODEL_LOG": str(calls),
    }
    with (
        workers(broker, ["w1"], log_dir, base, queues={"w1": "git,static,test,exercise"}),
        workers(broker, ["w2"], log_dir, reviewer_env, queues={"w2": "review"}),
    ):
        yield broker, calls, log_dir
    fresh_db(DB)


@pytest.mark.redis
def test_reviewers_run_on_the_review_queue_and_answer_once_per_task_id(
    tmp_path: Path, review_fleet: tuple[str, Path, Path]
) -> None:
    broker, calls, log_dir = review_fleet
    repo: Repo = make_scenario(tmp_path / "scenario")
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFY_DAG_BACKEND")}
    proc = subprocess.run(
        verify_branch(
            repo, "--broker", broker, "--format=json", f"--output={out}", "--timeout=120"
        ),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 1, proc.stderr + logs(log_dir)
    doc = json.loads(out.read_text())
    reviewer = next(r for r in doc["skillResults"] if r["skill"] == "reviewer")
    assert reviewer["status"] == "COMPLETED", reviewer  # ran on w2, the only one with a model
    # Task log lines name the task with its id in brackets; the start-up banner lists names only.
    assert "verify_dag.review.judgement[" in (log_dir / "w2.log").read_text()
    assert "verify_dag.review.judgement[" not in (log_dir / "w1.log").read_text()
    assert "verify_dag.test[" in (log_dir / "w1.log").read_text()
    assert len(logged_calls(calls)) == 1

    # The same reviewer task delivered twice under one id (a worker died after finishing it, say):
    # the second delivery returns the stored answer and the model is not asked again.
    request = scope.validate_request(
        VerifyRequest(source=parse_source(str(repo.path)), scope="branch", base="base")
    )
    state = RunState(run_id="again", request=request, scope=scope.run(request))
    client = Celery(broker=broker, backend=broker)
    sig = client.signature("verify_dag.review.reviewer", queue="review")
    first = sig.apply_async(args=(state.model_dump(mode="json"),), task_id="one-reviewer-id")
    # Another test's embedded worker may live in this process, which makes Celery treat every
    # get() as one made inside a task.
    answer = first.get(timeout=60, disable_sync_subtasks=False)
    again = state.model_copy(update={"run_id": "again-2"})
    sig.apply_async(args=(again.model_dump(mode="json"),), task_id="one-reviewer-id")
    deadline = time.monotonic() + 60
    w2 = log_dir / "w2.log"
    while w2.read_text().count("verify_dag.review.reviewer[one-reviewer-id] succeeded") < 2:
        assert time.monotonic() < deadline, logs(log_dir)
        time.sleep(0.1)
    assert len(logged_calls(calls)) == 2  # the verify run's call and the first delivery's, no third
    assert (
        client.AsyncResult("one-reviewer-id").get(timeout=10, disable_sync_subtasks=False) == answer
    )
    # The answer is a reference to the stored outcomes (tasks/stash.py), naming the first run.
    assert answer["run"] == "again" and answer["skills"] == {"reviewer": "COMPLETED"}
