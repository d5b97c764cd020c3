"""The nightly audit as a task (docs/fleet.md): Celery beat sends ``verify_dag.fleet.audit`` on
its schedule (verify_dag/fleet/schedule.py) to the ``fleet`` queue, and a worker that consumes it
audits the fleet file: every repository submitted as a verify run, one summary stored.

The audit waits for its runs, so it must never share a pool with the phases it waits for: the
``fleet`` queue is consumed only by a worker started for it (``--queues fleet``), never by a
default worker.
"""

from __future__ import annotations

import time
from typing import Any

from verify_dag import fleet
from verify_dag.files import file_lock
from verify_dag.fleet import audit
from verify_dag.tasks.app import app


@app.task(name="verify_dag.fleet.audit", bind=True)
def audit_task(
    self: Any,
    fleet_file: str,
    store: str | None,
    fail_on: int,
    timeout: float,
    max_review_tokens: int | None = None,
) -> dict[str, Any]:
    where = fleet.fleet_dir(store)
    where.mkdir(parents=True, exist_ok=True)
    # One audit of a store at a time: a schedule that comes round while the last audit still
    # runs skips its turn instead of piling audits up (each holds a worker slot while it waits).
    with file_lock(where / ".audit.lock", deadline=time.monotonic()) as alone:
        if not alone:
            return {"skipped": "an audit of this store is still running"}
        # The file is read again each time: an edit since the last audit counts. A budget
        # given to `fleet beat` wins over the file's.
        summary = audit.run(
            fleet.load(fleet_file),
            fleet_file=fleet_file,
            store_dir=store,
            fail_on=fail_on,
            timeout=timeout,
            max_review_tokens=max_review_tokens or fleet.max_review_tokens(fleet_file),
        )
    return {"summaryDir": summary["summaryDir"], "exitCode": summary["exitCode"]}
