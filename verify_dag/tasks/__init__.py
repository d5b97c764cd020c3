"""Thin Celery tasks: validate the input model, call the phase, dump the output model."""

from __future__ import annotations

from verify_dag.tasks import pipeline, review

__all__ = ["pipeline", "review"]
