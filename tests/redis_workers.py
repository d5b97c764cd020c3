"""Real Redis databases and real worker processes for the tests that need them.

Each test module takes a database of its own (6, 8-15) so their queues, results and broadcasts
(pings) never meet. CI sets VERIFY_DAG_TEST_REDIS after starting Redis, so there a missing server
fails the test instead of skipping it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
import redis
from celery import Celery

CI_URL = os.environ.get("VERIFY_DAG_TEST_REDIS")


def url(db: int) -> str:
    return (CI_URL or "redis://127.0.0.1:6379").rstrip("/") + f"/{db}"


def fresh_db(db: int) -> str:
    """The URL of Redis database ``db``, emptied; skipped when there is no Redis outside CI."""
    where = url(db)
    client = redis.Redis.from_url(where)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        if CI_URL:
            raise
        pytest.skip(f"no Redis at {where}: {exc}")
    client.flushdb()
    return where


def stop(proc: subprocess.Popen[bytes]) -> None:
    """End a process started in its own session with its whole group (a worker's pool)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group, if any
    proc.wait(timeout=10)


def logs(log_dir: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                     for p in sorted(log_dir.glob("*.log")))


@contextlib.contextmanager
def workers(broker: str, names: Sequence[str], log_dir: Path, env: Mapping[str, str],
            concurrency: int = 2, queues: Mapping[str, str] | None = None,
            ) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``verify-dag worker`` processes named ``<name>@<host>``, up (answering a ping) for the
    block and stopped after it. Each consumes every queue unless ``queues`` gives its own
    (``{"w1": "git,static,test"}``)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name in names:
            with open(log_dir / f"{name}.log", "wb") as fh:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "verify_dag.cli", "worker", "--broker", broker,
                     "--concurrency", str(concurrency), "--loglevel", "INFO",
                     "--hostname", f"{name}@%h",
                     *(["--queues", queues[name]] if queues and name in queues else [])],
                    stdout=fh, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True,
                ))
        pinger = Celery(broker=broker)
        deadline = time.monotonic() + 60
        while True:
            replies = pinger.control.ping(timeout=0.5)
            if set(names) <= {n.split("@")[0] for reply in replies for n in reply}:
                break
            for proc in procs:
                assert proc.poll() is None, logs(log_dir)
            assert time.monotonic() < deadline, "workers did not come up:\n" + logs(log_dir)
        yield procs
    finally:
        for proc in procs:
            stop(proc)
