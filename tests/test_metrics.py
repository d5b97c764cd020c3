"""Run metrics for Prometheus (``verify-dag metrics``), read from the report store, and the
scrape config and Grafana dashboard in ops/ that use them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import redis
import yaml
from conftest import BRANCH, CLI, Repo, verify_json
from prometheus_client.parser import text_string_to_metric_families
from redis_workers import free_port

from verify_dag import metrics
from verify_dag.tasks import monitor

OPS = Path(__file__).parents[1] / "ops"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_the_runs_in_the_store(scenario: Repo, tmp_path: Path) -> None:
    _, found = verify_json(scenario, tmp_path, "--scope=branch", "--base=base")
    _, failed = verify_json(scenario, tmp_path, "--scope=branch", "--base=nope")
    assert (found["overall"]["result"], failed["overall"]["result"]) == ("issues-found", "error")
    store = tmp_path / "store"
    port = free_port()
    server = subprocess.Popen(
        [*CLI, "metrics", f"--store={store}", f"--port={port}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert (
            server.stdout.readline() == f"verify-dag metrics on http://127.0.0.1:{port}/metrics\n"
        )
        # Scraped as Prometheus scrapes: GET /metrics, the text format.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode("utf-8")
    finally:
        server.terminate()
        server.wait(timeout=10)
    got = samples(text)
    runs = (("depth", "light"), ("result", "issues-found"))
    assert got[("verify_dag_runs_total", runs)] == 1
    assert got[("verify_dag_runs_total", (("depth", "light"), ("result", "error")))] == 1
    by_class: dict[str, int] = {}
    for issue in found["issues"]:
        name = metrics.severity_class(issue["severity"])
        by_class[name] = by_class.get(name, 0) + 1
    for name, n in by_class.items():
        assert got[("verify_dag_issues_total", (("severity_class", name),))] == n
    not_run = [s for s in found["skillResults"] if s["status"] in ("NOT_RUN", "BLOCKED")]
    for s in not_run:
        key = ("verify_dag_checks_not_run_total", (("skill", s["skill"]), ("status", s["status"])))
        assert got[key] >= 1
    count = ("verify_dag_phase_duration_seconds_count", (("phase", "scope"),))
    assert got[count] == 2
    assert got[("verify_dag_run_duration_seconds_count", (("depth", "light"),))] == 2
    # Every family is there, and the one-shot output says the same.
    for name in metrics.NAMES:
        assert f"# TYPE {name.removesuffix('_total')}" in text, name
    once = subprocess.run(
        [*CLI, "metrics", "--once", f"--store={store}"], capture_output=True, text=True
    )
    assert samples(once.stdout) == got


def test_the_dashboard_and_the_scrape_config_use_metrics_that_exist() -> None:
    dashboard = json.loads((OPS / "grafana-dashboard.json").read_text(encoding="utf-8"))
    assert dashboard["panels"] and dashboard["uid"] == "verify-dag-runs"
    ours = {n.removesuffix("_total") for n in (*metrics.NAMES, *monitor.NAMES)}
    flower = {"flower_events", "flower_task_runtime_seconds"}
    used = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name in re.findall(r"\b((?:verify_dag|flower)_[a-z_]+)", target["expr"]):
                used.add(re.sub(r"_(bucket|sum|count|total)$", "", name))
    assert used <= ours | flower, used - ours - flower
    assert ours <= used  # every family has a panel
    scrape = yaml.safe_load((OPS / "prometheus.yml").read_text(encoding="utf-8"))
    targets = {
        t for job in scrape["scrape_configs"] for c in job["static_configs"] for t in c["targets"]
    }
    assert {"127.0.0.1:9808", "127.0.0.1:5555"} <= targets


def test_with_a_broker_the_queues_depth_and_the_runs_in_flight(
    scenario: Repo, tmp_path: Path
) -> None:
    """A run submitted with no worker up waits in the git queue and is in flight; once a worker
    has run it, nothing waits and nothing is in flight."""
    from redis_workers import fresh_db, workers

    broker = fresh_db(5)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_DAG_BROKER", "CELERY_"))
    }
    env["VERIFY_DAG_STORE"] = str(tmp_path / "store")
    submitted = subprocess.run(
        [*CLI, "verify", str(scenario.path), *BRANCH, f"--broker={broker}", "--no-wait"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()

    def now() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        proc = subprocess.run(
            [*CLI, "metrics", "--once", f"--broker={broker}"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        return samples(proc.stdout)

    waiting = now()
    assert waiting[("verify_dag_queue_depth", (("queue", "git"),))] == 1
    assert waiting[("verify_dag_queue_depth", (("queue", "test"),))] == 0
    assert waiting[("verify_dag_runs_in_flight", ())] == 1
    with workers(broker, ["metrics"], tmp_path / "logs", env):
        waited = subprocess.run(
            [*CLI, "wait", run_id, f"--broker={broker}", "--timeout=240"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert waited.returncode == 1, waited.stderr
        # The report is stored a moment before its task's message is acknowledged: the
        # workers stay up until it is, or stopping them would hand that message back.
        held = redis.Redis.from_url(broker)
        deadline = time.monotonic() + 30
        while held.hlen("unacked") and time.monotonic() < deadline:
            time.sleep(0.1)
    done = now()
    assert all(v == 0 for (name, _), v in done.items() if name == "verify_dag_queue_depth")
    assert done[("verify_dag_runs_in_flight", ())] == 0
