"""Phase 7b: the debugger fires only on observed failures of severity 7+."""

from __future__ import annotations

from verify_dag.models import Finding, RunState, SkillOutcome

TRIGGERS = ("tester", "exerciser", "ux-reviewer")


def failures(state: RunState) -> list[Finding]:
    return [
        f
        for o in state.outcomes
        if o.skill in TRIGGERS
        for f in o.findings
        if f.severity >= 7
    ]


def run(state: RunState) -> SkillOutcome:
    found = failures(state)
    if not found:
        return SkillOutcome(skill="debugger", status="SKIPPED", ran=False,
                            notes="N/A: no failures of severity 7+",
                            reason="no failures of severity 7+")
    # Re-running each failure at the merge base is not built yet: say so rather than guess
    # PRE_EXISTING for anyone.
    return SkillOutcome(
        skill="debugger", status="NOT_RUN", reason=f"{len(found)} failure(s) of severity 7+",
        notes=(f"{len(found)} failure(s) of severity 7+ need diagnosis; re-running them at the "
               "merge base is not available in this version"),
    )
