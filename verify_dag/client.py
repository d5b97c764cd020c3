"""Submit a verify DAG and wait for its report, showing progress phase by phase."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

from celery import states
from celery.exceptions import BackendError

from verify_dag.celery_app import app
from verify_dag.errors import FatalError, UsageError
from verify_dag.models import VerifyRequest
from verify_dag.workflow import Plan, plan

OUTAGE_ENV = "VERIFY_DAG_OUTAGE_LIMIT"
# Seconds the result store (Redis) may stay unreachable while a client waits for a run; then the
# client gives up with exit 3. Documented in ops/README.md, "Faults and recovery".
DEFAULT_OUTAGE_LIMIT = 60.0
# How often an unreachable result store is asked again.
OUTAGE_RETRY = 0.5


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
         interval: float = 0.005, sweep: float = 0.25,
         outage: float | None = None) -> dict[str, Any]:
    """Wait for the report task.

    The final result is polled every ``interval``; every ``sweep`` seconds the other phases are
    looked at too, for the progress display and so that a phase task that failed outright (it
    should not: phases record errors on the state) ends the wait instead of hanging it.

    A result store that cannot be reached (Redis restarting) is asked again every 0.5 s for up
    to ``outage`` seconds in a row (default: ``$VERIFY_DAG_OUTAGE_LIMIT``, else 60), then the
    wait ends with a FatalError; ``timeout`` bounds the whole wait either way.
    """
    limit = outage_limit() if outage is None else outage
    start = time.monotonic()
    next_sweep = start + sweep
    down_since: float | None = None
    while True:
        attempt = time.monotonic()
        try:
            result = _poll(p, progress, sweep=attempt >= next_sweep)
        except outage_errors() as exc:
            # An attempt can take a while to fail (a connect timeout): it counts.
            now = time.monotonic()
            down_since = attempt if down_since is None else down_since
            if now - down_since >= limit:
                raise FatalError(
                    f"the result store was unreachable for {limit:.0f} s in a row (limit "
                    f"{OUTAGE_ENV}) while waiting for run {p.run_id}: {one_line(exc)}",
                    hint=f"the run goes on if the workers reconnect; ask `verify-dag status "
                         f"{p.run_id}` once Redis is back",
                ) from exc
            _check_timeout(p, start, timeout)
            time.sleep(OUTAGE_RETRY)
            continue
        down_since = None
        if result is not None:
            return result
        now = time.monotonic()
        if now >= next_sweep:
            next_sweep = now + sweep
        _check_timeout(p, start, timeout)
        time.sleep(interval)


def _poll(p: Plan, progress: Progress | None, *, sweep: bool) -> dict[str, Any] | None:
    """One look at the run: its report when ready, else None; a failed phase raises."""
    final = _meta(p.final_id)
    if final["status"] in states.READY_STATES:
        if progress is not None:
            progress.update(p)
        if final["status"] != states.SUCCESS:
            raise FatalError(f"the report task failed: {final.get('result')!r}")
        result: dict[str, Any] = final["result"]
        return result
    if sweep:
        if progress is not None:
            progress.update(p)
        for ref in p.phases:
            meta = _meta(ref.task_id)
            if meta["status"] == states.FAILURE:
                raise FatalError(f"phase {ref.label} failed: {meta.get('result')!r}")
    return None


def _check_timeout(p: Plan, start: float, timeout: float) -> None:
    if time.monotonic() - start > timeout:
        raise FatalError(
            f"no report after {timeout:.0f} s (run {p.run_id})",
            hint="is a worker consuming the git, static, review, test and exercise queues?",
        )


def read_meta(task_id: str, *, outage: float | None = None) -> dict[str, Any]:
    """One task's meta from the result store (``verify-dag status``), asking an unreachable store
    again every 0.5 s for up to ``outage`` seconds (default as for ``wait``)."""
    limit = outage_limit() if outage is None else outage
    start = time.monotonic()
    while True:
        try:
            return _meta(task_id)
        except outage_errors() as exc:
            if time.monotonic() - start >= limit:
                raise FatalError(
                    f"the result store was unreachable for {limit:.0f} s in a row (limit "
                    f"{OUTAGE_ENV}) while reading {task_id}: {one_line(exc)}",
                    hint="try again once Redis is back",
                ) from exc
            time.sleep(OUTAGE_RETRY)


def outage_limit() -> float:
    """Seconds the result store may stay unreachable: ``$VERIFY_DAG_OUTAGE_LIMIT`` or 60."""
    text = os.environ.get(OUTAGE_ENV, "").strip()
    if not text:
        return DEFAULT_OUTAGE_LIMIT
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{OUTAGE_ENV}: expected seconds, got {text!r}") from None
    if not value > 0:
        raise UsageError(f"{OUTAGE_ENV}: must be more than 0 seconds, got {text!r}")
    return value


def outage_errors() -> tuple[type[BaseException], ...]:
    """What a result store that went away raises: its connection errors, and Celery's
    BackendError once the backend's own retries are spent. kombu counts KeyError among Redis's
    connection errors; here it would only hide a bug."""
    errors = getattr(app.backend, "connection_errors", ()) or ()
    return (BackendError, *(e for e in errors if not issubclass(e, LookupError)))


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, BackendError) and cause is not None:
        text += f" ({' '.join(str(cause).split()) or type(cause).__name__})"
    return text


def release(p: Plan) -> None:
    """Cancel the result subscriptions that sending the canvas opened (Redis pub/sub).

    The client reads results with ``_meta`` and never needs them. Left open, each is cancelled
    from AsyncResult.__del__ during interpreter shutdown, which prints a traceback. With the
    result store unreachable they are only forgotten: unsubscribing would first retry the
    connection for about 20 s, and the process is about to exit anyway.
    """
    consumer = getattr(app.backend, "result_consumer", None)
    if consumer is None:
        return
    # RuntimeError: what Celery's pub/sub consumer raises when it cannot reconnect.
    unreachable: tuple[type[BaseException], ...] = (RuntimeError, *outage_errors())
    try:
        app.backend.client.ping()
        for ref in p.phases:
            consumer.cancel_for(ref.task_id)
    except unreachable:
        subscribed = getattr(consumer, "subscribed_to", None)
        if isinstance(subscribed, set):
            subscribed.clear()


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
