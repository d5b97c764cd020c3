"""Real Redis databases and real worker processes for the tests that need them.

The tests never empty a Redis they did not start. The first test that needs one starts a
redis-server of the session's own on a free loopback port (conftest.py stops it at the session's
end) and ``flush`` refuses every other server, with one exception: ``VERIFY_DAG_TEST_REDIS``
(``redis://host:port``, no database) reserves a server's databases 6-15 for the tests, and
only then is a server the session did not start used at all.

Each test module takes a database (6-15) no other module uses at the same time, so their queues,
results and broadcasts (pings) never meet. Without redis-server and without a reservation the
Redis tests skip, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import AnyStr, NoReturn

import pytest
import redis
from celery import Celery

RESERVED_ENV = "VERIFY_DAG_TEST_REDIS"


class RefusedFlush(AssertionError):
    """A flush of a Redis that is neither the session's own nor the reserved one."""


def unavailable(reason: str) -> NoReturn:
    """Skip the test; under CI, where a skipped Redis test would hide a broken setup, fail it."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def _dies_with(parent: int) -> None:
    """In the child: SIGTERM when the process that started it dies, so a session killed before
    its teardown (a timeout's SIGKILL) leaves no server behind. Linux's prctl(PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """A redis-server of the tests' own on a free loopback port, its data in ``data_dir``."""

    def __init__(self, data_dir: Path, *, appendonly: bool = False) -> None:
        self.port = free_port()
        self.dir = data_dir
        self.appendonly = appendonly
        self.base = f"redis://127.0.0.1:{self.port}"
        self.url = f"{self.base}/0"
        self.run_id = ""  # of the process now running: what identifies it to ``flush``
        self.proc: subprocess.Popen[bytes] | None = None
        data_dir.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        if shutil.which("redis-server") is None:
            unavailable(f"redis-server is not installed and {RESERVED_ENV} reserves no Redis")
        with open(self.dir / "redis.log", "ab") as fh:
            self.proc = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "yes" if self.appendonly else "no",
                    "--dir",
                    str(self.dir),
                ],
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(_dies_with, os.getpid()),
            )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 20
        try:
            while True:
                assert self.proc.poll() is None, "redis-server exited:\n" + self.log()
                with contextlib.suppress(redis.exceptions.ConnectionError):
                    self.run_id = str(client.info("server")["run_id"])
                    return
                assert time.monotonic() < deadline, "redis-server never answered:\n" + self.log()
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM: a clean shutdown (an append-only file is complete), as on a restart."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            stop(self.proc)
        self.proc = None
        self.run_id = ""

    def log(self) -> str:
        return (self.dir / "redis.log").read_text(errors="replace")[-2000:]


_session: RedisServer | None = None


def session_server() -> RedisServer:
    """The session's own redis-server, started on first use."""
    global _session
    if _session is None:
        server = RedisServer(Path(tempfile.mkdtemp(prefix="verify-dag-test-redis-")))
        try:
            server.start()
        except BaseException:
            shutil.rmtree(server.dir, ignore_errors=True)
            raise
        _session = server
    return _session


def shutdown() -> None:
    """Stop the session's redis-server, if one was started, and remove its directory."""
    global _session
    if _session is not None:
        _session.stop()
        shutil.rmtree(_session.dir, ignore_errors=True)
        _session = None


def reserved() -> str | None:
    """The server the developer reserved for the tests, read when asked (tests may set it)."""
    return os.environ.get(RESERVED_ENV) or None


def url(db: int) -> str:
    """Database ``db`` of the reserved server, else of the session's own."""
    return (reserved() or session_server().base).rstrip("/") + f"/{db}"


def _run_id(client: redis.Redis) -> str:
    return str(client.info("server")["run_id"])


def flush(where: str) -> None:
    """Empty the database ``where`` names, if its server is the session's own or the reserved
    one (the same process, by INFO's run_id, not merely the same address); else RefusedFlush."""
    client = redis.Redis.from_url(where)
    try:
        ours = {_session.run_id} if _session is not None and _session.run_id else set()
        if (reserve := reserved()) is not None:
            with contextlib.closing(redis.Redis.from_url(reserve)) as reserved_client:
                ours.add(_run_id(reserved_client))
        if _run_id(client) not in ours:
            kwargs = client.connection_pool.connection_kwargs  # the address without a password
            raise RefusedFlush(
                f"refusing to flush Redis {kwargs.get('host')}:{kwargs.get('port')} database "
                f"{kwargs.get('db')}: it is neither the redis-server this test session started "
                f"nor the one {RESERVED_ENV} reserves for the tests"
            )
        client.flushdb()
    finally:
        client.close()


def fresh_db(db: int) -> str:
    """The URL of Redis database ``db``, emptied (see the module's docstring for which Redis)."""
    where = url(db)
    try:
        flush(where)
    except redis.exceptions.ConnectionError as exc:
        who = f"the Redis {RESERVED_ENV} reserves" if reserved() else "the session's redis-server"
        pytest.fail(f"{who} does not answer: {exc}", pytrace=False)
    return where


def stop(proc: subprocess.Popen[AnyStr]) -> None:
    """End a process started in its own session with its whole group (a worker's pool)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group, if any
    proc.wait(timeout=10)


def logs(log_dir: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
        for p in sorted(log_dir.glob("*.log"))
    )


@contextlib.contextmanager
def workers(
    broker: str,
    names: Sequence[str],
    log_dir: Path,
    env: Mapping[str, str],
    concurrency: int = 2,
    queues: Mapping[str, str] | None = None,
    celery_way: bool = False,
    broker_in_env: bool = False,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``verify-dag worker`` processes named ``<name>@<host>``, up (answering a ping) for the
    block and stopped after it. Each consumes every queue unless ``queues`` gives its own
    (``{"w1": "git,static,test"}``). ``celery_way``: started as an operator starts a Celery
    worker, ``celery -A verify_dag --broker URL worker -Q ...``. ``broker_in_env``: the URL goes in
    VERIFY_DAG_BROKER_URL, as a URL with a password must (never on a command line)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    # A result cache of this group's own: a result an earlier test (or test session) stored
    # for the same repository content would otherwise stand in for the run a test is about.
    env = {"VERIFY_DAG_RESULT_CACHE": str(log_dir / "result-cache"), **env}
    # The workers' temporary files in the test's own directory: a worker a test kills with
    # SIGKILL leaves its steps' scratch directories behind, and they must not pile up in /tmp.
    (log_dir / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(log_dir / "tmp")
    if broker_in_env:
        env["VERIFY_DAG_BROKER_URL"] = broker
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name in names:
            with open(log_dir / f"{name}.log", "wb") as fh:
                serves = queues[name] if queues and name in queues else None
                procs.append(
                    subprocess.Popen(
                        [
                            *(
                                celery_argv(broker, serves)
                                if celery_way
                                else [sys.executable, "-m", "verify_dag.cli", "worker"]
                                + ([] if broker_in_env else ["--broker", broker])
                                + (["--queues", serves] if serves else [])
                            ),
                            "--concurrency",
                            str(concurrency),
                            "--loglevel",
                            "INFO",
                            "--hostname",
                            f"{name}@%h",
                        ],
                        stdout=fh,
                        stderr=subprocess.STDOUT,
                        env=dict(env),
                        start_new_session=True,
                    )
                )
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


def celery_argv(broker: str, queues: str | None) -> list[str]:
    """Celery's own command line for a verify-dag worker (ops/README.md, "Starting workers")."""
    from verify_dag.tasks.app import QUEUES

    argv = [sys.executable, "-m", "celery", "-A", "verify_dag", "--broker", broker, "worker"]
    return [*argv, "-Q", queues or ",".join(QUEUES), "-E"]


@contextlib.contextmanager
def flower(env: Mapping[str, str], cwd: Path, user: str, password: str) -> Iterator[str]:
    """ops/flower.sh, as an operator starts it (basic auth, loopback, a free port), up (its
    /healthcheck answers) for the block; yields its base URL. The broker comes from ``env``."""
    port = free_port()
    env = {
        **env,
        "FLOWER_BASIC_AUTH": f"{user}:{password}",
        "FLOWER_PORT": str(port),
        "FLOWER_ADDRESS": "127.0.0.1",
        "PYTHON": sys.executable,
    }
    log = cwd / "flower.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            ["bash", str(Path(__file__).resolve().parent.parent / "ops" / "flower.sh")],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "Flower exited:\n" + log.read_text()
            assert time.monotonic() < deadline, "Flower did not come up:\n" + log.read_text()
            try:
                urllib.request.urlopen(f"{base}/healthcheck", timeout=2).close()
                break
            except OSError:
                time.sleep(0.2)
        yield base
    finally:
        stop(proc)
