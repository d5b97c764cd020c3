"""Many runs at once on a real Redis with two real workers: no run sees another run's data.

20 runs submitted at once by two clients to two workers; every run completes with its own report
and nothing crosses between runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from conftest import Repo, calc_base, make_repo
from redis_workers import fresh_db, logs, stop, workers

from verify_dag import report, store

# One unused import per repository: the finding names the module, so a report that carries
# another run's findings names the wrong one. No name is a substring of another.
MODULES = ("heapq", "textwrap", "fractions", "zipfile")
RUNS_PER_CLIENT = 10
DEADLINE = 180.0

# A client: waits for the common start signal, then submits its runs all at once and prints
# "<run id> <repository>" per run. Any submission failure fails the client (exit 1).
CLIENT = textwrap.dedent("""\
    import os, subprocess, sys, time
    go, broker, where, *repos = sys.argv[1:]
    while not os.path.exists(go):
        time.sleep(0.01)
    procs = [(repo, subprocess.Popen(
        [sys.executable, "-m", "verify_dag.cli", "verify", repo, "--scope=branch",
         "--base=base", "--broker", broker, "--store", where, "--no-wait"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) for repo in repos]
    failed = False
    for repo, proc in procs:
        out, err = proc.communicate(timeout=120)
        if proc.returncode != 0 or err:
            failed = True
            sys.stderr.write(f"{repo}: exit {proc.returncode}: {err}")
        print(out.strip(), repo, flush=True)
    sys.exit(1 if failed else 0)
""")


@pytest.fixture
def broker() -> str:
    return fresh_db(12)


def make_project(path: Path, module: str) -> Repo:
    """A tiny project whose branch adds an unused ``import <module>`` and a passing test."""
    repo = make_repo(path)
    calc_base(repo)
    repo.write(
        "src/calc.py",
        f"import {module}\n\n\ndef add(a, b):\n    return a + b\n\n\n"
        "def sub(a, b):\n    return a - b\n",
    )
    repo.write(
        "tests/test_calc.py",
        "from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
        "def test_sub():\n    assert sub(3, 1) == 2\n",
    )
    repo.commit(f"calc: sub, import {module}")
    return repo


@pytest.fixture
def two_workers(broker: str, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Two worker processes sharing one store; yields (store, log directory)."""
    where = tmp_path / "shared-store"
    log_dir = tmp_path / "logs"
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    env["VERIFY_DAG_STORE"] = str(where)
    with workers(broker, ["w1", "w2"], log_dir, env):
        yield where, log_dir


def task_workers(broker: str) -> dict[str, int]:
    """How many finished tasks each worker ran, from the result backend (result_extended)."""
    client = redis.Redis.from_url(broker)
    counts: dict[str, int] = {}
    for key in client.scan_iter("celery-task-meta-*"):
        raw = client.get(key)
        if raw is None:
            continue
        hostname = json.loads(raw).get("worker") or "?"
        counts[hostname.split("@")[0]] = counts.get(hostname.split("@")[0], 0) + 1
    return counts


def test_twenty_runs_from_two_clients_on_two_workers(
    tmp_path: Path, broker: str, two_workers: tuple[Path, Path]
) -> None:
    where, log_dir = two_workers
    repos = {module: make_project(tmp_path / f"repo-{module}", module) for module in MODULES}
    by_path = {str(repo.path): module for module, repo in repos.items()}
    paths = [str(repos[MODULES[i % len(MODULES)]].path) for i in range(2 * RUNS_PER_CLIENT)]

    go = tmp_path / "go"
    clients: list[subprocess.Popen[str]] = []
    try:
        for n in range(2):
            mine = paths[n * RUNS_PER_CLIENT : (n + 1) * RUNS_PER_CLIENT]
            clients.append(
                subprocess.Popen(
                    [sys.executable, "-c", CLIENT, str(go), broker, str(where), *mine],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            )
        go.touch()  # both clients start submitting at the same moment
        submitted: dict[str, str] = {}  # run id -> module of its repository
        for client in clients:
            out, err = client.communicate(timeout=150)
            assert client.returncode == 0 and err == "", err
            lines = out.splitlines()
            assert len(lines) == RUNS_PER_CLIENT, out
            for line in lines:
                run_id, path = line.split(" ", 1)
                store.check_run_id(run_id)
                assert run_id not in submitted, f"run id {run_id} given twice"
                submitted[run_id] = by_path[path]
    finally:
        for client in clients:
            stop(client)
    assert len(submitted) == 2 * RUNS_PER_CLIENT

    deadline = time.monotonic() + DEADLINE
    while missing := [r for r in submitted if not (where / r / "meta.json").is_file()]:
        assert time.monotonic() < deadline, (
            f"{len(missing)} of {len(submitted)} runs not in the store after {DEADLINE:.0f} s\n"
            + logs(log_dir)
        )
        time.sleep(0.25)
    # Nothing but the submitted runs landed in the store.
    assert sorted(p.name for p in where.iterdir()) == sorted(submitted)

    for run_id, module in submitted.items():
        doc, _markdown, meta = store.load(where, run_id)
        report.validate(doc)
        repo = repos[module]
        assert doc["run"]["id"] == run_id
        assert doc["scope"]["headSha"] == repo.head()
        assert (meta.run_id, meta.repo, meta.head_sha) == (run_id, str(repo.path), repo.head())
        assert (meta.status, meta.result) == ("ok", "issues-found"), (
            meta,
            doc.get("error"),
            logs(log_dir),
        )
        text = json.dumps(doc["issues"])
        assert any("F401" in i["title"] and module in i["title"] for i in doc["issues"]), text
        others = [m for m in MODULES if m != module and m in json.dumps(doc)]
        assert others == [], f"run {run_id} on {module} mentions {others}"
        tester = next(s for s in doc["skillResults"] if s["skill"] == "tester")
        assert tester["notes"].startswith("2 passed"), tester

    ran = task_workers(broker)
    assert ran.get("w1", 0) > 0 and ran.get("w2", 0) > 0, ran
