"""The suite's Redis helpers never empty a Redis the session did not start.

A developer's own Redis is played by a "foreign" redis-server with a canary key in each of its 16
databases. The main test puts it where a developer's machine has it, 127.0.0.1:6379, inside a
network namespace of its own (``unshare``), so the machine's real 6379 is never in reach, and runs
the suite's helpers there in a child interpreter, exactly as the Redis tests call them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis_workers

DATABASES = range(16)
SUITE_DATABASES = (6, *range(8, 16))  # the ones the test modules take (tests/redis_workers.py)
TESTS = Path(__file__).resolve().parent
RESERVED = "VERIFY_DAG_TEST_REDIS"  # spelled out: the contract the README documents
# How a helper may end other than returning (RefusedFlush is an AssertionError; helpers that
# predate the guard have no ``flush``), recorded rather than raised so the canaries are read.
ENDINGS = (
    AssertionError,
    AttributeError,
    redis.exceptions.RedisError,
    pytest.skip.Exception,
    pytest.fail.Exception,
)


def start_foreign(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    """A redis-server the session did not start, with a canary in every database. Started with
    nothing from redis_workers, so this also runs against helpers that predate the guard."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "redis.log", "ab") as fh:
        proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(data_dir),
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 20
    while True:
        assert proc.poll() is None, (data_dir / "redis.log").read_text()
        try:
            for db in DATABASES:
                with contextlib.closing(redis.Redis(port=port, db=db)) as client:
                    client.set("canary", f"db {db}")
            return proc
        except redis.exceptions.ConnectionError:
            assert time.monotonic() < deadline, (data_dir / "redis.log").read_text()
            time.sleep(0.05)


def canaries(port: int) -> dict[int, str | None]:
    """Each database's canary (None: gone)."""
    found: dict[int, str | None] = {}
    for db in DATABASES:
        with contextlib.closing(redis.Redis(port=port, db=db)) as client:
            value = client.get("canary")
            found[db] = value.decode() if isinstance(value, bytes) else value
    return found


def planted(*emptied: int) -> dict[int, str | None]:
    return {db: None if db in emptied else f"db {db}" for db in DATABASES}


def stop_foreign(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def loopback_up() -> None:
    """``ip link set lo up`` without needing iproute2: a new network namespace's lo is down."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, siocgifflags, request))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH14s", b"lo", flags | iff_up, b""))


def developer_machine(data_dir: Path) -> None:
    """Run in the namespace: the foreign Redis on 6379, then the helpers as the modules call
    them, nothing reserved. Prints what happened as JSON."""
    loopback_up()
    os.environ.pop(RESERVED, None)
    foreign = start_foreign(data_dir / "foreign", 6379)
    result: dict[str, Any] = {"fresh": {}, "refused": {}}
    try:
        for db in SUITE_DATABASES:
            try:
                result["fresh"][db] = redis_workers.fresh_db(db)
            except ENDINGS as exc:
                result["fresh"][db] = f"{type(exc).__name__}: {exc}"
        for db in DATABASES:
            try:
                redis_workers.flush(f"redis://127.0.0.1:6379/{db}")
                result["refused"][db] = "flushed"
            except ENDINGS as exc:
                result["refused"][db] = f"{type(exc).__name__}: {exc}"
        result["canaries"] = canaries(6379)
    finally:
        with contextlib.suppress(AttributeError):  # helpers that predate the session server
            redis_workers.shutdown()
        stop_foreign(foreign)
    print(json.dumps(result))


def in_namespace() -> list[str]:
    """``unshare``'s argv for an unprivileged user, network (loopback only) and PID namespace:
    its processes can reach no server outside it and end with it."""
    argv = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child"]
    if shutil.which("unshare") is None:
        redis_workers.unavailable("unshare (util-linux) is not installed")
    probe = subprocess.run([*argv, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        redis_workers.unavailable(f"no unprivileged namespaces here: {probe.stderr.strip()}")
    return argv


@pytest.fixture
def foreign(tmp_path: Path) -> Iterator[int]:
    """The port of a foreign Redis (the session did not start it) on this machine."""
    if shutil.which("redis-server") is None:
        redis_workers.unavailable("redis-server is not installed")
    port = redis_workers.free_port()
    proc = start_foreign(tmp_path / "foreign", port)
    try:
        yield port
    finally:
        stop_foreign(proc)


def test_a_redis_at_the_default_address_is_never_flushed(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        redis_workers.unavailable("redis-server is not installed")
    code = (
        "import sys; from pathlib import Path; sys.path[:0] = [sys.argv[1]]; "
        "import test_redis_isolation as t; t.developer_machine(Path(sys.argv[2]))"
    )
    env = {k: v for k, v in os.environ.items() if k != RESERVED}
    proc = subprocess.run(
        [*in_namespace(), sys.executable, "-c", code, str(TESTS), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    # json made the database numbers strings.
    assert {int(db): v for db, v in result["canaries"].items()} == planted(), result
    for db, where in result["fresh"].items():
        # The helpers used the session's own server: a free port, not the developer's 6379.
        assert where.startswith("redis://127.0.0.1:") and where.endswith(f"/{db}"), result
        assert not where.startswith("redis://127.0.0.1:6379/"), result
    assert all(
        v.startswith("RefusedFlush: refusing to flush Redis 127.0.0.1:6379")
        for v in result["refused"].values()
    ), result


def test_flush_refuses_a_server_the_session_did_not_start(foreign: int) -> None:
    for db in DATABASES:
        with pytest.raises(redis_workers.RefusedFlush, match="neither the redis-server"):
            redis_workers.flush(f"redis://127.0.0.1:{foreign}/{db}")
    assert canaries(foreign) == planted()


def test_a_reserved_server_is_used_only_when_reserved(
    foreign: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RESERVED, raising=False)
    own = redis_workers.fresh_db(6)
    assert own == f"{redis_workers.session_server().base}/6" and f":{foreign}/" not in own
    assert canaries(foreign) == planted()

    monkeypatch.setenv(RESERVED, f"redis://127.0.0.1:{foreign}")
    assert redis_workers.fresh_db(6) == f"redis://127.0.0.1:{foreign}/6"
    assert canaries(foreign) == planted(6)  # the reserved database, and only that one
    redis_workers.flush(own)  # the session's own server stays flushable

    monkeypatch.delenv(RESERVED)
    assert redis_workers.url(8) == f"{redis_workers.session_server().base}/8"
    with pytest.raises(redis_workers.RefusedFlush):
        redis_workers.flush(f"redis://127.0.0.1:{foreign}/8")
    assert canaries(foreign) == planted(6)


@pytest.mark.parametrize(
    ("ci", "outcome"), [("", pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
def test_without_redis_server_the_tests_skip_except_under_ci(
    ci: str, outcome: type[BaseException], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server on it
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="redis-server is not installed"):
        redis_workers.RedisServer(tmp_path / "redis").start()
