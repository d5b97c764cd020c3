"""Phase 9's tasks (docs/fixes.md): thin wrappers around :mod:`verify_dag.fixes.propose`.

``verify_dag.fix.propose`` (the ``review`` queue: it asks the model backend, whose concurrency that
queue caps) makes one issue's fix options on the worker's copy of the verified commit;
``verify_dag.fix.gather`` collects them and lets the run's checkouts go. Workers never write the
user's checkout: the client applies what they propose.
"""

from __future__ import annotations

import logging
from typing import Any

from verify_dag import repos, workspace
from verify_dag.fixes.propose import propose
from verify_dag.models.fixes import FixJob, Proposals
from verify_dag.models.report import ReportIssue
from verify_dag.tasks import stash, workspaces
from verify_dag.tasks.app import app
from verify_dag.tasks.base import previous_result, progress

log = logging.getLogger(__name__)


@app.task(name="verify_dag.fix.propose", bind=True)
def propose_task(self: Any, job: dict[str, Any], issue: dict[str, Any]) -> dict[str, Any]:
    done = previous_result(self)
    if done is not None:
        return dict(done)
    j = FixJob.model_validate(stash.value(job))
    i = ReportIssue.model_validate(issue)
    progress(self, j.run_id, f"fix {i.id}")
    try:
        repo = repos.for_commit(j.run_id, j.request, j.commit)
        out = propose(workspace.ensure(j.run_id, repo, j.commit), i)
    # A chord header task never raises: the other issues' options still reach the person.
    except Exception as exc:
        log.exception("proposing fixes for %s crashed", i.id)
        out = Proposals(issue=i.id, notes=(f"proposing crashed: {type(exc).__name__}: {exc}",))
    return out.model_dump(mode="json")


@app.task(name="verify_dag.fix.gather", bind=True)
def gather_task(self: Any, results: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    workspaces.release(run_id)
    return [Proposals.model_validate(r).model_dump(mode="json") for r in results]
