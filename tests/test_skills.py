"""The skills registry agrees with the places that cannot read it: task routes and tasks."""

from __future__ import annotations

from verify_dag import reviewers, skills
from verify_dag.reviewers import contract
from verify_dag.tasks import app, review

# The task each skill outside the review queue runs in (the review ones are verify_dag.review.*).
_TASK = {
    "static-analysis": "verify_dag.static",
    "tester": "verify_dag.test",
    "exerciser": "verify_dag.exerciser",
    "debugger": "verify_dag.debugger",
}


def test_each_skill_is_routed_to_its_queue() -> None:
    for name, skill in skills.SKILLS.items():
        task = _TASK.get(name, "verify_dag.review.*")
        assert app.ROUTES[task] == skill.queue, name


def test_every_review_queue_skill_and_the_light_slot_have_a_task() -> None:
    on_review = [n for n, s in skills.SKILLS.items() if s.queue == "review"]
    assert list(reviewers.REGISTRY) == [skills.LIGHT_SLOT, *on_review]
    assert sorted(t.name for t in review.TASKS.values()) == sorted(
        f"verify_dag.review.{n}" for n in reviewers.REGISTRY
    )


def test_the_light_slot_is_one_pair() -> None:
    with_codex, without = skills.light_slot()
    assert (with_codex, without) == ("codex-reviewer", "reviewer")
    slot = [n for n in skills.SKILLS if skills.gate(n, "light") in ("if-codex", "if-no-codex")]
    assert sorted(slot) == sorted((with_codex, without))


def test_the_contract_skill_gives_the_registry_reason() -> None:
    assert contract.SKILL in skills.SKILLS
    assert skills.SKILLS[contract.SKILL].reason == contract.REASON
    assert contract.SKILL not in skills.pipeline()  # reported only when a contract was given
