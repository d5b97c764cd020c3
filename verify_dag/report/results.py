"""skillResults, triage and the run status: which checks ran, which did not, and why.

The rule behind everything here (docs/report.md): a check that did not run is never reported as a
check that found nothing. Every skill of the pipeline appears in skillResults, and a skill the
state has no result for is filled in as NOT_RUN unless a fact about the run says it was SKIPPED.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from verify_dag import skills
from verify_dag.models.findings import SkillOutcome
from verify_dag.models.report import (
    CachedPart,
    RunStatus,
    SkillDetail,
    SkillReason,
    SkillResult,
    ToolUseRow,
)
from verify_dag.models.state import RunState

# Statuses that mean a toolchain command actually ran and reported; FAILED counts, because
# failing tests are findings, not an absence of analysis.
_RAN = ("COMPLETED", "PASSED", "FAILED")


def _failure(state: RunState) -> tuple[str, str, str] | None:
    """(phase, code, message) of the phase that stopped the run, if one did."""
    if state.scope is not None and state.scope.error is not None:
        return "scope", state.scope.error.code, state.scope.error.message
    if state.failed_phase is None or state.error_code is None:
        return None
    return state.failed_phase, state.error_code, state.error_message or "no message was recorded"


def error_of(state: RunState) -> tuple[str, str] | None:
    """The (code, message) that makes this run status error, if any.

    A scope the request could not resolve is reported in the scope's own words (INVALID_BASE,
    ...); any other failure's message starts with the phase it happened in.
    """
    failure = _failure(state)
    if failure is None:
        return None
    phase, code, message = failure
    scope_error = state.scope is not None and state.scope.error is not None
    return code, message if scope_error else f"{phase}: {message}"


def nothing_to_verify(state: RunState) -> bool:
    return state.scope is not None and state.scope.nothing_to_verify


def _light_outside(gate: skills.Gate | None) -> bool:
    """Outside this run's light composition: never in it, or the light slot's other reviewer.

    The light task records its choice (the chosen reviewer's outcome and the other's SKIPPED),
    so a light-slot skill reaches here only when the run stopped before that task chose. The
    report is built wherever the report task runs, a host that says nothing about the review
    worker's Codex: it says no more than the state holds. codex-reviewer, which only runs where
    a worker found Codex, is outside; reviewer is what did not run.
    """
    return gate is None or gate == "if-codex"


def _debugger_needed(state: RunState) -> bool:
    # It fires when a skill that fires it at this depth (tester, exerciser; at deep ux-reviewer)
    # reported a failure of severity 7 or more (docs/verify.md, "The debugger").
    triggers = skills.fires_debugger(state.request.depth)
    return any(f.severity >= 7 for o in state.outcomes if o.skill in triggers for f in o.findings)


def _missing(skill: str, state: RunState) -> SkillOutcome:
    """The outcome of a skill the state holds no result for. Skipped ones are ``ran=False``."""

    def skip(status: Literal["SKIPPED", "NOT_RUN"], notes: str) -> SkillOutcome:
        return SkillOutcome(skill=skill, status=status, notes=notes, reason=notes, ran=False)

    if nothing_to_verify(state):
        return skip("SKIPPED", "nothing to verify")
    # What was never part of this run's plan is SKIPPED even when the run stopped early: NOT_RUN
    # keeps meaning "this should have run and did not" (docs/report.md, "skillResults").
    depth = state.request.depth
    gate = skills.gate(skill, depth)
    if depth == "light" and _light_outside(gate):
        return skip("SKIPPED", "not in light composition")
    if gate == "needs-plan" and state.request.plan_text is None:
        return skip("SKIPPED", "no plan resolved")
    failure = _failure(state)
    if failure is not None:
        phase, _, message = failure
        return skip("NOT_RUN", f"not run: verification stopped at {phase}: {message}")
    if gate == "on-failure" and not _debugger_needed(state):
        return skip("SKIPPED", "no failures of severity 7+ to investigate")
    return skip("NOT_RUN", "not run: no result was recorded for this skill")


def outcomes(state: RunState) -> list[SkillOutcome]:
    """Every skill's outcome: recorded ones in invocation order, then the filled-in rest."""
    recorded = [*([state.static] if state.static is not None else []), *state.outcomes]
    seen = {o.skill for o in recorded}
    return recorded + [_missing(s, state) for s in skills.pipeline() if s not in seen]


def skill_results(all_outcomes: list[SkillOutcome]) -> tuple[SkillResult, ...]:
    return tuple(SkillResult(skill=o.skill, status=o.status, notes=o.notes) for o in all_outcomes)


def skill_details(
    all_outcomes: list[SkillOutcome], timings: Mapping[str, float]
) -> tuple[SkillDetail, ...]:
    """skillDetails: one entry per skillResults item, in its order. A skill's seconds are its
    task's where the task timed itself, else the phase's."""
    return tuple(
        SkillDetail(
            skill=o.skill,
            isolation=o.isolation or None,
            cached=tuple(CachedPart(what=c.what, key=c.key, stored=c.stored) for c in o.cached),
            duration_s=o.seconds if o.seconds is not None else timings.get(o.skill),
            tools=tuple(
                ToolUseRow(tool=t.tool, version=t.version, completed=t.completed) for t in o.tools
            ),
        )
        for o in all_outcomes
    )


def _reason(o: SkillOutcome) -> str:
    # Every triage entry needs a factual reason; say so plainly when a phase recorded none.
    return o.reason or (o.notes if not o.ran else "") or "no routing reason was recorded"


def triage(
    all_outcomes: list[SkillOutcome],
) -> tuple[tuple[SkillReason, ...], tuple[SkillReason, ...]]:
    """(skillsRun, skillsSkipped): every invoked skill whatever its status, then the rest."""
    run = tuple(SkillReason(skill=o.skill, reason=_reason(o)) for o in all_outcomes if o.ran)
    skipped = tuple(
        SkillReason(skill=o.skill, reason=_reason(o)) for o in all_outcomes if not o.ran
    )
    return run, skipped


def run_status(state: RunState, all_outcomes: list[SkillOutcome]) -> RunStatus:
    """error, blocked or ok, checked in that order (docs/report.md, "Run status").

    blocked means verification produced no meaningful analysis: neither static-analysis nor
    tester ran and reported (status COMPLETED, PASSED or FAILED: failing tests are analysis), AND
    no judgement reviewer COMPLETED. A run with nothing to verify is ok: the pipeline completed
    exactly as specified (report "nothing to verify" and stop) and every skill says SKIPPED.
    """
    if error_of(state) is not None:
        return "error"
    if nothing_to_verify(state):
        return "ok"
    deterministic, judgement = skills.of_kind("deterministic"), skills.reviewers()
    analysed = any(
        (o.skill in deterministic and o.status in _RAN)
        or (o.skill in judgement and o.status == "COMPLETED")
        for o in all_outcomes
    )
    return "ok" if analysed else "blocked"
