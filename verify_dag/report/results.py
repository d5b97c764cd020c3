"""skillResults, triage and the run status: which checks ran, which did not, and why.

The rule behind everything here (DESIGN.md section 2): a check that did not run is never reported
as a check that found nothing. Every skill of the pipeline appears in skillResults, and a skill the
state has no result for is filled in as NOT_RUN unless a fact about the run says it was SKIPPED.
"""

from __future__ import annotations

from typing import Any, Literal

from verify_dag import backends
from verify_dag.models.findings import SkillOutcome
from verify_dag.models.state import RunState

RunStatus = Literal["error", "blocked", "ok"]

JUDGEMENT = ("reviewer", "codex-reviewer", "comment-review", "qa", "ux-reviewer", "visual-verify")
DETERMINISTIC = ("static-analysis", "tester")
# The order missing skills are filled in: the pipeline's own phase order.
PIPELINE = (
    "static-analysis",
    "tester",
    *JUDGEMENT,
    "plan-completeness",
    "exerciser",
    "debugger",
)
LIGHT_EXCLUDED = ("comment-review", "qa", "ux-reviewer", "visual-verify")
PHASES = ("scope", "engineer", "triage", "static", "review", "exerciser", "debugger", "report")
# Statuses that mean a toolchain command actually ran and reported; FAILED counts, because
# failing tests are findings, not an absence of analysis.
_RAN = ("COMPLETED", "PASSED", "FAILED")


def error_of(state: RunState) -> tuple[str, str] | None:
    """The (code, message) that makes this run status error, if any."""
    if state.error_code is not None:
        return state.error_code, state.error_message or "no message was recorded"
    if state.scope is not None and state.scope.error is not None:
        return state.scope.error.code, state.scope.error.message
    return None


def nothing_to_verify(state: RunState) -> bool:
    return state.scope is not None and state.scope.nothing_to_verify


def stopped_at(state: RunState, message: str) -> tuple[str, str]:
    """(phase, message) for a run that stopped with an error.

    Phase tasks prefix their error messages with the phase name ("static: ..."); that prefix is
    taken as the phase rather than repeated. Otherwise the phase is inferred.
    """
    head, sep, rest = message.partition(": ")
    if sep and head in PHASES:
        return head, rest
    return stopped_phase(state), message


def stopped_phase(state: RunState) -> str:
    """The phase a stopped run ended in.

    RunState does not record it, so it is inferred from the first phase output that is missing;
    each phase fills its output before the next one starts.
    """
    if state.scope is None or state.scope.error is not None:
        return "scope"
    if state.engineer is None:
        return "engineer"
    if state.toolchain is None:
        return "triage"
    if state.static is None:
        return "static"
    ran = {o.skill for o in state.outcomes}
    if not ran & set(JUDGEMENT):
        return "review"
    if "exerciser" not in ran:
        return "exerciser"
    if "debugger" not in ran:  # it runs after the exerciser: it diagnoses its failures too
        return "debugger"
    return "report"


def _light_excluded() -> tuple[str, ...]:
    """Skills outside the light composition: the fixed four, and the one judgement reviewer of
    the pair that light does not choose (codex-reviewer when Codex is on PATH, else reviewer)."""
    unchosen = "reviewer" if backends.codex_on_path() else "codex-reviewer"
    return (*LIGHT_EXCLUDED, unchosen)


def _debugger_needed(state: RunState) -> bool:
    # Seed 7b: the debugger fires when tester or exerciser (or, at deep, ux-reviewer) reported
    # a failure of severity 7 or more.
    triggers = {"tester", "exerciser"}
    if state.request.depth == "deep":
        triggers.add("ux-reviewer")
    return any(f.severity >= 7 for o in state.outcomes if o.skill in triggers for f in o.findings)


def _missing(skill: str, state: RunState) -> SkillOutcome:
    """The outcome of a skill the state holds no result for. Skipped ones are ``ran=False``."""

    def skip(status: Literal["SKIPPED", "NOT_RUN"], notes: str) -> SkillOutcome:
        return SkillOutcome(skill=skill, status=status, notes=notes, reason=notes, ran=False)

    if nothing_to_verify(state):
        return skip("SKIPPED", "nothing to verify")
    # What was never part of this run's plan is SKIPPED even when the run stopped early: NOT_RUN
    # keeps meaning "this should have run and did not" (seed, 8a and the error shape of 8c).
    if state.request.depth == "light" and skill in _light_excluded():
        return skip("SKIPPED", "not in light composition")
    if skill == "plan-completeness" and state.request.plan_text is None:
        return skip("SKIPPED", "no plan resolved")
    err = error_of(state)
    if err is not None:
        phase, message = stopped_at(state, err[1])
        return skip("NOT_RUN", f"not run: verification stopped at {phase}: {message}")
    if skill == "debugger" and not _debugger_needed(state):
        return skip("SKIPPED", "no failures of severity 7+ to investigate")
    return skip("NOT_RUN", "not run: no result was recorded for this skill")


def outcomes(state: RunState) -> list[SkillOutcome]:
    """Every skill's outcome: recorded ones in invocation order, then the filled-in rest."""
    recorded = [*([state.static] if state.static is not None else []), *state.outcomes]
    seen = {o.skill for o in recorded}
    return recorded + [_missing(s, state) for s in PIPELINE if s not in seen]


def skill_results(all_outcomes: list[SkillOutcome]) -> list[dict[str, Any]]:
    return [
        {
            "skill": o.skill,
            "status": o.status,
            "notes": o.notes,
            **({"isolation": o.isolation} if o.isolation else {}),
        }
        for o in all_outcomes
    ]


def _reason(o: SkillOutcome) -> str:
    # Every triage entry needs a factual reason; say so plainly when a phase recorded none.
    return o.reason or (o.notes if not o.ran else "") or "no routing reason was recorded"


def triage(all_outcomes: list[SkillOutcome]) -> dict[str, Any]:
    run = [{"skill": o.skill, "reason": _reason(o)} for o in all_outcomes if o.ran]
    skipped = [{"skill": o.skill, "reason": _reason(o)} for o in all_outcomes if not o.ran]
    return {
        "skillsRun": run,
        "skillsSkipped": skipped,
        "skills_run": [e["skill"] for e in run],
        "skills_skipped": [e["skill"] for e in skipped],
    }


def run_status(state: RunState, all_outcomes: list[SkillOutcome]) -> RunStatus:
    """error, blocked or ok (seed 8c step 1), checked in that order.

    blocked means verification produced no meaningful analysis: neither static-analysis nor
    tester ran and reported (status COMPLETED, PASSED or FAILED: failing tests are analysis), AND
    no judgement reviewer COMPLETED. A run with nothing to verify is ok: the pipeline completed
    exactly as specified (report "nothing to verify" and stop) and every skill says SKIPPED.
    """
    if error_of(state) is not None:
        return "error"
    if nothing_to_verify(state):
        return "ok"
    analysed = any(
        (o.skill in DETERMINISTIC and o.status in _RAN)
        or (o.skill in JUDGEMENT and o.status == "COMPLETED")
        for o in all_outcomes
    )
    return "ok" if analysed else "blocked"
