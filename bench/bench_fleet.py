"""Fleet scale: many small repositories verified by 1, 2 and 4 workers on a loopback Redis, and
by two worker "hosts" that share only the broker and the report store.

Run by hand: ``python bench/bench_fleet.py [--repos 40] [--workers 1,2,4]``. It starts its own
redis-server on a free port (nothing else is touched), makes ``--repos`` small repositories (a
calculator with a change that adds a function, an unused import and a test), and for each worker
count starts that many ``verify-dag worker`` processes of concurrency 1, each with mirrors, cache
and result cache of its own (a host of its own, cold), submits every repository with
``verify --no-wait`` from a third directory, and waits until every report is in the shared store.

It prints, per worker count, the wall time from the first submission to the last report, runs
per minute, and the scaling efficiency (runs per minute over the single worker's, divided by
the worker count); then the two-host run's figures and whether every report is complete. On a
2-core machine more than two workers only queue behind each other: the efficiency says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pairs import machine

CLI = (sys.executable, "-m", "verify_dag.cli")
PYPROJECT = '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n'


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(path: Path, n: int) -> Path:
    (path / "src").mkdir(parents=True)
    (path / "tests").mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@example.com")
    git(path, "config", "user.name", "bench")
    (path / "pyproject.toml").write_text(PYPROJECT)
    (path / "src/calc.py").write_text("def add(a, b):\n    return a + b\n")
    (path / "tests/test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
    )
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    git(path, "tag", "base")
    (path / "src/calc.py").write_text(
        f"import os\n\n\ndef add(a, b):\n    return a + b\n\n\ndef mul{n}(a, b):\n"
        "    return a * b\n"
    )
    (path / "tests/test_mul.py").write_text(
        f"from calc import mul{n}\n\n\ndef test_mul():\n    assert mul{n}(3, 4) == 12\n"
    )
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "mul")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@contextmanager
def hosts(broker: str, n: int, root: Path, store: Path) -> Iterator[None]:
    """``n`` workers, each a host of its own: its own mirrors, caches and result cache."""
    procs = []
    try:
        for i in range(n):
            home = root / f"host{i}"
            home.mkdir(parents=True)
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("VERIFY_DAG_")},
                "HOME": str(home),
                "VERIFY_DAG_MIRRORS": str(home / "mirrors"),
                "VERIFY_DAG_CACHE": str(home / "cache"),
                "VERIFY_DAG_RESULT_CACHE": str(home / "results"),
                "VERIFY_DAG_STORE": str(store),
            }
            with open(home / "worker.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [
                            *CLI,
                            "worker",
                            "--broker",
                            broker,
                            "--concurrency",
                            "1",
                            "--hostname",
                            f"host{i}@%h",
                            "--loglevel",
                            "WARNING",
                        ],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        wait_for_workers(broker, n)
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)


def wait_for_workers(broker: str, n: int) -> None:
    from celery import Celery

    app = Celery(broker=broker)
    deadline = time.monotonic() + 60
    while len(app.control.ping(timeout=0.5)) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{n} workers did not come up")


def verify_all(broker: str, repos: list[Path], store: Path, client_dir: Path) -> tuple[float, int]:
    """Submit every repository, wait for every report; (wall seconds, complete reports)."""
    env = {**os.environ, "VERIFY_DAG_STORE": str(store), "HOME": str(client_dir)}
    start = time.perf_counter()
    ids = []
    for repo in repos:
        out = subprocess.run(
            [
                *CLI,
                "verify",
                str(repo),
                "--scope=branch",
                "--base=base",
                "--no-wait",
                "--broker",
                broker,
            ],
            cwd=client_dir,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        ids.append(out.stdout.strip())
    pending = set(ids)
    while pending:
        pending = {r for r in pending if not (store / r / "meta.json").is_file()}
        time.sleep(0.2)
    wall = time.perf_counter() - start
    complete = 0
    for r in ids:
        doc = json.loads((store / r / "report.json").read_text())
        complete += doc["status"] == "ok" and doc["overall"]["result"] == "issues-found"
    return wall, complete


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=40)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    if shutil.which("redis-server") is None:
        sys.exit("bench_fleet: redis-server is not installed")
    print(machine())
    with tempfile.TemporaryDirectory(prefix="verify-dag-fleet-bench-") as tmp:
        root = Path(tmp)
        repos = [make_repo(root / "repos" / f"r{i:02d}", i) for i in range(args.repos)]
        client = root / "client"
        client.mkdir()
        with redis_server(root) as broker:
            rpm1 = None
            for n in counts:
                store = root / f"store-{n}"
                with hosts(broker, n, root / f"workers-{n}", store):
                    wall, ok = verify_all(broker, repos, store, client)
                rpm = args.repos / wall * 60
                rpm1 = rpm1 or rpm * (1 if n == 1 else float("nan"))
                eff = (rpm / rpm1) / n if rpm1 == rpm1 else float("nan")
                print(
                    f"{n} worker(s): {args.repos} runs in {wall:.1f} s, {rpm:.1f} runs/min, "
                    f"scaling efficiency {eff:.2f}, {ok}/{args.repos} complete reports"
                )
            store = root / "store-two-hosts"
            with hosts(broker, 2, root / "two-hosts", store):
                wall, ok = verify_all(broker, repos, store, client)
            print(
                f"two hosts (own mirrors and caches, shared broker and store), submitted from a "
                f"third directory: {args.repos} runs in {wall:.1f} s, "
                f"{args.repos / wall * 60:.1f} runs/min, {ok}/{args.repos} complete reports"
            )


if __name__ == "__main__":
    main()
