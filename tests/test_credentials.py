"""Credentials of the client never travel (docs/security.md).

A repository URL with a password or token is refused before anything is sent or stored, on every
entry point; a worker refuses a broker password on its command line and reads the URL from the
environment or a file instead. Against real workers on Redis, with Flower watching, a password URL
and a fake API key leave zero occurrences in Redis, the worker's log, Flower's API and the store.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from conftest import calc_base, make_repo, run_cli
from redis_workers import flower as flower_process
from redis_workers import fresh_db, logs, stop, workers

from verify_dag.cli import main

PASSWORD = "pw-canary-7f3a9c"
API_KEY = "sk-canary-0b1e5d2c9a7f4e3b8d6c"
# Port 9 (discard): nothing answers there, and the refusal must come before any connection.
PASSWORD_URL = f"https://user:{PASSWORD}@127.0.0.1:9/x.git"
TOKEN = "ghp_" + "C4nary" * 6
# A GitHub token as the user part, as `git clone https://TOKEN@github.com/...` takes it.
TOKEN_URL = f"https://{TOKEN}@127.0.0.1:9/x.git"
ACCESS_TOKEN_URL = f"https://x-access-token:{TOKEN}@127.0.0.1:9/x.git"
FLOWER_AUTH = "operator:flower-pass-credentials"
# Database 7: no other test module uses it (tests/redis_workers.py).
DB = 7


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verify-dag: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


# --- repository URLs: one check for every entry point -------------------------------------------


@pytest.mark.parametrize(
    ("url", "secret", "shown"),
    [
        (PASSWORD_URL, PASSWORD, "https://user:***@127.0.0.1:9/x.git"),
        (TOKEN_URL, TOKEN, "https://***@127.0.0.1:9/x.git"),
        (ACCESS_TOKEN_URL, TOKEN, "https://x-access-token:***@127.0.0.1:9/x.git"),
    ],
)
def test_verify_refuses_a_url_with_credentials(url: str, secret: str, shown: str) -> None:
    store = Path(os.environ["VERIFY_DAG_STORE"])
    res = run_cli("verify", url, "--scope=all")
    assert res.returncode == 2, res.stderr
    line = one_error_line(res.stderr)
    assert secret not in res.stderr and secret not in res.stdout
    assert shown in line
    assert "credential helper" in line and "deploy key" in line and "ops/README.md" in line
    assert files_under(store) == []


def test_verify_through_a_broker_refuses_before_sending(tmp_path: Path) -> None:
    broker = fresh_db(DB)
    res = run_cli("verify", PASSWORD_URL, "--scope=all", f"--broker={broker}")
    assert res.returncode == 2, res.stderr
    assert PASSWORD not in one_error_line(res.stderr)
    client = redis.Redis.from_url(broker)
    try:
        assert client.dbsize() == 0, "nothing was sent or recorded"
    finally:
        client.close()
    assert files_under(Path(os.environ["VERIFY_DAG_STORE"])) == []


def test_a_fleet_entry_with_credentials_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet_file = tmp_path / "fleet.toml"
    fleet_file.write_text(
        f'[[repo]]\nurl = "https://127.0.0.1:9/ok.git"\n\n[[repo]]\nurl = "{TOKEN_URL}"\n',
        encoding="utf-8",
    )
    for command in ("run", "beat"):
        assert main(["fleet", command, str(fleet_file)]) == 2
        out, err = capsys.readouterr()
        line = one_error_line(err)
        assert out == "" and TOKEN not in err
        assert "repo 2 (https://***@127.0.0.1:9/x.git): its url carries a token" in line
        assert "credential helper" in line
    assert files_under(Path(os.environ["VERIFY_DAG_STORE"])) == []


def test_plain_urls_and_local_paths_pass() -> None:
    from verify_dag import repos, url_secrets
    from verify_dag.models.source import parse_source

    for source in (
        "https://git.example.com/team/app.git",
        "https://alice@example.com/a.git",
        "ssh://git@example.com/a.git",
        "git@example.com:team/a.git",
        "file:///srv/repos/a",
        "/srv/repos/a",
    ):
        repos.refuse_credentials(parse_source(source))
    assert url_secrets.credentials("https://ghp%5Fabc@example.com/a.git") == "a token"  # %-encoded


# --- the worker's broker: never on its command line ----------------------------------------------

# The CLI with celery's worker_main replaced by a print of what it would have run, on what broker.
SHOW_WORKER = """
import json, sys
from verify_dag.tasks.app import app
app.worker_main = lambda argv: print(json.dumps([str(app.conf.broker_url), argv]))
from verify_dag.cli import main
sys.exit(main(sys.argv[1:]))
"""


def worker_env(**values: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VERIFY_DAG_BROKER_URL", "VERIFY_DAG_BROKER_URL_FILE")
    }
    env.update(values)
    return env


def show_worker(env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SHOW_WORKER, "worker", *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_worker_refuses_a_broker_password_on_its_command_line() -> None:
    res = show_worker(worker_env(), "--broker", f"redis://:{PASSWORD}@127.0.0.1:9/0")
    assert res.returncode == 2, res.stderr
    line = one_error_line(res.stderr)
    assert PASSWORD not in res.stderr and "redis://:***@127.0.0.1:9/0" in line
    assert "VERIFY_DAG_BROKER_URL" in line and "VERIFY_DAG_BROKER_URL_FILE" in line
    assert res.stdout == "", "the worker never started"
    # Without a password the flag stays (the tests' workers use it).
    res = show_worker(worker_env(), "--broker", "redis://127.0.0.1:9/0")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)[0] == "redis://127.0.0.1:9/0"


def test_worker_reads_its_broker_from_the_url_file(tmp_path: Path) -> None:
    url_file = tmp_path / "broker-url"
    url_file.write_text(f"redis://:{PASSWORD}@127.0.0.1:9/0\n", encoding="utf-8")
    res = show_worker(worker_env(VERIFY_DAG_BROKER_URL_FILE=str(url_file)))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)[0] == f"redis://:{PASSWORD}@127.0.0.1:9/0"
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    for env, needle in (
        (worker_env(VERIFY_DAG_BROKER_URL_FILE=str(empty)), "is empty"),
        (worker_env(VERIFY_DAG_BROKER_URL_FILE=str(tmp_path / "none")), "cannot read"),
        (
            worker_env(
                VERIFY_DAG_BROKER_URL_FILE=str(url_file),
                VERIFY_DAG_BROKER_URL="redis://127.0.0.1:9/0",
            ),
            "set one",
        ),
    ):
        res = run_cli("worker", env=env, timeout=60)  # refused before celery's worker starts
        assert res.returncode == 2, res.stderr
        assert needle in one_error_line(res.stderr) and PASSWORD not in res.stderr


def test_a_real_worker_from_the_url_file_keeps_it_off_its_command_line(tmp_path: Path) -> None:
    from celery import Celery

    broker = fresh_db(DB)
    url_file = tmp_path / "broker-url"
    url_file.write_text(broker + "\n", encoding="utf-8")
    log = tmp_path / "worker.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "verify_dag.cli",
                "worker",
                "--concurrency=1",
                "--pool=solo",
                "--hostname",
                "url-file@%h",
            ],
            env=worker_env(VERIFY_DAG_BROKER_URL_FILE=str(url_file)),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        pinger = Celery(broker=broker)
        deadline = time.monotonic() + 60
        while not any(
            n.startswith("url-file@") for r in pinger.control.ping(timeout=0.5) for n in r
        ):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "worker never answered:\n" + log.read_text()
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode()
        assert broker not in cmdline and "redis://" not in cmdline
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().decode(errors="replace")
        assert broker not in environ
    finally:
        stop(proc)


# --- zero occurrences: Redis, the worker's log, Flower and the store ----------------------------


def redis_dump(url: str) -> tuple[int, str]:
    """How many keys database ``url`` holds, and every key and value in it as text."""
    client = redis.Redis.from_url(url)
    parts: list[str] = []
    count = 0
    try:
        for key in client.scan_iter(count=500):
            count += 1
            reply = client.type(key)  # bytes: the client does not decode responses
            kind = reply.decode() if isinstance(reply, bytes) else reply
            value: object = kind
            if kind == "string":
                value = client.get(key)
            elif kind == "list":
                value = client.lrange(key, 0, -1)
            elif kind == "hash":
                value = client.hgetall(key)
            elif kind == "set":
                value = client.smembers(key)
            elif kind == "zset":
                value = client.zrange(key, 0, -1, withscores=True)
            elif kind == "stream":
                value = client.xrange(key)
            parts.append(f"{key!r} {value!r}")
    finally:
        client.close()
    return count, "\n".join(parts)


def flower_get(base: str, path: str) -> str:
    req = urllib.request.Request(base + path)
    req.add_header("Authorization", "Basic " + base64.b64encode(FLOWER_AUTH.encode()).decode())
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(resp.read().decode("utf-8", "replace"))


@pytest.fixture
def flower(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """ops/flower.sh on the test's database, as tests/test_flower.py starts it."""
    broker = fresh_db(DB)
    user, password = FLOWER_AUTH.split(":", 1)
    env = worker_env(VERIFY_DAG_BROKER_URL=broker, HOME=str(tmp_path))
    with flower_process(env, tmp_path, user, password) as base:
        yield base, broker


def test_no_secret_reaches_redis_the_worker_log_flower_or_the_store(
    tmp_path: Path, flower: tuple[str, str]
) -> None:
    flower_base, broker = flower
    store = tmp_path / "shared-store"
    base_env = worker_env(
        OPENAI_API_KEY=API_KEY, VERIFY_DAG_STORE=str(store), GIT_CONFIG_NOSYSTEM="1"
    )
    repo = calc_base(make_repo(tmp_path / "good"))
    repo.write(
        "src/calc.py", "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    repo.commit("calc: sub")
    worker_home = tmp_path / "worker-home"
    worker_home.mkdir()
    worker_env_ = {
        **base_env,
        "HOME": str(worker_home),
        "VERIFY_DAG_MIRRORS": str(tmp_path / "mirrors"),
    }
    with workers(broker, ["creds"], tmp_path / "logs", worker_env_) as procs:
        deadline = time.monotonic() + 30
        # Flower keeps no history: it must see this worker's events before the runs start.
        while (
            'flower_worker_online{worker="creds@'
            not in urllib.request.urlopen(f"{flower_base}/metrics", timeout=5).read().decode()
        ):
            assert time.monotonic() < deadline, "Flower saw no worker events"
            time.sleep(0.3)
        client_env = {**base_env, "HOME": os.environ["HOME"]}
        refused = run_cli(
            "verify", PASSWORD_URL, "--scope=all", f"--broker={broker}", env=client_env
        )
        assert refused.returncode == 2, refused.stderr
        out = tmp_path / "report.json"
        ran = run_cli(
            "verify",
            str(repo.path),
            "--scope=branch",
            "--base=base",
            f"--broker={broker}",
            "--format=json",
            f"--output={out}",
            "--timeout=150",
            env=client_env,
            timeout=200,
        )
        # A finished run, whatever it found (4: no reviewer could run here).
        assert ran.returncode in (0, 1, 4), ran.stderr + logs(tmp_path / "logs")
        run_id = json.loads(out.read_text(encoding="utf-8"))["run"]["id"]
        deadline = time.monotonic() + 30
        while True:
            tasks = json.loads(flower_get(flower_base, "/api/tasks"))
            if any(
                t.get("root_id") == run_id
                and t["name"] == "verify_dag.report"
                and t["state"] == "SUCCESS"
                for t in tasks.values()
            ):
                break
            assert time.monotonic() < deadline, "Flower never saw the run's report task"
            time.sleep(0.3)
        paths = ("/api/tasks", "/api/workers", f"/api/task/info/{run_id}")
        flower_text = "".join(flower_get(flower_base, path) for path in paths)
        assert procs[0].poll() is None
    keys, dump = redis_dump(broker)
    assert keys > 0 and "celery-task-meta-" in dump  # the scan saw the run's results
    # The whole log: redis_workers.logs keeps only each file's tail.
    worker_log = "\n".join(
        p.read_text(errors="replace") for p in sorted((tmp_path / "logs").glob("*.log"))
    )
    assert "verify_dag.report" in worker_log and "succeeded" in worker_log  # INFO lines
    stored = files_under(store)
    assert any(p.name == "report.json" for p in stored)
    for secret in (PASSWORD, API_KEY):
        assert dump.count(secret) == 0, "in Redis"
        assert worker_log.count(secret) == 0, "in the worker's log"
        assert flower_text.count(secret) == 0, "in Flower's API"
        for path in stored:
            assert secret.encode() not in path.read_bytes(), path
