"""Submit a verify DAG and wait for its report, showing progress phase by phase."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from celery import states

from verify_dag.celery_app import app
from verify_dag.errors import FatalError
from verify_dag.models import VerifyRequest
from verify_dag.workflow import Plan, plan


def submit(request: VerifyRequest) -> Plan:
    built = plan(request)
    built.canvas.apply_async()
    return built


class Progress:
    """One line per phase as it finishes, on a terminal only."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.shown: set[str] = set()

    def update(self, p: Plan) -> None:
        if self.stream is None:
            return
        for ref in p.phases:
            if ref.task_id in self.shown:
                continue
            state = _meta(ref.task_id)["status"]
            if state in states.READY_STATES:
                self.shown.add(ref.task_id)
                mark = "done" if state == states.SUCCESS else state.lower()
                self.stream.write(f"  [{len(self.shown)}/{len(p.phases)}] {ref.label}: {mark}\n")
                self.stream.flush()


def wait(p: Plan, *, timeout: float, progress: Progress | None = None,
         interval: float = 0.005, sweep: float = 0.25) -> dict[str, Any]:
    """Wait for the report task.

    The final result is polled every ``interval``; every ``sweep`` seconds the other phases are
    looked at too, for the progress display and so that a phase task that failed outright (it
    should not: phases record errors on the state) ends the wait instead of hanging it.
    """
    start = time.monotonic()
    next_sweep = start + sweep
    while True:
        final = _meta(p.final_id)
        if final["status"] in states.READY_STATES:
            if progress is not None:
                progress.update(p)
            if final["status"] != states.SUCCESS:
                raise FatalError(f"the report task failed: {final.get('result')!r}")
            result: dict[str, Any] = final["result"]
            return result
        now = time.monotonic()
        if now >= next_sweep:
            next_sweep = now + sweep
            if progress is not None:
                progress.update(p)
            for ref in p.phases:
                meta = _meta(ref.task_id)
                if meta["status"] == states.FAILURE:
                    raise FatalError(f"phase {ref.label} failed: {meta.get('result')!r}")
        if now - start > timeout:
            raise FatalError(
                f"no report after {timeout:.0f} s (run {p.run_id})",
                hint="is a worker consuming the git, static, review, test and exercise queues?",
            )
        time.sleep(interval)


def release(p: Plan) -> None:
    """Cancel the result subscriptions that sending the canvas opened (Redis pub/sub).

    The client reads results with ``_meta`` and never needs them. Left open, each is cancelled
    from AsyncResult.__del__ during interpreter shutdown, which prints a traceback.
    """
    consumer = getattr(app.backend, "result_consumer", None)
    if consumer is None:
        return
    for ref in p.phases:
        consumer.cancel_for(ref.task_id)


def _meta(task_id: str) -> dict[str, Any]:
    # Plain reads of the result store. AsyncResult would subscribe to Redis pub/sub and try to
    # unsubscribe from __del__ while the interpreter shuts down, printing a traceback.
    meta: dict[str, Any] = app.backend.get_task_meta(task_id)
    return meta


def progress_stream(json_output: bool) -> TextIO | None:
    """Progress goes to stderr, and only when stdout is a terminal and the output is not JSON."""
    if json_output or not sys.stdout.isatty():
        return None
    return sys.stderr
