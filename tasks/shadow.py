"""Shadow verification's tasks (``verify-dag shadow``): thin wrappers around
:mod:`verify_dag.shadow`.

A round is a chord: one claim task per dispatched claim, then ``verify_dag.shadow.merge``. The
claim task has one body under four names, one per resource class, so that routing can send each
claim where its work belongs (docs/shadow.md, "Queues"):

- ``verify_dag.shadow.static``: re-runs an analyser (the ``static`` queue);
- ``verify_dag.shadow.test``: re-runs one test (``test``);
- ``verify_dag.shadow.judge``: asks the model backend (``review``, whose concurrency caps model
  calls);
- ``verify_dag.shadow.search``: reads git only (anchors, "unused"/"untested" searches, line
  counts; ``git``).

A claim task never raises (a failed header task would stop the merge, and the gate with it) and
returns its stored result when redelivered with the same id.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from verify_dag import sandbox
from verify_dag.phases.claims.anchors import Where
from verify_dag.phases.claims.models import ClaimVerdict
from verify_dag.phases.claims.verifiers import unverifiable
from verify_dag.shadow import merge, run
from verify_dag.shadow.models import Dispatch, ShadowJob
from verify_dag.tasks.app import app
from verify_dag.tasks.base import previous_result, progress

log = logging.getLogger(__name__)


def _claim(task: Any, job: dict[str, Any], dispatch: dict[str, Any]) -> dict[str, Any]:
    done = previous_result(task)
    if done is not None:
        return dict(done)
    j = ShadowJob.model_validate(job)
    d = Dispatch.model_validate(dispatch)
    progress(task, j.run_id, f"shadow {d.claim.id}")
    try:
        with sandbox.tracking(unsandboxed=j.no_sandbox):
            verdict = run.verify(j, d)
    # Whatever broke, the claim gets a verdict that says so and the round still merges.
    except Exception as exc:
        log.exception("shadow verifier of %s crashed", d.claim.id)
        where = Where(repo=Path(j.repo), commit=j.commit, label=j.label)
        verdict = unverifiable(
            d.claim, where, f"the verifier crashed: {type(exc).__name__}: {exc}"
        ).model_copy(update={"round": d.round})
    return verdict.model_dump(mode="json")


@app.task(name="verify_dag.shadow.search", bind=True)
def search_task(self: Any, job: dict[str, Any], dispatch: dict[str, Any]) -> dict[str, Any]:
    return _claim(self, job, dispatch)


@app.task(name="verify_dag.shadow.static", bind=True)
def static_task(self: Any, job: dict[str, Any], dispatch: dict[str, Any]) -> dict[str, Any]:
    return _claim(self, job, dispatch)


@app.task(name="verify_dag.shadow.test", bind=True)
def test_task(self: Any, job: dict[str, Any], dispatch: dict[str, Any]) -> dict[str, Any]:
    return _claim(self, job, dispatch)


@app.task(name="verify_dag.shadow.judge", bind=True)
def judge_task(self: Any, job: dict[str, Any], dispatch: dict[str, Any]) -> dict[str, Any]:
    return _claim(self, job, dispatch)


@app.task(name="verify_dag.shadow.merge", bind=True)
def merge_task(
    self: Any,
    results: list[dict[str, Any]],
    job: dict[str, Any],
    previous: list[dict[str, Any]],
    round_no: int,
) -> dict[str, Any]:
    """Chord body: this round's verdicts over the earlier rounds', merged and guarded."""
    done = previous_result(self)
    if done is not None:
        return dict(done)
    progress(self, ShadowJob.model_validate(job).run_id, f"shadow merge {round_no}")
    verdicts = {v.claim_id: v for v in map(ClaimVerdict.model_validate, [*previous, *results])}
    return merge.settle(verdicts, round_no).model_dump(mode="json")
