"""Judgement reviewers. A registry names them; each is ``(RunState) -> list[SkillOutcome]``.

No model backend can be configured yet, so every judgement reviewer reports exactly that
(NOT_RUN, or BLOCKED for codex-reviewer as the seed spells its statuses) instead of pretending
to have reviewed anything. The composition rules that decide who runs are real already.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

from verify_dag.models import RunState, SkillOutcome

Reviewer = Callable[[RunState], list[SkillOutcome]]

NO_BACKEND = (
    "no model backend is configured; this version cannot run judgement reviewers yet"
)


def codex_available() -> bool:
    # The seed's `which codex`: checked on the worker that would run it.
    return shutil.which("codex") is not None


def _model_reviewer(skill: str, reason: str) -> Reviewer:
    def review(state: RunState) -> list[SkillOutcome]:
        return [SkillOutcome(skill=skill, status="NOT_RUN", notes=NO_BACKEND, reason=reason)]

    return review


def codex_reviewer(state: RunState) -> list[SkillOutcome]:
    reason = "independent second-model review"
    if state.scope is not None and state.scope.mode == "all":
        return [SkillOutcome(skill="codex-reviewer", status="SKIPPED", ran=False,
                             notes="SKIPPED_UNSUPPORTED_SCOPE: Codex does not review --scope=all",
                             reason="SKIPPED_UNSUPPORTED_SCOPE")]
    if not codex_available():
        return [SkillOutcome(skill="codex-reviewer", status="BLOCKED",
                             notes="Codex CLI not found on PATH", reason=reason)]
    return [SkillOutcome(skill="codex-reviewer", status="BLOCKED",
                         notes=f"Codex CLI found, but {NO_BACKEND}", reason=reason)]


def light_judgement(state: RunState) -> list[SkillOutcome]:
    """Light runs exactly one judgement reviewer: codex-reviewer when Codex is there, else reviewer.

    The choice is made here, visibly, never inside codex-reviewer: a substitute hidden behind its
    name would report model diversity that did not happen.
    """
    if codex_available():
        chosen = codex_reviewer(state)
        other = SkillOutcome(skill="reviewer", status="SKIPPED", ran=False,
                             notes="not in light composition (codex-reviewer was chosen)",
                             reason="not in light composition (codex-reviewer was chosen)")
        return [*chosen, other]
    chosen = [SkillOutcome(skill="reviewer", status="NOT_RUN",
                           notes=f"light judgement reviewer (Codex unavailable); {NO_BACKEND}",
                           reason="light judgement reviewer (Codex unavailable)")]
    other = SkillOutcome(skill="codex-reviewer", status="SKIPPED", ran=False,
                         notes="Codex CLI not on PATH; reviewer ran instead",
                         reason="Codex CLI not on PATH")
    return [*chosen, other]


def ux_reviewer(state: RunState) -> list[SkillOutcome]:
    if state.request.skip_ux:
        return [SkillOutcome(skill="ux-reviewer", status="SKIPPED", ran=False, notes="--skip-ux",
                             reason="--skip-ux")]
    return _model_reviewer("ux-reviewer", "user-facing review (gating needs triage Job B)")(state)


def visual_verify(state: RunState) -> list[SkillOutcome]:
    reason = "--skip-visual" if state.request.skip_visual else "not present in available skills"
    return [SkillOutcome(skill="visual-verify", status="SKIPPED", ran=False, notes=reason,
                         reason=reason)]


def plan_completeness(state: RunState) -> list[SkillOutcome]:
    return _model_reviewer("plan-completeness", "a plan file was supplied")(state)


REGISTRY: dict[str, Reviewer] = {
    "judgement": light_judgement,
    "reviewer": _model_reviewer("reviewer", "code files require correctness review"),
    "codex-reviewer": codex_reviewer,
    "comment-review": _model_reviewer("comment-review", "comments can rot in any changed file"),
    "qa": _model_reviewer("qa", "test coverage assessment for everything that changed"),
    "ux-reviewer": ux_reviewer,
    "visual-verify": visual_verify,
    "plan-completeness": plan_completeness,
}

# Skills outside the light composition, reported SKIPPED (never NOT_RUN: they were not due).
OUTSIDE_LIGHT = ("comment-review", "qa", "ux-reviewer", "visual-verify")


def composition_skips(state: RunState) -> list[SkillOutcome]:
    out: list[SkillOutcome] = []
    if state.request.depth == "light":
        out.extend(SkillOutcome(skill=s, status="SKIPPED", ran=False,
                                notes="not in light composition", reason="not in light composition")
                   for s in OUTSIDE_LIGHT)
    if not state.request.plan_file:
        out.append(SkillOutcome(skill="plan-completeness", status="SKIPPED", ran=False,
                                notes="no plan resolved", reason="no plan resolved"))
    return out
