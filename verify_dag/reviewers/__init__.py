"""Judgement reviewers: one ``(RunState) -> list[SkillOutcome]`` per review task.

Which skills run at which depth, and when, is their registry entry (verify_dag/skills.py). A skill
whose prompt is all it needs runs as it says: always, or when triage gated it in; the others have
their own function here or their own module. How each runs (prompt, backend, parsing) lives in
:mod:`verify_dag.reviewers.runner`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from verify_dag import backends, settings, skills, workspace
from verify_dag.errors import VerifyDagError
from verify_dag.models import RunState, SkillOutcome
from verify_dag.reviewers import comments, contract, runner

Reviewer = Callable[[RunState], list[SkillOutcome]]


def _reason(skill: str) -> str:
    return skills.SKILLS[skill].reason


def skipped(skill: str, why: str) -> SkillOutcome:
    """A skill that was not due: SKIPPED, never NOT_RUN, with the fact that says so."""
    return SkillOutcome(skill=skill, status="SKIPPED", ran=False, notes=why, reason=why)


def _always(skill: str) -> Reviewer:
    def review(state: RunState) -> list[SkillOutcome]:
        return [runner.model_skill(state, skill, _reason(skill))]

    return review


def comment_review(state: RunState) -> list[SkillOutcome]:
    """The deterministic comment rules always; a model pass on top when one is configured."""
    assert state.scope is not None
    skill = "comment-review"
    try:
        with workspace.checkout(
            state.run_id, state.request.repo, state.scope.new_commit
        ) as workdir:
            setting = state.request.comment_density
            env = {**os.environ, settings.DENSITY_ENV: setting} if setting else None
            found = comments.run(state.scope, workdir, env=env)
        rules = SkillOutcome(
            skill=skill,
            status="COMPLETED",
            reason=_reason(skill),
            notes=f"deterministic rules: {len(found)} finding(s)",
            findings=tuple(found),
        )
    except VerifyDagError as exc:  # a bad comment-density setting, say
        rules = SkillOutcome(
            skill=skill,
            status="NOT_RUN",
            reason=_reason(skill),
            notes=f"deterministic rules: {exc.message}",
        )
    model = runner.model_skill(state, skill, _reason(skill))
    return [rules.combine(model.model_copy(update={"notes": f"model pass: {model.notes}"}))]


def qa(state: RunState) -> list[SkillOutcome]:
    """qa's judgement pass. Its changed-line coverage comes from the tester's run (the test
    queue) and is merged with this part when the chord is collected."""
    model = runner.model_skill(state, "qa", _reason("qa"))
    return [model.model_copy(update={"notes": f"model pass: {model.notes}"})]


def codex_reviewer(state: RunState) -> list[SkillOutcome]:
    return [runner.codex_reviewer(state, _reason("codex-reviewer"))]


def light_judgement(state: RunState) -> list[SkillOutcome]:
    """Light runs exactly one judgement reviewer: codex-reviewer when Codex is there and can
    review the scope, else reviewer (at --scope=all Codex reports SKIPPED_UNSUPPORTED_SCOPE and
    the reviewer runs in its place).

    The choice is made here, on the worker that would run Codex, and recorded: the chosen one's
    outcome (its notes say whether Codex was available) and the other's SKIPPED, outside this
    run's composition. It is never made inside codex-reviewer: a substitute hidden behind its
    name would report model diversity that did not happen.
    """
    with_codex, without = skills.light_slot()
    whole = state.scope is not None and state.scope.mode == "all"
    if backends.codex_on_path() and not whole:
        chosen = runner.codex_reviewer(state, "light judgement reviewer (Codex available)")
        return [chosen, skipped(without, "not in light composition")]
    if whole and backends.codex_on_path():
        # Codex does not audit a whole codebase (SKIPPED_UNSUPPORTED_SCOPE): the slot's one
        # judgement must still happen, so the reviewer takes it, as where Codex is missing.
        why = "Codex does not audit --scope=all"
        other = runner.codex_reviewer(state, "light judgement reviewer (Codex available)")
    else:
        why = "Codex unavailable"
        other = skipped(with_codex, "not in light composition")
    chosen = runner.model_skill(state, without, f"light judgement reviewer ({why})")
    note = f"Judgement reviewer at light depth ({why})"
    chosen = chosen.model_copy(update={"notes": f"{note}. {chosen.notes}"})
    return [chosen, other]


def _gated(skill: str) -> Reviewer:
    """A skill that runs only when triage Job B gated it in."""

    def review(state: RunState) -> list[SkillOutcome]:
        gate = state.triage.gating.get(skill) if state.triage is not None else None
        if gate is None:
            return [
                SkillOutcome(
                    skill=skill,
                    status="NOT_RUN",
                    reason=_reason(skill),
                    notes="no triage gating decision was recorded",
                )
            ]
        if not gate.applies:
            why = gate.reason if gate.reason.startswith("--skip") else f"gated: {gate.reason}"
            return [skipped(skill, why)]
        return [runner.model_skill(state, skill, gate.reason)]

    return review


def plan_completeness(state: RunState) -> list[SkillOutcome]:
    return [runner.plan_completeness(state, _reason("plan-completeness"))]


# The review-queue skills that need more than their prompt.
_OWN: dict[str, Reviewer] = {
    "codex-reviewer": codex_reviewer,
    "comment-review": comment_review,
    "qa": qa,
    "plan-completeness": plan_completeness,
    "contract": contract.review,
}


def _reviewer(skill: skills.Skill) -> Reviewer:
    if skill.name in _OWN:
        return _OWN[skill.name]
    if "triage-gated" in skill.gates.values():
        return _gated(skill.name)
    return _always(skill.name)


# One review task each (tasks/review.py), and the light slot's.
REGISTRY: dict[str, Reviewer] = {
    skills.LIGHT_SLOT: light_judgement,
    **{s.name: _reviewer(s) for s in skills.SKILLS.values() if s.queue == "review"},
}


def composition_skips(state: RunState) -> list[SkillOutcome]:
    """The review-queue skills this run's request leaves out, SKIPPED with the reason: outside
    the depth's composition, or a plan check without a plan."""
    depth = state.request.depth
    review = [s for s in skills.SKILLS.values() if s.queue == "review"]
    out = [skipped(s.name, f"not in {depth} composition") for s in review if depth not in s.gates]
    if not state.request.plan_text:
        out += [
            skipped(s.name, "no plan resolved")
            for s in review
            if s.gates.get(depth) == "needs-plan"
        ]
    return out
