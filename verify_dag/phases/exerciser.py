"""Phase 7c: the exerciser. Starting and driving the application is not built yet."""

from __future__ import annotations

from verify_dag.models import RunState, SkillOutcome


def run(state: RunState) -> SkillOutcome:
    lens = ("visual lens suppressed (--skip-visual)" if state.request.skip_visual
            else "visual lens inactive at deep (visual-verify owns it)"
            if state.request.depth == "deep" else "visual lens active")
    # Exerciser statuses are PASSED / FAILED / BLOCKED only (seed 8c): an exercise that did not
    # happen is BLOCKED with its reason, never PASSED.
    return SkillOutcome(
        skill="exerciser", status="BLOCKED", reason="exercises the change end to end",
        notes=("NO_EXERCISE_STRATEGY: starting and exercising the application is not available "
               f"in this version; no reported issue was verified ({lens})"),
    )
