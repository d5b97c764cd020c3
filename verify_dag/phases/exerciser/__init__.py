"""Phase 7c: the exerciser. Starts the app the engineer skill declares, drives it, checks the
custom gates, then tries to reproduce each reported issue without a model.

Everything runs in a throwaway worktree of the verified commit with a scrubbed environment and
time limits. Statuses are PASSED / FAILED / BLOCKED only (docs/report.md); an exercise that did
not happen is BLOCKED with its reason, never PASSED.

Beside it: the exercise itself (:mod:`~verify_dag.phases.exerciser.exercise`), the app under test
(:mod:`~verify_dag.phases.exerciser.app`), the exercise in one sandbox
(:mod:`~verify_dag.phases.exerciser.sandboxed`), the exercise derived from the project's
declarations when it declares none (:mod:`~verify_dag.phases.exerciser.derived`), issue
reproduction
(:mod:`~verify_dag.phases.exerciser.reproduce`) and the ``--completion`` criterion
(:mod:`~verify_dag.phases.exerciser.criterion`).
"""

from __future__ import annotations

from pathlib import Path

from verify_dag import processes, workspace
from verify_dag.models import (
    EngineerContext,
    RunState,
    SkillOutcome,
    Toolchain,
    Verification,
    VerifyRequest,
)
from verify_dag.phases import gates, rerun_cache
from verify_dag.phases.exerciser import derived, reproduce, sandboxed
from verify_dag.phases.exerciser.exercise import (
    COMPLETION_CHECKER,
    SKILL,
    Exercise,
    completion_blocked,
)
from verify_dag.phases.exerciser.reproduce import STATIC, verify_issues
from verify_dag.phases.tester import env as testenv

REASON = "exercises the change end to end"


def run(state: RunState) -> SkillOutcome:
    """Never raises: an exerciser that broke is BLOCKED with what happened."""
    try:
        return _run(state)
    # Any failure, whatever its type, must leave a result for the report (chord semantics).
    except Exception as exc:  # noqa: BLE001
        why = f"{type(exc).__name__}: {processes.redact(str(exc))}"
        return _blocked(f"EXERCISER_ERROR: {why}; {lens(state.request)}", state.request.completion)


def _blocked(notes: str, criterion: str | None = None) -> SkillOutcome:
    # A --completion criterion that never ran is shown as such, not left out.
    shown = (
        ()
        if criterion is None
        else (completion_blocked(criterion, "not run: the exerciser was blocked"),)
    )
    return SkillOutcome(skill=SKILL, status="BLOCKED", reason=REASON, notes=notes, gates=shown)


def lens(request: VerifyRequest) -> str:
    if request.depth == "deep":
        return "visual lens inactive"
    if request.skip_visual:
        return "visual lens suppressed"
    return "visual lens active: nothing rendered (exercised through CLI/API)"


def _counts(state: RunState, ex: Exercise) -> list[str]:
    """The declared gates counted as the report's gate table shows them: the reviewers ran
    before the exerciser, and a review gate it could not check (NOT_CHECKED) has their verdict
    there, so the notes say the same."""
    mine = [g for g in ex.gates if g.checker != COMPLETION_CHECKER]
    declared = {(g.kind, g.rule) for g in mine}
    judged = [g for o in state.outcomes for g in o.gates if (g.kind, g.rule) in declared]
    return gates.counts(gates.settled([*mine, *judged]))


def _rerun_issues(state: RunState, wt: Path, env: dict[str, str]) -> tuple[list[Verification], str]:
    """Issues not all static analysis's (a failing test among them): tried in the env the tester
    ran the suite in, or their settled answer taken from the result cache
    (verify_dag/phases/rerun_cache.py)."""
    key = reproduce.entry(state)
    what = "re-runs of the reported issues"
    kept = rerun_cache.get(rerun_cache.REPRODUCTION, key, what, reproduce.kept)
    if kept is not None:
        return kept
    with testenv.runtime(wt, state.toolchain or Toolchain()) as tenv:
        if tenv.error is None and tenv.python is not None:
            test_env = testenv.suite_env(tenv, {"PYTHONDONTWRITEBYTECODE": "1"})
            out = verify_issues(state, wt, test_env, str(tenv.python), tenv.runner)
        else:
            out = verify_issues(state, wt, env)
    reproduce.keep(state, key, *out)
    return out


def _run(state: RunState) -> SkillOutcome:
    scope = state.scope
    if scope is None or not scope.new_commit:
        return _blocked(
            f"NO_COMMIT: no verified commit to exercise; {lens(state.request)}",
            state.request.completion,
        )
    eng = state.engineer or EngineerContext()
    # Scripts the repository declares may read this; nothing of ours is in it (docs/security.md).
    env = processes.scrubbed_env({"PYTHONDONTWRITEBYTECODE": "1"})
    with workspace.checkout(state.run_id, state.request.repo, scope.new_commit) as wt:
        # Issues first, on the pristine checkout: whatever the app or an EXERCISE command writes
        # into the worktree must not change whether a finding reproduces.
        # A failing test is re-run where the tester ran it: in the provisioned environment (the
        # run's own build of it). Static findings are not re-run, so they need none.
        rerun = (f for o in state.outcomes for f in o.findings if f.timed_out is None)
        if not any(f.source != STATIC for f in rerun):
            verified, vnote = verify_issues(state, wt, env)
        else:
            verified, vnote = _rerun_issues(state, wt, env)
        ex = sandboxed.exercise(eng, wt, env, state.request.completion)
        # Nothing declared: what the project's own declarations say to run (004 7c).
        ex = derived.instead(state, wt, ex)
    notes = "; ".join([ex.note, *ex.details, *_counts(state, ex), vnote, lens(state.request)])
    return SkillOutcome(
        skill=SKILL,
        status=ex.status,
        reason=REASON,
        notes=notes,
        findings=tuple(ex.findings),
        gates=tuple(ex.gates),
        verifications=tuple(verified),
    )
