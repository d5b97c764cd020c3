"""A run's workspace on every worker host goes when the run ends (verify_dag/workspace.py).

The report task removes it on its own host and broadcasts ``verify_dag_release`` so that every
other worker removes its copy too; a worker that was down then removes stale ones when it starts.
A broadcast is fire-and-forget (no reply awaited): it never delays the report.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.worker.control import control_command

from verify_dag import workspace
from verify_dag.errors import FatalError
from verify_dag.tasks.app import app

log = logging.getLogger(__name__)
COMMAND = "verify_dag_release"


@control_command(args=[("run_id", str)], signature="<run_id>")
def verify_dag_release(state: Any, run_id: str) -> dict[str, Any]:
    """Remote control: remove this host's workspace of ``run_id``."""
    try:
        return {"ok": "released" if workspace.release(run_id) else "nothing here"}
    except FatalError as exc:
        return {"error": exc.message}


def release(run_id: str) -> None:
    """The run is over: its workspace goes here and, on a broker, on every other worker."""
    workspace.release(run_id)
    if str(app.conf.broker_url).startswith("memory://"):
        return  # the embedded worker is this process: nothing else holds a copy
    try:
        app.control.broadcast(COMMAND, arguments={"run_id": run_id})
    # The report is delivered whatever the broker says now; the sweep catches what is left.
    except Exception as exc:  # noqa: BLE001
        log.warning("could not ask the workers to release run %s: %s", run_id, exc)
