"""One claim verified on a worker: its repository, checkout and test runtime, then the verifier.

The repository is where the client named it (the embedded worker, or workers on the same host),
or, with a broker, this worker's copy of the git bundle the client stored with the run
(``<store>/<run id>/snapshot.bundle``, as for verify runs: verify_dag/repos.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

from verify_dag import git, processes, repos, store, tools
from verify_dag.errors import FatalError
from verify_dag.phases import triage
from verify_dag.phases.claims import verifiers
from verify_dag.phases.claims.budget import Budget
from verify_dag.phases.claims.models import ClaimVerdict
from verify_dag.phases.tester import env as testenv
from verify_dag.shadow import model_arm
from verify_dag.shadow.models import Dispatch, ShadowJob


def pin(job: ShadowJob) -> ShadowJob:
    """Client side, with a broker: the verified commit and the repository's refs as a bundle in
    the report store, for workers on other hosts."""
    run_dir = store.resolve(job.store) / store.check_run_id(job.run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    bundle = run_dir / repos.BUNDLE
    git.create_bundle(job.repo, bundle, {"shadow": job.commit})
    return job.model_copy(update={"bundle": str(bundle)})


def repository(job: ShadowJob) -> Path:
    """This worker's repository for the job."""
    if job.bundle is not None:
        return repos.run_copy(job.run_id, job.store, job.bundle)
    if not Path(job.repo).is_dir():
        raise FatalError(
            f"repository {job.repo} does not exist on this worker",
            hint="submit with --broker from a host whose report store the workers share",
        )
    return Path(job.repo)


@contextlib.contextmanager
def _checkout(repo: Path, commit: str, wanted: bool) -> Iterator[Path | None]:
    if not wanted:
        yield None
        return
    with git.worktree(repo, commit) as wt:
        yield wt


def verify(job: ShadowJob, dispatch: Dispatch) -> ClaimVerdict:
    """The verdict on one dispatched claim; the budget starts now and covers everything."""
    budget = Budget(job.budget)
    claim = dispatch.claim
    surface = verifiers.Surface(
        repo=repository(job),
        commit=job.commit,
        label=job.label,
        goal=job.goal,
        paths=claim.artifacts() if dispatch.narrow else job.surface,
        env=processes.scrubbed_env({"PYTHONDONTWRITEBYTECODE": "1"}),
    )
    route = claim.route()
    with _checkout(surface.repo, job.commit, route != "search") as wt:
        surface = dataclasses.replace(surface, workdir=wt)
        if wt is not None and route == "judge":
            judge, why = model_arm.configured(wt)
            surface = dataclasses.replace(surface, judge=judge, no_judge=why or "")
        if wt is not None and route == "static" and claim.tool not in tools.REGISTRY:
            surface = dataclasses.replace(surface, toolchain=triage.discover(wt))
        if wt is None or route != "test":
            return verifiers.verify(
                claim, surface, budget, outside=dispatch.outside, round=dispatch.round
            )
        with testenv.runtime(wt, triage.discover(wt)) as tenv:
            if tenv.error is not None:
                return verifiers.unverifiable(
                    claim,
                    surface,
                    f"the test environment could not be built: {tenv.error}",
                    method="test",
                ).model_copy(update={"round": dispatch.round})
            if tenv.python is not None:
                surface = dataclasses.replace(
                    surface,
                    python=str(tenv.python),
                    runner=tenv.runner,
                    env=testenv.suite_env(tenv, {"PYTHONDONTWRITEBYTECODE": "1"}),
                )
            return verifiers.verify(claim, surface, budget, round=dispatch.round)
