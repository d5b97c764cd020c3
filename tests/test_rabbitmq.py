"""The DAG with RabbitMQ, Celery's production broker, and Redis as the result backend: a worker
and a client on the RabbitMQ at 127.0.0.1:5672 (.ci/run makes sure it answers), in a virtual
host of this test's own, made and deleted here (nothing else on that server is touched)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Repo, make_repo, run_cli, running, verify_branch
from redis_workers import fresh_db, unavailable, workers

from verify_dag import report

AMQP_HOST, AMQP_PORT = "127.0.0.1", 5672


def _answers() -> bool:
    try:
        with socket.create_connection((AMQP_HOST, AMQP_PORT), timeout=2):
            return True
    except OSError:
        return False


def _ctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    if not _answers():
        unavailable(f"no RabbitMQ answers on {AMQP_HOST}:{AMQP_PORT}")
    if shutil.which("rabbitmqctl") is None:
        unavailable("rabbitmqctl is not installed: the test cannot make a virtual host of its own")
    name = f"verify-dag-test-{uuid.uuid4().hex[:12]}"
    _ctl("add_vhost", name)
    try:
        _ctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        yield name
    finally:
        _ctl("delete_vhost", name)


def test_a_run_on_rabbitmq_with_redis_results(scenario: Repo, tmp_path: Path, vhost: str) -> None:
    broker = f"amqp://guest:guest@{AMQP_HOST}:{AMQP_PORT}/{vhost}"
    results = fresh_db(8)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_DAG_BROKER", "CELERY_"))
    }
    env.update(VERIFY_DAG_RESULT_BACKEND=results, VERIFY_DAG_STORE=str(tmp_path / "store"))
    with workers(broker, ["rabbit"], tmp_path / "workers", env, broker_in_env=True):
        out = tmp_path / "report.json"
        proc = subprocess.run(
            verify_branch(scenario, "--format=json", f"--output={out}", "--timeout=120"),
            capture_output=True,
            text=True,
            timeout=180,
            env={**env, "VERIFY_DAG_BROKER_URL": broker},
        )
        log = (tmp_path / "workers" / "rabbit.log").read_text(encoding="utf-8", errors="replace")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    report.validate(doc)
    assert doc["status"] == "ok" and any("F841" in i["title"] for i in doc["issues"])
    # The worker was on RabbitMQ, its results in Redis; the password is never logged.
    assert f"Connected to amqp://guest:**@{AMQP_HOST}:{AMQP_PORT}/{vhost}" in log
    assert "guest:guest" not in log


def test_each_queue_has_an_exchange_of_its_own(vhost: str) -> None:
    """A message published to one queue's exchange with its routing key lands in that queue
    alone: with every queue bound to one exchange and key, it was delivered five times."""
    from celery import Celery
    from kombu.connection import Connection
    from kombu.messaging import Producer

    from verify_dag.tasks.app import queues

    broker = f"amqp://guest:guest@{AMQP_HOST}:{AMQP_PORT}/{vhost}"
    # The queues as Celery completes them (a queue without an exchange gets the default one).
    app = Celery("queues", broker=broker, set_as_current=False)
    app.conf.update(task_queues=queues(), task_default_queue="git")
    with Connection(broker) as conn:
        channel = conn.channel()
        bound = [q(channel) for q in app.amqp.queues.values()]
        for q in bound:
            q.declare()
        for q in bound:
            Producer(channel).publish(
                {"to": q.name}, exchange=q.exchange, routing_key=q.routing_key
            )
        counts = {q.name: q.queue_declare(passive=True).message_count for q in bound}
        for q in bound:
            q.delete()
    assert counts == {name: 1 for name in ("git", "static", "review", "test", "exercise", "fleet")}


def test_a_run_a_worker_holds_is_not_called_orphaned(tmp_path: Path, vhost: str) -> None:
    """On RabbitMQ a delivered message is in no queue and in no list the client can read: only
    the worker can say it holds the task (query_task), so status says the run goes on."""
    broker = f"amqp://guest:guest@{AMQP_HOST}:{AMQP_PORT}/{vhost}"
    repo = make_repo(tmp_path / "repo")
    repo.write("tests/test_wait.py", "def test_wait():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    needle = f"sleep 30.{uuid.uuid4().int % 10**6}"
    repo.write(
        "tests/test_wait.py",
        f"import subprocess\n\n\ndef test_wait():\n    subprocess.run({needle.split()!r})\n",
    )
    repo.commit("slow")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_DAG_BROKER", "CELERY_"))
    }
    env.update(
        VERIFY_DAG_RESULT_BACKEND=fresh_db(8),
        VERIFY_DAG_STORE=str(tmp_path / "store"),
        VERIFY_DAG_BROKER_URL=broker,
    )
    with workers(broker, ["holder"], tmp_path / "workers", env, broker_in_env=True):
        submitted = subprocess.run(
            verify_branch(repo, "--no-wait"),
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert submitted.returncode == 0, submitted.stderr
        run_id = submitted.stdout.strip()
        deadline = time.monotonic() + 120
        while not running(needle):
            assert time.monotonic() < deadline, "the suite never started"
            time.sleep(0.2)
        said = run_cli("status", run_id, env=env)
        assert said.stdout.strip() == f"{run_id} STARTED", (said.stdout, said.stderr)
        run_cli("cancel", run_id, env=env)
