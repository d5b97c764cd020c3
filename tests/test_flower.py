"""Flower against a real Redis and a real worker: the run's tasks, as an operator sees them.

Flower is started with ``ops/flower.sh`` (basic auth required, persistent off), a worker with
``verify-dag worker``, and one verification is run through them. The checks then read Flower's
API, its Prometheus endpoint, and its task page in headless Chromium.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, make_scenario, verify_branch
from redis_workers import flower as flower_process
from redis_workers import fresh_db, workers

CHROMIUM = Path("/usr/bin/chromium")
USER, PASSWORD = "operator", "flower-pass-42"
SECRET = "sekrit-123"


@dataclass
class Run:
    run_id: str
    repo: Path
    doc: dict[str, Any]


@dataclass
class Flower:
    base: str
    log: Path


def get(url: str, auth: bool = True, timeout: float = 10) -> tuple[int, str]:
    req = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def isolated_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VERIFY_DAG_BROKER_URL", "GIT_DIR") and not k.startswith("FLOWER_")
    }
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1")
    return env


@pytest.fixture(scope="module")
def broker() -> str:
    return fresh_db(13)


@pytest.fixture(scope="module")
def flower(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flower]:
    tmp = tmp_path_factory.mktemp("flower")
    env = {**isolated_env(tmp), "VERIFY_DAG_BROKER_URL": broker}
    with flower_process(env, tmp, USER, PASSWORD) as base:
        yield Flower(base, tmp / "flower.log")


@pytest.fixture(scope="module")
def worker(
    broker: str, flower: Flower, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[subprocess.Popen[bytes]]:
    tmp = tmp_path_factory.mktemp("worker")
    env = isolated_env(tmp)
    env["VERIFY_DAG_STORE"] = str(tmp / "store")
    with workers(broker, ["flower-test"], tmp / "logs", env) as procs:
        # Flower keeps no history (persistent off): before submitting, make sure it is already
        # receiving this worker's events (its heartbeats set flower_worker_online).
        deadline = time.monotonic() + 30
        while (
            'flower_worker_online{worker="flower-test@'
            not in get(f"{flower.base}/metrics", auth=False)[1]
        ):
            assert time.monotonic() < deadline, (
                "Flower saw no worker events:\n" + flower.log.read_text()
            )
            time.sleep(0.3)
        yield procs[0]


@pytest.fixture(scope="module")
def run(
    broker: str,
    flower: Flower,
    worker: subprocess.Popen[bytes],
    tmp_path_factory: pytest.TempPathFactory,
) -> Run:
    tmp = tmp_path_factory.mktemp("run")
    env = isolated_env(tmp)
    # A secret in the client's environment must never reach Flower.
    env["VERIFY_DAG_TEST_SECRET_TOKEN"] = SECRET
    env["VERIFY_DAG_STORE"] = str(tmp / "store")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        repo = make_scenario(tmp / "scenario")
    out = tmp / "report.json"
    proc = subprocess.run(
        verify_branch(
            repo, f"--broker={broker}", "--format=json", f"--output={out}", "--timeout=120"
        ),
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr  # the scenario has findings
    doc = json.loads(out.read_text(encoding="utf-8"))
    run_id = doc["run"]["id"]
    # Events reach Flower asynchronously: wait until it has seen the report task finish.
    deadline = time.monotonic() + 30
    while True:
        tasks = run_tasks(flower, run_id)
        if any(
            t["name"] == "verify_dag.report" and t["state"] == "SUCCESS" for t in tasks.values()
        ):
            break
        assert time.monotonic() < deadline, (
            f"Flower never saw the run's report task: {sorted(t['name'] for t in tasks.values())}"
        )
        time.sleep(0.3)
    return Run(run_id, repo.path, doc)


def run_tasks(flower: Flower, run_id: str) -> dict[str, dict[str, Any]]:
    status, body = get(f"{flower.base}/api/tasks")
    assert status == 200, body
    tasks: dict[str, dict[str, Any]] = json.loads(body)
    return {tid: t for tid, t in tasks.items() if t.get("root_id") == run_id}


def test_api_requires_credentials(flower: Flower, run: Run) -> None:
    for path in (
        "/api/tasks",
        "/api/workers",
        f"/api/task/info/{run.run_id}",
        "/tasks",
        f"/task/{run.run_id}",
    ):
        status, _ = get(flower.base + path, auth=False)
        assert status == 401, path


def test_api_lists_the_run_by_root_with_argsrepr_only(flower: Flower, run: Run) -> None:
    status, body = get(f"{flower.base}/api/tasks")
    assert status == 200
    assert SECRET not in body
    tasks = run_tasks(flower, run.run_id)
    names = {t["name"] for t in tasks.values()}
    assert {
        "verify_dag.scope",
        "verify_dag.engineer",
        "verify_dag.triage",
        "verify_dag.static",
        "verify_dag.test",
        "verify_dag.review.judgement",
        "verify_dag.collect",
        "verify_dag.debugger",
        "verify_dag.exerciser",
        "verify_dag.report",
    } <= names
    # The run id is the root task's id: the scope task.
    assert tasks[run.run_id]["name"] == "verify_dag.scope"
    for t in tasks.values():
        phase = t["name"].removeprefix("verify_dag.")
        assert t["args"] == f"repo={run.repo} phase={phase} run={run.run_id}", t
        assert t["kwargs"] == "{}", t
        assert "run_id" not in t["args"] and "request" not in t["args"]  # no state dict
    info_status, info = get(f"{flower.base}/api/task/info/{run.run_id}")
    assert info_status == 200
    assert SECRET not in info
    assert json.loads(info)["args"] == f"repo={run.repo} phase=scope run={run.run_id}"
    # Progress reaches Flower as task events: they are counted per type in /metrics.
    metrics = get(f"{flower.base}/metrics", auth=False)[1]
    assert 'type="task-progress"' in metrics, metrics


def test_metrics_is_prometheus_text(flower: Flower, run: Run) -> None:
    status, body = get(f"{flower.base}/metrics", auth=False)
    assert status == 200
    assert "# TYPE flower_events_total counter" in body
    assert 'flower_events_total{task="verify_dag.report",type="task-succeeded"' in body
    assert SECRET not in body


def test_task_page_in_headless_chromium(flower: Flower, run: Run, tmp_path: Path) -> None:
    url = f"http://{USER}:{PASSWORD}@{flower.base.removeprefix('http://')}/task/{run.run_id}"
    dom = chromium_dom(url, tmp_path)
    assert run.run_id in dom, dom[:2000]
    assert "verify_dag.scope" in dom, dom[:2000]
    assert "phase=scope" in dom
    assert SECRET not in dom


def chromium_dom(url: str, tmp_path: Path, wait_ms: int = 0) -> str:
    """The page at ``url`` as headless Chromium renders it (Debian's package); ``wait_ms`` of
    virtual time lets a page that fills itself by script (the Tasks table) do so first."""
    if not CHROMIUM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium package")
        pytest.skip(f"no {CHROMIUM}")
    proc = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'chromium'}",
            *([f"--virtual-time-budget={wait_ms}"] if wait_ms else []),
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_task_list_shows_what_an_operator_needs_on_one_screen(
    flower: Flower, run: Run, tmp_path: Path
) -> None:
    # ops/flower.sh sets the columns: name, the argsrepr (repo, phase, run), state, times, worker.
    dom = chromium_dom(
        f"http://{USER}:{PASSWORD}@{flower.base.removeprefix('http://')}/tasks", tmp_path
    )
    columns = re.findall(r'<th data-column="([a-z_]+)"', dom)
    want = ["name", "args", "state", "result", "started", "runtime", "worker"]
    # Once DataTables has laid the table out (scrollX), the header row is there twice: its
    # scrolling head and the table's own. Whether it has by the time the DOM is dumped depends
    # on the machine's load.
    assert columns in (want, want + want), dom[:2000]


def test_an_operator_reads_the_runs_verdict_where_its_tasks_are_listed(
    flower: Flower, run: Run, tmp_path: Path
) -> None:
    """Searching the Tasks page for a run id lists its tasks; the report task's Result column
    starts with the run's verdict, its exit code and where the store keeps it."""
    (report,) = [
        t for t in run_tasks(flower, run.run_id).values() if t["name"] == "verify_dag.report"
    ]
    stored = run.doc["run"]["id"]
    assert report["state"] == "SUCCESS"
    assert report["result"].startswith("{'verdict': 'issues found', 'exit_code': 1, 'stored': '")
    assert f"/{stored}'" in report["result"].split(", 'report'")[0]
    dom = chromium_dom(
        f"http://{USER}:{PASSWORD}@{flower.base.removeprefix('http://')}/tasks",
        tmp_path,
        wait_ms=10000,
    )
    assert "'verdict': 'issues found', 'exit_code': 1" in html.unescape(dom), dom[-3000:]


def test_only_workers_appear_as_workers(flower: Flower, run: Run) -> None:
    """Clients send no events of their own: Flower's worker list and its metrics' worker label
    name the run's worker alone, not one more 'worker' per client process."""
    metrics = get(f"{flower.base}/metrics", auth=False)[1]
    labels = set(re.findall(r'worker="([^"]+)"', metrics))
    assert labels and all(w.startswith("flower-test@") for w in labels), labels
    status, body = get(f"{flower.base}/api/workers")
    assert status == 200 and all(w.startswith("flower-test@") for w in json.loads(body)), body


def test_a_run_that_errored_shows_as_failed_with_its_run_id(
    broker: str, flower: Flower, run: Run, tmp_path: Path
) -> None:
    env = isolated_env(tmp_path)
    env["VERIFY_DAG_STORE"] = str(tmp_path / "store")
    out = tmp_path / "error.json"
    argv = [*CLI, "verify", str(run.repo), "--scope=branch", "--base=nope", f"--broker={broker}"]
    proc = subprocess.run(
        [*argv, "--format=json", f"--output={out}"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert proc.returncode == 3, proc.stderr  # the report still reaches the client
    assert out.is_file(), proc.stderr
    run_id = json.loads(out.read_text(encoding="utf-8"))["run"]["id"]
    deadline = time.monotonic() + 30
    while True:
        _, body = get(f"{flower.base}/api/tasks?state=FAILURE")
        failed = [t for t in json.loads(body).values() if t.get("root_id") == run_id]
        if failed:
            break
        assert time.monotonic() < deadline, body
        time.sleep(0.3)
    (report,) = failed
    assert report["name"] == "verify_dag.report"
    assert report["args"] == f"repo={run.repo} phase=report run={run_id}"
    assert (
        report["exception"] == f"RunFailed(\"run {run_id} error: base ref 'nope' is not a commit\")"
    )
    metrics = get(f"{flower.base}/metrics", auth=False)[1]
    assert 'flower_events_total{task="verify_dag.report",type="task-failed"' in metrics
