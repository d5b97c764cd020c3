"""The phase tasks of the verify DAG: thin wrappers around ``verify_dag.phases``."""

from __future__ import annotations

from typing import Any

from celery.result import AsyncResult

from verify_dag import git, report
from verify_dag.celery_app import app
from verify_dag.models import RunState, SkillOutcome
from verify_dag.phases import debugger, engineer, exerciser, scope, static, tester, triage
from verify_dag.reviewers import composition_skips
from verify_dag.tasks.base import previous_result, progress, state_phase

# Where a chord header task finds the run's state when a previous phase stopped the run.
_STOPPED = "stopped"


@app.task(name="verify_dag.scope", bind=True)
def scope_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    @state_phase("scope")
    def phase(st: RunState) -> RunState:
        sc = scope.run(st.request)
        update: dict[str, Any] = {"scope": sc}
        if sc.error is not None:
            update.update(error_code=sc.error.code, error_message=sc.error.message)
        return st.model_copy(update=update)

    return phase(self, state)


@app.task(name="verify_dag.engineer", bind=True)
def engineer_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    @state_phase("engineer")
    def phase(st: RunState) -> RunState:
        assert st.scope is not None
        return st.model_copy(update={"engineer": engineer.run(st.request.repo, st.scope.new_commit)})

    return phase(self, state)


@app.task(name="verify_dag.triage", bind=True)
def triage_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    @state_phase("triage")
    def phase(st: RunState) -> RunState:
        assert st.scope is not None
        with git.worktree(st.request.repo, st.scope.new_commit) as workdir:
            return st.model_copy(update={"toolchain": triage.discover(workdir)})

    return phase(self, state)


@app.task(name="verify_dag.static", bind=True)
def static_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    @state_phase("static")
    def phase(st: RunState) -> RunState:
        assert st.scope is not None and st.toolchain is not None
        with git.worktree(st.request.repo, st.scope.new_commit) as workdir:
            outcome = static.run(st.scope, st.toolchain, workdir, st.request.tool_timeout)
        return st.model_copy(update={"static": outcome})

    return phase(self, state)


def _header(task: Any, state: dict[str, Any], skill: str, fn: Any) -> list[dict[str, Any]]:
    """A chord header body: never raises, so the chord body (and the report) always runs."""
    done = previous_result(task)
    if done is not None:
        return list(done)
    st = RunState.model_validate(state)
    if st.stopped:
        return []
    progress(task, st.run_id, skill)
    try:
        outcomes: list[SkillOutcome] = fn(st)
    except Exception as exc:  # noqa: BLE001 - a crashed skill is NOT_RUN, never a lost chord
        outcomes = [SkillOutcome(skill=skill, status="NOT_RUN",
                                 notes=f"crashed: {type(exc).__name__}: {exc}")]
    return [o.model_dump(mode="json") for o in outcomes]


def _run_tester(st: RunState) -> list[SkillOutcome]:
    assert st.scope is not None and st.toolchain is not None
    with git.worktree(st.request.repo, st.scope.new_commit) as workdir:
        return [tester.run(st.scope, st.toolchain, workdir, st.request.test_timeout)]


@app.task(name="verify_dag.test", bind=True)
def test_task(self: Any, state: dict[str, Any]) -> list[dict[str, Any]]:
    return _header(self, state, "tester", _run_tester)


@app.task(name="verify_dag.collect", bind=True)
def collect_task(self: Any, results: list[list[dict[str, Any]]], context_id: str) -> dict[str, Any]:
    """Chord body: the fan-in. The run's state is the static task's stored result."""
    done = previous_result(self)
    if done is not None:
        return dict(done)
    ctx = AsyncResult(context_id, app=app).get(disable_sync_subtasks=False, timeout=60)
    st = RunState.model_validate(ctx)
    if st.stopped:
        return dict(ctx)
    progress(self, st.run_id, "collect")
    outcomes = [SkillOutcome.model_validate(o) for part in results for o in part]
    outcomes.extend(composition_skips(st))
    return st.model_copy(update={"outcomes": tuple(outcomes)}).model_dump(mode="json")


@app.task(name="verify_dag.debugger", bind=True)
def debugger_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    @state_phase("debugger")
    def phase(st: RunState) -> RunState:
        return st.model_copy(update={"outcomes": (*st.outcomes, debugger.run(st))})

    return phase(self, state)


@app.task(name="verify_dag.exerciser", bind=True)
def exerciser_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    @state_phase("exerciser")
    def phase(st: RunState) -> RunState:
        return st.model_copy(update={"outcomes": (*st.outcomes, exerciser.run(st))})

    return phase(self, state)


@app.task(name="verify_dag.report", bind=True)
def report_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    """Always runs, whatever happened before: the report is the product."""
    done = previous_result(self)
    if done is not None:
        return dict(done)
    st = RunState.model_validate(state)
    progress(self, st.run_id, "report")
    doc = report.build(st)
    report.validate(doc)
    return {"report": doc, "markdown": report.markdown(doc)}
