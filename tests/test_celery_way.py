"""Workers started the Celery way (ops/README.md, "Starting workers"): ``celery -A verify_dag``,
the broker from Celery's ``--broker`` or ``CELERY_BROKER_URL`` or ours, the result backend from
the same place; a worker with no broker refuses to start instead of serving nobody."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import Repo, verify_branch
from redis_workers import fresh_db, workers

from verify_dag import report

CELERY = (sys.executable, "-m", "celery", "-A", "verify_dag")
OURS = ("VERIFY_DAG_BROKER_URL", "VERIFY_DAG_BROKER_URL_FILE", "VERIFY_DAG_RESULT_BACKEND")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OURS and not k.startswith("CELERY_")}
    return {**env, **extra}


def test_a_worker_without_a_broker_refuses_to_start_in_one_line() -> None:
    proc = subprocess.run(
        [*CELERY, "worker", "-Q", "test"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "verify-dag: error: this worker has no broker (transport memory://) and would serve "
        "nobody; set VERIFY_DAG_BROKER_URL or pass Celery's --broker URL (ops/README.md, "
        '"Starting workers")'
    )


def test_two_brokers_that_disagree_are_refused() -> None:
    proc = subprocess.run(
        [*CELERY, "worker"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(
            CELERY_BROKER_URL="redis://127.0.0.1:1/1", VERIFY_DAG_BROKER_URL="redis://127.0.0.1:1/2"
        ),
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "verify-dag: error: VERIFY_DAG_BROKER_URL and CELERY_BROKER_URL name different brokers "
        "(redis://127.0.0.1:1/2 and redis://127.0.0.1:1/1); set one\n"
    )


def test_the_celery_broker_setting_gives_the_result_backend_too() -> None:
    # Celery's own variable alone: the result backend is the same Redis, never memory:///.
    code = (
        "from verify_dag.tasks.app import app; print(app.conf.broker_url, app.conf.result_backend)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(CELERY_BROKER_URL="redis://127.0.0.1:6390/3"),
    )
    assert proc.stdout.split() == ["redis://127.0.0.1:6390/3", "redis://127.0.0.1:6390/3"]


def test_a_run_on_workers_started_the_celery_way(scenario: Repo, tmp_path: Path) -> None:
    broker = fresh_db(7)
    env = clean_env(VERIFY_DAG_STORE=str(tmp_path / "worker-store"))
    with workers(broker, ["celery-way"], tmp_path / "workers", env, celery_way=True):
        out = tmp_path / "report.json"
        proc = subprocess.run(
            verify_branch(
                scenario, "--format=json", f"--output={out}", "--timeout=120", f"--broker={broker}"
            ),
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    report.validate(doc)
    assert doc["status"] == "ok"
    assert any("F841" in i["title"] for i in doc["issues"])
