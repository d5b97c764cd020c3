"""What every phase task shares: validation, idempotency, progress events, and no raising.

Tasks are thin: read the input state (a reference to it, tasks/stash.py), call the phase, stash
what it made and pass the reference on. A phase that cannot proceed records an error on the
state instead of raising, so the report task still runs and the user gets a complete v1 report
with status "error".
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from celery import states
from celery.exceptions import Ignore

from verify_dag import limits, processes, repos, resultcache, sandbox
from verify_dag.backends import budget
from verify_dag.errors import VerifyDagError
from verify_dag.models import RunState, SkillOutcome
from verify_dag.models.findings import CacheHit
from verify_dag.models.state import Phase
from verify_dag.tasks import stash
from verify_dag.tasks.app import CANCELLED, app, sentinel_id
from verify_dag.tasks.tally import ResultBackendTally

log = logging.getLogger(__name__)

StatePhase = Callable[[RunState], RunState]
HeaderPhase = Callable[[RunState], list[SkillOutcome]]


class RunFailed(Exception):
    """The report task's end for a run whose status is error or blocked: the task is FAILURE (so
    operators see the broken run) and the exception carries the stored ReportResult for the
    client (``client.report_of``). Its text is one line, never the report."""

    def __init__(self, message: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(message, result)
        self.message = message
        self.result = result

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"RunFailed({self.message!r})"


def previous_result(task: Any) -> Any | None:
    """The stored result of this very task id, when a redelivery finds it already done."""
    task_id = task.request.id
    if not task_id or task.request.is_eager:
        return None
    # The module's app, not task.app: a task run by the embedded worker's thread pool was seen
    # resolving task.app to Celery's default app, whose backend is disabled.
    meta = app.backend.get_task_meta(task_id)
    if meta.get("status") == states.SUCCESS:
        return meta.get("result")
    return None


def cached(outcome: SkillOutcome, hits: list[CacheHit]) -> SkillOutcome:
    """``outcome`` saying which of its parts came from the result cache, in its notes too."""
    if not hits:
        return outcome
    said = "; ".join(f"{h.what} (stored {h.stored or 'earlier'})" for h in hits)
    notes = f"{outcome.notes}; from the result cache: {said}" if outcome.notes else said
    return outcome.model_copy(update={"cached": (*outcome.cached, *hits), "notes": notes})


def isolated(outcome: SkillOutcome, used: set[str], hit: list[str] | None = None) -> SkillOutcome:
    """``outcome`` naming the sandbox its repository code ran in, when it ran any, and with a
    finding for each resource limit that code hit."""
    if hit:
        found = tuple(limits.finding(h, outcome.skill) for h in hit)
        outcome = outcome.model_copy(update={"findings": (*outcome.findings, *found)})
    if not used:
        return outcome
    return outcome.model_copy(update={"isolation": sandbox.joined(used)})


@contextlib.contextmanager
def tracked(st: RunState) -> Iterator[tuple[set[str], list[str], list[CacheHit]]]:
    """What a phase's block runs under, for run ``st``: its processes known as the run's, the
    sandbox it requires, and what its commands ran under (the sandbox modes), the limits they
    hit and the result cache entries it took."""
    with (
        processes.for_run(st.run_id),
        sandbox.tracking(
            required=st.request.require_sandbox, unsandboxed=st.request.no_sandbox
        ) as used,
        limits.tracking() as hit,
        resultcache.session(enabled=not st.request.no_cache) as hits,
    ):
        yield used, hit, hits


def stop_if_cancelled(run_id: str) -> None:
    """A run cancelled with ``verify-dag cancel`` goes no further, even on a worker that started
    after the revocation was broadcast (workers keep revoked ids in memory only): Celery's
    Ignore ends the task without a result, and its chain with it."""
    meta = app.backend.get_task_meta(sentinel_id(run_id))
    if meta.get("status") == CANCELLED:
        log.info("run %s was cancelled: phase not run", run_id)
        raise Ignore()


def progress(task: Any, run_id: str, phase: str) -> None:
    """A task event Flower shows (custom update_state states are not shown)."""
    if app.conf.worker_send_task_events and task.request.id:
        task.send_event("task-progress", run_id=run_id, phase=phase)


def failed(st: RunState, phase: Phase, code: str, message: str) -> RunState:
    """``st`` stopped at ``phase``: the report names the phase, the code and the message."""
    return st.model_copy(
        update={"failed_phase": phase, "error_code": code, "error_message": message}
    )


def state_phase(phase: Phase) -> Callable[[StatePhase], Callable[..., dict[str, Any]]]:
    """Wrap a linear phase ``RunState -> RunState`` as a bound task body."""

    def wrap(fn: StatePhase) -> Callable[..., dict[str, Any]]:
        @functools.wraps(fn)
        def body(task: Any, state: dict[str, Any]) -> dict[str, Any]:
            done = previous_result(task)
            if done is not None:
                return dict(done)
            st = stash.state(state)
            if st.stopped:
                return state
            stop_if_cancelled(st.run_id)
            progress(task, st.run_id, phase)
            try:
                began = time.monotonic()
                with tracked(st) as (used, hit, hits):
                    out = fn(repos.localize(st))
                took = round(time.monotonic() - began, 3)
                # The localized request names this host's copy of the repository; the next
                # task, maybe on another host, localizes the run's own name again. A limit
                # hit is the finding of the first skill the phase added.
                added = tuple(
                    cached(isolated(o, used, hit if i == 0 else None), hits)
                    for i, o in enumerate(out.outcomes[len(st.outcomes) :])
                )
                static = (
                    out.static
                    if out.static == st.static or out.static is None
                    else cached(isolated(out.static, used, None if added else hit), hits)
                )
                out = out.model_copy(
                    update={
                        "request": st.request,
                        "static": static,
                        "outcomes": out.outcomes[: len(st.outcomes)] + added,
                        "timings": {**st.timings, phase: took},
                    }
                )
            except VerifyDagError as exc:
                out = failed(st, phase, "PHASE_FAILED", exc.message)
            except Exception as exc:
                log.exception("phase %s crashed", phase)
                out = failed(st, phase, "INTERNAL_ERROR", f"{type(exc).__name__}: {exc}")
            return stash.put_state(out, phase)

        return body

    return wrap


def header_phase(skill: str) -> Callable[[HeaderPhase], Callable[..., Any]]:
    """Wrap a chord header phase. It never raises: a header task that failed would stop the chord
    body (ChordError), and with it the report."""

    def wrap(fn: HeaderPhase) -> Callable[..., Any]:
        @functools.wraps(fn)
        def body(task: Any, state: dict[str, Any]) -> Any:
            done = previous_result(task)
            if done is not None:
                return done
            st = stash.state(state)
            if st.stopped:
                return []
            stop_if_cancelled(st.run_id)
            progress(task, st.run_id, skill)
            began = time.monotonic()
            try:
                with tracked(st) as (used, hit, hits), budget.counting(ResultBackendTally()):
                    outcomes = [
                        cached(isolated(o, used, hit if i == 0 else None), hits)
                        for i, o in enumerate(fn(repos.localize(st)))
                    ]
            except sandbox.SandboxRequired as exc:
                outcomes = [
                    SkillOutcome(
                        skill=skill,
                        status="BLOCKED",
                        reason=exc.message,
                        notes=f"BLOCKED: {exc.message}",
                    )
                ]
            except Exception as exc:
                log.exception("skill %s crashed", skill)
                outcomes = [
                    SkillOutcome(
                        skill=skill, status="NOT_RUN", notes=f"crashed: {type(exc).__name__}: {exc}"
                    )
                ]
            took = round(time.monotonic() - began, 3)
            made = [
                o.model_copy(update={"seconds": took}).model_dump(mode="json") for o in outcomes
            ]
            return stash.put_outcomes(st.run_id, skill, made)

        return body

    return wrap
