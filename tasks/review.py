"""One task per judgement reviewer, named ``verify_dag.review.<skill>`` for Flower."""

from __future__ import annotations

from typing import Any

from verify_dag.reviewers import REGISTRY, Reviewer
from verify_dag.tasks.app import app
from verify_dag.tasks.base import header_phase


def _make(skill: str, fn: Reviewer) -> Any:
    body = header_phase(skill)(fn)

    @app.task(name=f"verify_dag.review.{skill}", bind=True)
    def review_task(self: Any, state: dict[str, Any]) -> Any:
        return body(self, state)

    return review_task


TASKS = {skill: _make(skill, fn) for skill, fn in REGISTRY.items()}
