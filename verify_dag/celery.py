"""The Celery app where ``celery -A verify_dag`` looks for it (Celery's own convention, a
``celery`` module of the package): ``celery -A verify_dag worker -Q test`` starts a worker the
Celery way, with Celery's ``--broker`` or ``CELERY_BROKER_URL`` or ours (ops/README.md,
"Starting workers")."""

from __future__ import annotations

from verify_dag.tasks.app import app

__all__ = ["app"]
