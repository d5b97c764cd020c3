"""Following a run submitted with --no-wait: ``wait`` prints its report when it lands,
``cancel`` revokes it and marks it cancelled, and ``status`` says when a run can no longer
finish (its messages purged) instead of PENDING forever. A real Redis and a real worker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CLI, Repo, run_cli
from redis_workers import fresh_db, workers


@pytest.fixture(scope="module")
def broker() -> str:
    return fresh_db(9)


def env_for(tmp_path: Path, broker: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_DAG_BROKER", "CELERY_"))
    }
    return {**env, "VERIFY_DAG_BROKER_URL": broker, "VERIFY_DAG_STORE": str(tmp_path / "store")}


def submit(scenario: Repo, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [*CLI, "verify", str(scenario.path), "--scope=branch", "--base=base", "--no-wait"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture
def worker(broker: str, tmp_path: Path) -> Iterator[None]:
    env = env_for(tmp_path, broker)
    with workers(broker, ["follow"], tmp_path / "workers", env):
        yield


def test_wait_prints_the_report_and_exits_with_its_code(
    scenario: Repo, tmp_path: Path, broker: str, worker: None
) -> None:
    env = env_for(tmp_path, broker)
    run_id = submit(scenario, env)
    waited = run_cli("wait", run_id, "--timeout=120", env=env, timeout=180)
    assert waited.returncode == 1, waited.stderr
    assert waited.stdout.startswith("# Verification Report")
    status = run_cli("status", run_id, env=env)
    assert status.stdout.startswith(f"{run_id} SUCCESS result=issues-found exit=1")


def test_a_purged_run_is_orphaned_and_wait_stops(
    scenario: Repo, tmp_path: Path, broker: str
) -> None:
    # No worker: the run's first message waits in the queue, until it is purged.
    env = env_for(tmp_path, broker)
    run_id = submit(scenario, env)
    assert run_cli("status", run_id, env=env).stdout.strip() == f"{run_id} PENDING"
    purge = subprocess.run(
        # This interpreter's celery, as the other tests start it: the venv's bin may not be on PATH.
        [sys.executable, "-m", "celery", "-A", "verify_dag", "purge", "-f"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert purge.returncode == 0, purge.stderr
    said = run_cli("status", run_id, env=env).stdout.strip()
    assert said == (
        f"{run_id} ORPHANED (no worker and no queue holds its unfinished tasks: purged, or lost "
        "by the broker; it will not finish)"
    )
    start = time.monotonic()
    waited = run_cli("wait", run_id, "--timeout=60", env=env, timeout=90)
    assert waited.returncode == 3 and time.monotonic() - start < 20
    assert waited.stderr == f"verify-dag: error: no report will come: {said}\n"


def test_cancel_revokes_a_run_and_marks_it_cancelled(
    scenario: Repo, tmp_path: Path, broker: str
) -> None:
    env = env_for(tmp_path, broker)
    run_id = submit(scenario, env)
    cancelled = run_cli("cancel", run_id, env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith(f"{run_id} CANCELLED (")
    assert (tmp_path / "store" / run_id / "cancelled.json").is_file()
    said = run_cli("status", run_id, env=env).stdout.strip()
    assert said == f"{run_id} CANCELLED (verify-dag cancel; no report will come)"
    waited = run_cli("wait", run_id, "--timeout=30", env=env, timeout=60)
    assert waited.returncode == 3 and "no report will come" in waited.stderr
    again = run_cli("cancel", run_id, env=env)
    assert again.returncode == 0  # cancelling twice is harmless
    # A worker that starts later (it never heard the revocation) leaves the run alone.
    with workers(broker, ["late"], tmp_path / "late", env):
        deadline = time.monotonic() + 30
        log = tmp_path / "late" / "late.log"
        while "was cancelled: phase not run" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
    assert not (tmp_path / "store" / run_id / "report.json").exists()


def slow_suite(repo: Repo, seconds: int) -> None:
    """A change whose test suite sleeps ``seconds``."""
    repo.write("calc.py", "def add(a, b):\n    return a + b\n")
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\npythonpath = ["."]\n')
    repo.write(
        "tests/test_slow.py",
        f"import time\n\nfrom calc import add\n\n\ndef test_slow():\n"
        f"    time.sleep({seconds})\n    assert add(1, 2) == 3\n",
    )
    repo.commit("base")
    repo.git("tag", "base")
    repo.write(
        "calc.py", "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    repo.commit("sub")


def test_timeout_on_a_broker_leaves_the_run_to_land_in_the_store(
    repo: Repo, tmp_path: Path, broker: str, worker: None
) -> None:
    """--timeout bounds the wait, not the run: the client leaves with one line naming the run,
    and the workers finish it into the store, where wait finds it."""
    slow_suite(repo, 8)
    env = env_for(tmp_path, broker)
    proc = run_cli(
        "verify", str(repo.path), "--scope=branch", "--base=base", "--timeout=2", env=env
    )
    assert proc.returncode == 3, proc.stderr
    (line,) = [e for e in proc.stderr.splitlines() if "error:" in e]
    run_id = line.split("(run ")[1].split(")")[0]
    assert line == (
        f"verify-dag: error: no report after 2 s (run {run_id}); the run goes on, and its report "
        f"will land in the store (`verify-dag wait {run_id}` waits for it; is a worker consuming "
        "the git, static, review, test and exercise queues?)"
    )
    waited = run_cli("wait", run_id, "--timeout=120", env=env, timeout=180)
    assert waited.stdout.startswith("# Verification Report"), waited.stderr
    status = run_cli("status", run_id, env=env)
    assert status.stdout.startswith(f"{run_id} SUCCESS"), status.stdout


def test_timeout_in_process_stops_the_run_and_records_it(repo: Repo, tmp_path: Path) -> None:
    """In-process the run would die with the client half-way: it is stopped at the timeout (its
    suite, sleeping far longer than the test may take, is killed) and the store says so."""
    slow_suite(repo, 900)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_DAG_", "CELERY_"))}
    env["VERIFY_DAG_STORE"] = str(tmp_path / "store")
    proc = run_cli(
        *("verify", str(repo.path), "--scope=branch", "--base=base", "--timeout=3"),
        env=env,
        timeout=240,  # the suite sleeps 900 s: only a stopped run ends before this
    )
    assert proc.returncode == 3, proc.stderr
    (line,) = [e for e in proc.stderr.splitlines() if "error:" in e]
    run_id = line.split("(run ")[1].split(")")[0]
    assert line == (
        f"verify-dag: error: no report after 3 s (run {run_id}): the run was stopped and "
        f"recorded as cancelled in {tmp_path / 'store' / run_id}"
    )
    status = run_cli("status", run_id, env=env)
    assert status.stdout.strip() == (
        f"{run_id} CANCELLED (stopped at --timeout=3 s; no report will come)"
    )
