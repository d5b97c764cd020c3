"""Thin Celery tasks: validate the input model, call the phase, dump the output model."""

from __future__ import annotations

from verify_dag.tasks import completion, pipeline, review, shadow

__all__ = ["completion", "pipeline", "review", "shadow"]
