"""Judgement reviewers. A registry names them; each is ``(RunState) -> list[SkillOutcome]``.

Who runs is the seed's composition table: at light the tester plus exactly one judgement reviewer
(codex-reviewer when the Codex CLI is on PATH, else reviewer); at deep reviewer, codex-reviewer,
comment-review, qa always, ux-reviewer and visual-verify when triage Job B gates them in. How each
runs (prompt, backend, parsing) lives in :mod:`verify_dag.reviewers.runner`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from verify_dag import backends, git
from verify_dag.errors import VerifyDagError
from verify_dag.models import RunState, SkillOutcome
from verify_dag.reviewers import comments, contract, runner

Reviewer = Callable[[RunState], list[SkillOutcome]]

REASONS = {
    "reviewer": "code files require correctness review",
    "codex-reviewer": "independent second-model review",
    "comment-review": "comments can rot in any changed file",
    "qa": "test coverage assessment for everything that changed",
    "ux-reviewer": "user-facing surface in scope",
    "visual-verify": "UI-rendering files in scope",
    "plan-completeness": "a plan file was supplied",
}


def _always(skill: str) -> Reviewer:
    def review(state: RunState) -> list[SkillOutcome]:
        return [runner.model_skill(state, skill, REASONS[skill])]

    return review


def comment_review(state: RunState) -> list[SkillOutcome]:
    """The seed's deterministic comment rules always; a model pass on top when one is configured."""
    assert state.scope is not None
    skill = "comment-review"
    try:
        with git.worktree(state.request.repo, state.scope.new_commit) as workdir:
            setting = state.request.comment_density
            env = {**os.environ, comments.DENSITY_ENV: setting} if setting else None
            found = comments.run(state.scope, workdir, env=env)
        rules = SkillOutcome(
            skill=skill,
            status="COMPLETED",
            reason=REASONS[skill],
            notes=f"deterministic rules: {len(found)} finding(s)",
            findings=tuple(found),
        )
    except VerifyDagError as exc:  # a bad comment-density setting, say
        rules = SkillOutcome(
            skill=skill,
            status="NOT_RUN",
            reason=REASONS[skill],
            notes=f"deterministic rules: {exc.message}",
        )
    model = runner.model_skill(state, skill, REASONS[skill])
    return [rules.combine(model.model_copy(update={"notes": f"model pass: {model.notes}"}))]


def qa(state: RunState) -> list[SkillOutcome]:
    """qa's judgement pass. Its changed-line coverage comes from the tester's run (the test
    queue) and is merged with this part when the chord is collected."""
    model = runner.model_skill(state, "qa", REASONS["qa"])
    return [model.model_copy(update={"notes": f"model pass: {model.notes}"})]


def codex_reviewer(state: RunState) -> list[SkillOutcome]:
    return [runner.codex_reviewer(state, REASONS["codex-reviewer"])]


def light_judgement(state: RunState) -> list[SkillOutcome]:
    """Light runs exactly one judgement reviewer: codex-reviewer when Codex is there, else reviewer.

    The choice is made here, visibly, never inside codex-reviewer: a substitute hidden behind its
    name would report model diversity that did not happen.
    """
    if backends.codex_on_path():
        return [
            runner.codex_reviewer(state, "light judgement reviewer (Codex available)"),
            light_skip("reviewer"),
        ]
    chosen = runner.model_skill(state, "reviewer", "light judgement reviewer (Codex unavailable)")
    note = "Judgement reviewer at light depth (Codex unavailable)"
    chosen = chosen.model_copy(update={"notes": f"{note}. {chosen.notes}"})
    return [chosen, light_skip("codex-reviewer")]


def light_skip(skill: str) -> SkillOutcome:
    """The light reviewer that was not chosen: outside the composition, so SKIPPED with the
    seed's exact reason (the chosen one's notes say whether Codex was available)."""
    why = "not in light composition"
    return SkillOutcome(skill=skill, status="SKIPPED", ran=False, notes=why, reason=why)


def _gated(skill: str) -> Reviewer:
    """ux-reviewer and visual-verify run only when triage Job B gated them in."""

    def review(state: RunState) -> list[SkillOutcome]:
        gate = state.triage.gating.get(skill) if state.triage is not None else None
        if gate is None:
            return [
                SkillOutcome(
                    skill=skill,
                    status="NOT_RUN",
                    reason=REASONS[skill],
                    notes="no triage gating decision was recorded",
                )
            ]
        if not gate.applies:
            why = gate.reason if gate.reason.startswith("--skip") else f"gated: {gate.reason}"
            return [SkillOutcome(skill=skill, status="SKIPPED", ran=False, notes=why, reason=why)]
        return [runner.model_skill(state, skill, gate.reason)]

    return review


def plan_completeness(state: RunState) -> list[SkillOutcome]:
    return [runner.plan_completeness(state, REASONS["plan-completeness"])]


REGISTRY: dict[str, Reviewer] = {
    "judgement": light_judgement,
    "reviewer": _always("reviewer"),
    "codex-reviewer": codex_reviewer,
    "comment-review": comment_review,
    "qa": qa,
    "ux-reviewer": _gated("ux-reviewer"),
    "visual-verify": _gated("visual-verify"),
    "plan-completeness": plan_completeness,
    "contract": contract.review,
}

# Skills outside the light composition, reported SKIPPED (never NOT_RUN: they were not due).
OUTSIDE_LIGHT = ("comment-review", "qa", "ux-reviewer", "visual-verify")


def composition_skips(state: RunState) -> list[SkillOutcome]:
    out: list[SkillOutcome] = []
    if state.request.depth == "light":
        out.extend(
            SkillOutcome(
                skill=s,
                status="SKIPPED",
                ran=False,
                notes="not in light composition",
                reason="not in light composition",
            )
            for s in OUTSIDE_LIGHT
        )
    if not state.request.plan_text:
        out.append(
            SkillOutcome(
                skill="plan-completeness",
                status="SKIPPED",
                ran=False,
                notes="no plan resolved",
                reason="no plan resolved",
            )
        )
    return out
