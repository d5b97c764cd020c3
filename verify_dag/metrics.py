"""Run-level Prometheus metrics of verify-dag (``verify-dag metrics``), read from the report
store: every finished run is there, whichever worker wrote it, and a scrape costs no broker
round trip. Flower's /metrics says what the tasks did; these say what the runs came to.

Metric families (all labelled values are small, fixed sets):

- ``verify_dag_runs_total{result, depth}``: runs by result (pass, issues-found, error, blocked);
- ``verify_dag_run_duration_seconds{depth}``: submitted to finished;
- ``verify_dag_phase_duration_seconds{phase}``: each phase and skill where it ran
  (``run.phaseSeconds``);
- ``verify_dag_issues_total{severity_class}``: issues by class (critical 9-10, high 7-8,
  moderate 5-6, low 3-4, trivial 1-2);
- ``verify_dag_checks_not_run_total{skill, status}``: skills NOT_RUN or BLOCKED;
- ``verify_dag_cache_hits_total{what}``: parts of results taken from the result cache;
- ``verify_dag_review_tokens_total{skill, direction}``: model tokens the judgement reviewers
  spent, ``in`` and ``out`` (``reviewTokens``; what a backend did not report is not counted);
- ``verify_dag_review_requests_total{skill, backend}``: their requests, retries included.

With a broker (``--broker``), also what waits and runs now (verify_dag/tasks/monitor.py):
``verify_dag_queue_depth{queue}`` and ``verify_dag_runs_in_flight``.

A run's report is read once and kept in memory by its run id; runs the store drops are dropped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from verify_dag import store

RUN_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
PHASE_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0)
CLASSES = ((9, "critical"), (7, "high"), (5, "moderate"), (3, "low"), (1, "trivial"))
NAMES = (
    "verify_dag_runs_total",
    "verify_dag_run_duration_seconds",
    "verify_dag_phase_duration_seconds",
    "verify_dag_issues_total",
    "verify_dag_checks_not_run_total",
    "verify_dag_cache_hits_total",
    "verify_dag_review_tokens_total",
    "verify_dag_review_requests_total",
)


def severity_class(severity: int) -> str:
    return next(name for floor, name in CLASSES if severity >= floor)


class _Run:
    """What one stored run contributes."""

    def __init__(self, meta: store.RunMeta, report: dict[str, Any]) -> None:
        self.result = meta.result
        self.depth = meta.depth
        self.duration = _seconds_between(meta.submitted, meta.finished)
        run = report.get("run") or {}
        self.phases = {str(k): float(v) for k, v in (run.get("phaseSeconds") or {}).items()}
        self.issues = Counter(severity_class(int(i["severity"])) for i in report.get("issues", []))
        results = report.get("skillResults", [])
        self.not_run = Counter(
            (str(r["skill"]), str(r["status"]))
            for r in results
            if r.get("status") in ("NOT_RUN", "BLOCKED")
        )
        # "ruff: 3 of 4 file(s)" counts under "ruff": label values stay a small set.
        self.cache_hits = Counter(
            str(c["what"]).split(":")[0] for r in results for c in r.get("cached") or ()
        )
        used = (report.get("reviewTokens") or {}).get("skills") or ()
        self.tokens: Counter[tuple[str, str]] = Counter()
        self.requests: Counter[tuple[str, str]] = Counter()
        for u in used:
            for direction, key in (("in", "inputTokens"), ("out", "outputTokens")):
                self.tokens[(str(u["skill"]), direction)] += int(u.get(key) or 0)
            self.requests[(str(u["skill"]), str(u["backend"]))] += int(u.get("requests") or 0)


class StoreCollector:
    """A prometheus_client collector over the report store ``store_dir``."""

    def __init__(self, store_dir: str | None) -> None:
        self.store_dir = store_dir
        self.seen: dict[str, _Run] = {}

    def runs(self) -> list[_Run]:
        metas = store.runs(self.store_dir)
        alive = {m.run_id for m in metas}
        for gone in set(self.seen) - alive:
            del self.seen[gone]
        for meta in metas:
            if meta.run_id in self.seen:
                continue
            path = store.resolve(self.store_dir) / meta.run_id / store.REPORT_JSON
            try:
                report = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue  # unreadable now: tried again at the next scrape
            self.seen[meta.run_id] = _Run(meta, report)
        return list(self.seen.values())

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        runs = self.runs()
        total = CounterMetricFamily(
            "verify_dag_runs", "Finished runs by result and depth.", labels=["result", "depth"]
        )
        for (result, depth), n in sorted(Counter((r.result, r.depth) for r in runs).items()):
            total.add_metric([result, depth], n)
        yield total
        durations = HistogramMetricFamily(
            "verify_dag_run_duration_seconds",
            "Seconds from a run's submission to its report.",
            labels=["depth"],
        )
        for depth in sorted({r.depth for r in runs}):
            values = [r.duration for r in runs if r.depth == depth and r.duration is not None]
            durations.add_metric([depth], *_histogram(values, RUN_BUCKETS))
        yield durations
        phases = HistogramMetricFamily(
            "verify_dag_phase_duration_seconds",
            "Seconds each phase or skill of a run took where it ran.",
            labels=["phase"],
        )
        for phase in sorted({p for r in runs for p in r.phases}):
            values = [r.phases[phase] for r in runs if phase in r.phases]
            phases.add_metric([phase], *_histogram(values, PHASE_BUCKETS))
        yield phases
        yield _counter(
            "verify_dag_issues",
            "Issues reported, by severity class.",
            ["severity_class"],
            sum((r.issues for r in runs), Counter()),
        )
        yield _counter(
            "verify_dag_checks_not_run",
            "Skills that did not run (NOT_RUN) or could not (BLOCKED), by skill.",
            ["skill", "status"],
            sum((r.not_run for r in runs), Counter()),
        )
        yield _counter(
            "verify_dag_cache_hits",
            "Parts of results taken from the result cache, by what they were.",
            ["what"],
            sum((r.cache_hits for r in runs), Counter()),
        )
        yield _counter(
            "verify_dag_review_tokens",
            "Model tokens the judgement reviewers spent, by skill, in and out.",
            ["skill", "direction"],
            sum((r.tokens for r in runs), Counter()),
        )
        yield _counter(
            "verify_dag_review_requests",
            "Model requests the judgement reviewers made, retries included, by skill and backend.",
            ["skill", "backend"],
            sum((r.requests for r in runs), Counter()),
        )


def _counter(name: str, doc: str, labels: list[str], counts: Counter[Any]) -> Any:
    from prometheus_client.core import CounterMetricFamily

    family = CounterMetricFamily(name, doc, labels=labels)
    for key, n in sorted(counts.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], n)
    return family


def _histogram(
    values: list[float], bounds: tuple[float, ...]
) -> tuple[list[tuple[str, float]], float]:
    buckets = [(f"{b:g}", float(sum(v <= b for v in values))) for b in bounds]
    buckets.append(("+Inf", float(len(values))))
    return buckets, float(sum(values))


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return max((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 0)
    except ValueError:
        return None


def _registry(store_dir: str | None, more: Sequence[Any]) -> Any:
    """The store's figures, and ``more`` collectors (what waits and runs now, with a broker:
    verify_dag.tasks.monitor)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(StoreCollector(store_dir))
    for collector in more:
        registry.register(collector)
    return registry


def exposition(store_dir: str | None, more: Sequence[Any] = ()) -> str:
    """The metrics in Prometheus's text format, once (``verify-dag metrics --once``)."""
    from prometheus_client import generate_latest

    return generate_latest(_registry(store_dir, more)).decode("utf-8")


def serve(store_dir: str | None, address: str, port: int, more: Sequence[Any] = ()) -> Any:
    """Serve /metrics on ``address:port`` (prometheus_client's server, in a thread)."""
    from prometheus_client import start_http_server

    return start_http_server(port, addr=address, registry=_registry(store_dir, more))


__all__ = ["NAMES", "StoreCollector", "exposition", "serve", "severity_class"]
