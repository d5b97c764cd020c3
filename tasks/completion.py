"""The completion verifier's tasks (``verify-dag completion``): thin wrappers around
:mod:`verify_dag.completion.flow`.

A step task validates the job, runs its step, appends its row to dispatches.jsonl and passes the
job on; the report task, and quick mode's single task, return the :class:`CompletionResult`. Only
the execute and quick tasks start a process. A redelivered task returns its stored result, and its
row is never appended twice. A step that cannot proceed (an artifact missing or damaged) records
its row with the error and fails, which ends the chain and the client's wait (exit 3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verify_dag import sandbox
from verify_dag.completion import flow
from verify_dag.completion.models import CompletionJob, CompletionResult
from verify_dag.errors import VerifyDagError
from verify_dag.tasks.app import app
from verify_dag.tasks.base import previous_result, progress


def _run(
    task: Any, job: dict[str, Any], step: str, fn: Callable[[CompletionJob], str | CompletionResult]
) -> dict[str, Any]:
    """Run one step; a step passes the job on, the last one returns the CompletionResult."""
    done = previous_result(task)
    if done is not None:
        return dict(done)
    j = CompletionJob.model_validate(job)
    progress(task, j.run_id, step)
    try:
        with sandbox.tracking(unsandboxed=j.no_sandbox):
            out = fn(j)
    except Exception as exc:
        why = exc.message if isinstance(exc, VerifyDagError) else f"{type(exc).__name__}: {exc}"
        flow.record(j, step, task.name, task.request.id, f"error: {why}")
        raise
    if isinstance(out, CompletionResult):
        flow.record(j, step, task.name, task.request.id, out.verdict)
        return out.model_dump(mode="json")
    flow.record(j, step, task.name, task.request.id, out)
    return j.model_dump(mode="json")


@app.task(name="verify_dag.completion.extract", bind=True)
def extract_task(self: Any, job: dict[str, Any]) -> dict[str, Any]:
    return _run(self, job, "extract", flow.extract)


@app.task(name="verify_dag.completion.execute", bind=True)
def execute_task(self: Any, job: dict[str, Any]) -> dict[str, Any]:
    return _run(self, job, "execute", flow.execute)


@app.task(name="verify_dag.completion.classify", bind=True)
def classify_task(self: Any, job: dict[str, Any]) -> dict[str, Any]:
    return _run(self, job, "classify", flow.classify)


@app.task(name="verify_dag.completion.report", bind=True)
def report_task(self: Any, job: dict[str, Any]) -> dict[str, Any]:
    return _run(self, job, "report", flow.render)


@app.task(name="verify_dag.completion.quick", bind=True)
def quick_task(self: Any, job: dict[str, Any]) -> dict[str, Any]:
    return _run(self, job, "quick", flow.quick)
