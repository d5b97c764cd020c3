"""When the nightly audits run: a Celery beat schedule entry for ``verify_dag.fleet.audit``.

``celery -A verify_dag beat`` reads it from the environment (``VERIFY_DAG_FLEET_FILE``, and
``VERIFY_DAG_FLEET_CRON``, default 02:00 UTC); ``verify-dag fleet beat`` builds it from its flags
and runs Celery beat in its own process. The audit itself is a task on the ``fleet`` queue.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from verify_dag.errors import UsageError

FLEET_FILE_ENV = "VERIFY_DAG_FLEET_FILE"
FLEET_CRON_ENV = "VERIFY_DAG_FLEET_CRON"
FLEET_FAIL_ON_ENV = "VERIFY_DAG_FLEET_FAIL_ON"
DEFAULT_CRON = "0 2 * * *"
ENTRY = "verify-dag-fleet-audit"
TASK = "verify_dag.fleet.audit"
QUEUE = "fleet"
DEFAULT_TIMEOUT = 7200.0


def cron(expr: str, clock: Callable[[], datetime] | None = None) -> Any:
    """A celery crontab read in UTC (the app's timezone); ``clock`` is its idea of now (tests
    fix it). Without one it pickles: beat keeps its schedule in a shelve file."""
    from celery.schedules import crontab

    fields = expr.split()
    if len(fields) != 5:
        raise UsageError(
            f"--cron: expected five fields (minute hour day month weekday), got {expr!r}"
        )
    minute, hour, day, month, weekday = fields
    try:
        return crontab(
            minute=minute,
            hour=hour,
            day_of_month=day,
            month_of_year=month,
            day_of_week=weekday,
            **({"nowfun": clock} if clock is not None else {}),
        )
    except ValueError as exc:
        raise UsageError(f"--cron: {expr!r}: {exc}") from None


def every(seconds: float) -> Any:
    from celery.schedules import schedule

    return schedule(run_every=timedelta(seconds=seconds))


def entry(
    fleet_file: str,
    store: str | None,
    fail_on: int,
    timeout: float,
    when: Any,
    max_review_tokens: int | None = None,
) -> dict[str, Any]:
    """The beat schedule entry of one fleet file's audits (``max_review_tokens``: a budget that
    wins over the file's)."""
    kwargs: dict[str, Any] = {
        "fleet_file": fleet_file,
        "store": store,
        "fail_on": fail_on,
        "timeout": timeout,
    }
    if max_review_tokens is not None:  # older workers' audit task takes no such argument
        kwargs["max_review_tokens"] = max_review_tokens
    return {
        "task": TASK,
        "schedule": when,
        "kwargs": kwargs,
        "options": {"queue": QUEUE},
    }


def from_environment(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The beat schedule ``celery -A verify_dag beat`` runs: the fleet file's audits, when
    ``VERIFY_DAG_FLEET_FILE`` names one; else nothing."""
    env = os.environ if env is None else env
    path = env.get(FLEET_FILE_ENV, "").strip()
    if not path:
        return {}
    fail_on = env.get(FLEET_FAIL_ON_ENV, "").strip() or "7"
    if not fail_on.isdigit() or not 1 <= int(fail_on) <= 10:
        raise UsageError(f"{FLEET_FAIL_ON_ENV}: expected 1 to 10, got {fail_on!r}")
    when = cron(env.get(FLEET_CRON_ENV, "").strip() or DEFAULT_CRON)
    store = env.get("VERIFY_DAG_STORE", "").strip() or None
    return {ENTRY: entry(path, store, int(fail_on), DEFAULT_TIMEOUT, when)}
