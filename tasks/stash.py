"""The run's state beside its task messages, not inside them.

A verify run's state (its request, scope, toolchain, outcomes: kilobytes, and a coverage XML of up
to half a megabyte) would otherwise be every phase task's argument and every chord body's, shown
whole by ``celery inspect`` and carried by every message. Instead each phase stores what it made
in the result backend, under a key of its own with the backend's expiry (``result_expires``), and
passes on a reference of a few dozen bytes: ``{"stash": key, "run": run id, ...}``. The next task,
on whatever host, reads it back from the same backend.

Keys are the run id and the phase, so a redelivered task writes the same record again, and a
phase called directly (bench/bench_orchestration.py) stashes like a task does.
"""

from __future__ import annotations

from typing import Any

from celery import states

from verify_dag.errors import FatalError
from verify_dag.models import RunState
from verify_dag.tasks.app import app

Ref = dict[str, Any]


def put(key: str, value: Any) -> None:
    """Store ``value`` under ``key``, with the backend's expiry."""
    app.backend.store_result(key, value, states.SUCCESS)


def _get(ref: Ref) -> Any:
    meta = app.backend.get_task_meta(ref["stash"])
    if meta.get("status") != states.SUCCESS:
        # Expired or flushed: the run cannot go on, and the error says why in one line.
        raise FatalError(
            f"run {ref.get('run')}: its state {ref['stash']} is no longer in the result backend "
            "(expired or flushed)"
        )
    return meta.get("result")


def is_ref(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("stash"), str)


def reference(run_id: str, name: str) -> tuple[str, Ref]:
    """The key and reference of ``name`` in ``run_id``: what a phase made, or what the client
    writes before it sends a canvas (``Plan.records``: a run's first state, Phase 9's job)."""
    key = f"{run_id}-{name}"
    return key, {"stash": key, "run": run_id}


def initial(st: RunState) -> tuple[str, Ref]:
    """The key and reference of a run's first state."""
    return reference(st.run_id, "state-request")


def value(given: Any) -> Any:
    """What a task was given: the value a reference names, or the value itself."""
    return _get(given) if is_ref(given) else given


def put_state(st: RunState, phase: str) -> Ref:
    """Store ``st`` as what ``phase`` made; the reference says where the run stopped, if it did,
    so that Flower's Result column shows it without the state."""
    key, ref = reference(st.run_id, f"state-{phase}")
    put(key, st.model_dump(mode="json"))
    if st.failed_phase is not None:
        ref["stoppedAt"] = st.failed_phase
    return ref


def state(given: Any) -> RunState:
    """The run state a task was given: a reference, or (a direct call, an older message) the
    state itself."""
    return RunState.model_validate(value(given))


def put_outcomes(run_id: str, name: str, outcomes: list[dict[str, Any]]) -> Ref:
    """Store a chord header task's outcomes; the reference names each skill's status (what the
    progress display and Flower show)."""
    key, ref = reference(run_id, f"outcomes-{name}")
    put(key, outcomes)
    return {**ref, "skills": {str(o.get("skill")): str(o.get("status")) for o in outcomes}}


def outcomes(part: Any) -> list[dict[str, Any]]:
    """The outcomes a chord header part carries: a reference to them, a list of references
    (the reviewers' fan-in) or of outcomes, and none for a state (static analysis when no
    reviewer followed it)."""
    if is_ref(part):
        got = _get(part) if "skills" in part else []
        return [o for o in got if isinstance(o, dict)]
    if isinstance(part, list):
        return [o for p in part for o in (outcomes(p) if is_ref(p) else [p]) if isinstance(o, dict)]
    return []


def put_probes(run_id: str, probes: dict[str, Any]) -> Ref:
    """Store the derived probes run ahead (models/state.py, EarlyProbes); the reference says
    how many ran."""
    key, ref = reference(run_id, "probes")
    put(key, probes)
    return {**ref, "probes": len(probes.get("results", ()))}


def probes(part: Any) -> dict[str, Any] | None:
    """The derived probes a chord header part carries, if it is their reference."""
    if not is_ref(part) or "probes" not in part:
        return None
    got = _get(part)
    return got if isinstance(got, dict) else None
