"""The same DAG on a real Redis with a real worker process started separately."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import Repo, verify_branch
from fixdata import untouched
from redis_workers import fresh_db, workers

from verify_dag import report


@pytest.fixture(scope="module")
def broker() -> str:
    return fresh_db(14)


@pytest.fixture(scope="module")
def worker(
    broker: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    # Runs submitted without --store land in the worker's default store: keep it out of $HOME.
    env["VERIFY_DAG_STORE"] = str(tmp_path_factory.mktemp("worker-store"))
    with workers(broker, ["test-worker"], tmp_path_factory.mktemp("worker"), env) as procs:
        yield procs[0]


_REAPED = re.compile(r"killed \d+ sandboxed process\(es\) a killed worker left running")


def run_verify(repo: Repo, out: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        # No reviewer or exerciser can run here (exit 4 is tested in test_dag): what is compared
        # is the report, so checks that did not run are accepted.
        verify_branch(
            repo,
            "--format=json",
            f"--output={out}",
            "--timeout=120",
            "--quiet",
            "--allow-incomplete",
            *flags,
        ),
        capture_output=True,
        text=True,
        timeout=180,
    )
    # A process that starts on this host kills the sandboxes a killed worker left running and
    # says so: another test's, killed on purpose (tests/test_sandbox.py), may be among them.
    said = [line for line in proc.stderr.splitlines() if not _REAPED.fullmatch(line)]
    assert said == [], proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    report.validate(doc)
    return proc.returncode, doc


def comparable(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (i["title"], i["severity"], i["class"], json.dumps(i["location"])) for i in doc["issues"]
    ]


def test_redis_worker_gives_the_same_findings(
    scenario: Repo, tmp_path: Path, broker: str, worker: subprocess.Popen[bytes]
) -> None:
    rc_redis, on_redis = run_verify(scenario, tmp_path / "redis.json", f"--broker={broker}")
    rc_embedded, embedded = run_verify(scenario, tmp_path / "embedded.json")
    assert rc_redis == rc_embedded == 1
    assert comparable(on_redis) == comparable(embedded)
    assert [s["status"] for s in on_redis["skillResults"]] == [
        s["status"] for s in embedded["skillResults"]
    ]
    assert any("F841" in i["title"] for i in on_redis["issues"])
    tester = next(s for s in on_redis["skillResults"] if s["skill"] == "tester")
    assert tester["notes"].startswith("1 passed, 1 failed")


def test_broker_from_environment(
    scenario: Repo, tmp_path: Path, broker: str, worker: subprocess.Popen[bytes]
) -> None:
    out = tmp_path / "env.json"
    proc = subprocess.run(
        verify_branch(scenario, "--format=json", f"--output={out}", "--timeout=120"),
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "VERIFY_DAG_BROKER_URL": broker},
    )
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    # The run id is the root task's id, and the worker stored every phase's result in Redis.
    client = redis.Redis.from_url(broker)
    assert client.exists(f"celery-task-meta-{doc['run']['id']}")


def test_deep_run_on_redis_matches_embedded(
    scenario: Repo, tmp_path: Path, broker: str, worker: subprocess.Popen[bytes]
) -> None:
    # The deep composition exercises every queue: static (baseline), test (suite, debugger),
    # review (judgement skills and comment rules), exercise (issue verification).
    rc_redis, on_redis = run_verify(
        scenario, tmp_path / "deep-redis.json", "--depth=deep", f"--broker={broker}"
    )
    rc_embedded, embedded = run_verify(scenario, tmp_path / "deep-embedded.json", "--depth=deep")
    assert rc_redis == rc_embedded == 1
    assert comparable(on_redis) == comparable(embedded)
    assert [(s["skill"], s["status"]) for s in on_redis["skillResults"]] == [
        (s["skill"], s["status"]) for s in embedded["skillResults"]
    ]

    def verdicts(doc: dict[str, Any]) -> list[tuple[str, str]]:
        return [(d["failure"], d["preExisting"]) for d in doc["debugger"]]  # paths differ

    assert verdicts(on_redis) and verdicts(on_redis) == verdicts(embedded)

    def checked(doc: dict[str, Any]) -> list[tuple[str, str]]:
        return [(e["issue"], e["status"]) for e in doc["exerciserVerification"]]  # timings differ

    assert checked(on_redis) and checked(on_redis) == checked(embedded)


def test_auto_fix_on_a_fleet_applies_what_the_workers_proposed(
    calc: Repo, tmp_path: Path, broker: str, worker: subprocess.Popen[bytes]
) -> None:
    # The workers propose (ruff's fixes, read in their own copy of the run's bundle) and re-check
    # the fixed change, shipped in a bundle of its own; the client applies.
    before = untouched(calc)
    _, doc = run_verify(calc, tmp_path / "fix.json", f"--broker={broker}", "--mode=auto-fix")
    fixes = [(f["origin"], f["applied"], f["verified"]) for f in doc["fixes"]]
    assert fixes.count(("ruff", True, "fixed")) == 2, doc["fixes"]
    text = (calc.path / "src/calc.py").read_text(encoding="utf-8")
    assert "import os" not in text and "import sys" not in text
    assert untouched(calc) == before


def test_an_errored_run_fails_its_report_task_and_still_delivers_the_report(
    scenario: Repo, tmp_path: Path, broker: str, worker: subprocess.Popen[bytes]
) -> None:
    # Operators see a broken run as FAILURE (Flower's Failed filter); the client its report.
    out = tmp_path / "error.json"
    proc = subprocess.run(
        [
            *verify_branch(scenario, "--format=json", f"--output={out}", f"--broker={broker}"),
            "--base=nope",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    report.validate(doc)
    assert doc["status"] == "error" and doc["error"]["code"] == "INVALID_BASE"
    client = redis.Redis.from_url(broker)

    def meta(task_id: str) -> dict[str, Any]:
        raw = client.get(f"celery-task-meta-{task_id}")
        assert isinstance(raw, bytes), task_id
        found: dict[str, Any] = json.loads(raw)
        return found

    sentinel = meta(f"{doc['run']['id']}-sentinel")
    final = meta(sentinel["result"]["final"])
    assert final["status"] == "FAILURE" and final["result"]["exc_type"] == "RunFailed"
    assert final["result"]["exc_message"][0].startswith(f"run {doc['run']['id']} error: ")
