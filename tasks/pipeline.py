"""The phase tasks of the verify DAG: thin wrappers around ``verify_dag.phases``."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery.result import AsyncResult

from verify_dag import evidence, git, report, repos, store, workspace
from verify_dag.errors import VerifyDagError
from verify_dag.models import Report, ReportResult, RunState, SkillOutcome
from verify_dag.models.findings import ChangedCoverage
from verify_dag.models.state import EarlyProbes, ProbeResult
from verify_dag.phases import debugger, engineer, exerciser, scope, static, tester, triage
from verify_dag.phases.exerciser import derived
from verify_dag.phases.tester import coverage, suite_cache
from verify_dag.phases.tester import env as testenv
from verify_dag.phases.triage import gating
from verify_dag.report import verdict
from verify_dag.reviewers import composition_skips
from verify_dag.tasks import stash, workspaces
from verify_dag.tasks.app import app
from verify_dag.tasks.base import (
    RunFailed,
    failed,
    header_phase,
    previous_result,
    progress,
    state_phase,
    stop_if_cancelled,
    tracked,
)

log = logging.getLogger(__name__)


@state_phase("scope")
def _scope(st: RunState) -> RunState:
    sc = scope.run(st.request)
    st = st.model_copy(update={"scope": sc})
    if sc.error is not None:
        return failed(st, "scope", sc.error.code, sc.error.message)
    return st


@state_phase("engineer")
def _engineer(st: RunState) -> RunState:
    assert st.scope is not None
    found = engineer.run(st.request.repo, st.scope.new_commit)
    return st.model_copy(update={"engineer": found})


@state_phase("triage")
def _triage(st: RunState) -> RunState:
    """Job A (toolchain) always; Job B (assignments and gating) reads files only at deep."""
    assert st.scope is not None
    with workspace.checkout(st.run_id, st.request.repo, st.scope.new_commit) as workdir:
        st = st.model_copy(update={"toolchain": triage.discover(workdir, st.engineer)})
        return st.model_copy(update={"triage": gating.run(st, workdir)})


@state_phase("static")
def _static(st: RunState) -> RunState:
    assert st.scope is not None and st.toolchain is not None
    toolchain = st.toolchain
    with (
        workspace.checkout(st.run_id, st.request.repo, st.scope.new_commit) as workdir,
        contextlib.ExitStack() as held,
    ):
        got: list[tuple[Path | None, bool]] = []

        def python() -> tuple[Path | None, bool]:
            # The project's env, built (or taken shared) only once a tool is not in the
            # result cache, and held until static is done.
            if not got:
                got.append(held.enter_context(testenv.interpreter(workdir, toolchain)))
            return got[0]

        outcome = static.run(
            st.scope,
            toolchain,
            workdir,
            st.request.tool_timeout,
            python,
            st.run_id,
            # Whose tool caches (mypy's) to keep: this host's copy of the repository, the same
            # path for every run of a local repository or of a URL (its mirror).
            project=st.request.repo,
        )
    return st.model_copy(update={"static": outcome})


@header_phase("tester")
def _tester(st: RunState) -> list[SkillOutcome]:
    """The suite runs once, under coverage only where something reads it: qa's changed-line
    coverage at deep (collect merges it with qa's judgement pass from the review queue), and the
    --fail-under gate. A suite already run on the same inputs comes from the result cache."""
    assert st.scope is not None and st.toolchain is not None
    deep = st.request.depth == "deep"
    measure = deep or st.request.fail_under is not None
    with workspace.checkout(st.run_id, st.request.repo, st.scope.new_commit) as workdir:
        entry = suite_cache.key(
            st.scope,
            st.toolchain,
            workdir,
            test_timeout=st.request.test_timeout,
            per_test_timeout=st.request.per_test_timeout,
            measure=measure,
        )
        known = suite_cache.get(entry)
        if known is not None:
            return known
        outcomes = _run_suite(st, workdir, deep, measure)
    suite_cache.put(entry, outcomes)
    return outcomes


def _run_suite(st: RunState, workdir: Path, deep: bool, measure: bool) -> list[SkillOutcome]:
    assert st.scope is not None and st.toolchain is not None
    with tempfile.TemporaryDirectory(prefix="verify-dag-cov-") as scratch:
        # Whenever coverage is measured (deep, or --fail-under at light): the store keeps it as
        # coverage.xml, so diff-cover can re-check the figure the gate used.
        xml_file = Path(scratch) / "coverage.xml" if measure else None
        outcome, data = tester.run_with_coverage(
            st.scope,
            st.toolchain,
            workdir,
            st.request.test_timeout,
            xml_file=xml_file,
            per_test_timeout=st.request.per_test_timeout,
            measure=measure,
        )
        xml = _small_text(xml_file)
    figure = coverage.diff_coverage(st.scope, data) if data is not None else None
    if figure is not None:
        # The figure as a number, for the report's coverage object and --fail-under.
        measured = ChangedCoverage(covered=figure.covered, total=figure.total)
        outcome = outcome.model_copy(update={"coverage": measured})
    if not deep:
        return [outcome.model_copy(update={"coverage_xml": xml})] if xml else [outcome]
    if figure is None:
        qa = SkillOutcome(
            skill="qa",
            status="NOT_RUN",
            reason="changed-line coverage",
            notes=f"changed-line coverage: no coverage data ({outcome.notes})",
        )
    else:
        qa = coverage.qa_outcome(figure)
        qa = qa.model_copy(
            update={"notes": f"changed-line coverage: {qa.notes}", "coverage_xml": xml}
        )
    return [outcome, qa]


# Coverage XML travels with the run's state through the result backend to be stored: only the
# scoped files are in it, and anything larger than this is left out rather than carried along.
_COVERAGE_XML_CAP = 500_000


def _small_text(path: Path | None) -> str | None:
    if path is None or not path.is_file() or path.stat().st_size > _COVERAGE_XML_CAP:
        return None
    return path.read_text(encoding="utf-8", errors="replace")


@state_phase("exerciser")
def _exerciser(st: RunState) -> RunState:
    return st.model_copy(update={"outcomes": (*st.outcomes, exerciser.run(st))})


@state_phase("debugger")
def _debugger(st: RunState) -> RunState:
    """After the exerciser: its failures are among those the debugger re-runs at the base."""
    return st.model_copy(update={"outcomes": (*st.outcomes, debugger.run(st))})


def _probe(task: Any, state: dict[str, Any]) -> Any:
    """The derived exercise's probes, run beside the suite for the exerciser to judge
    (derived.early). Never raises into the chord: probes that could not run ahead are run by
    the exerciser itself, which then says why."""
    done = previous_result(task)
    if done is not None:
        return done
    st = stash.state(state)
    if st.stopped:
        return None
    stop_if_cancelled(st.run_id)
    progress(task, st.run_id, "probes")
    try:
        with tracked(st) as (used, hit, _):
            ran = derived.early(repos.localize(st))
    except Exception:
        log.exception("the derived probes could not run ahead")
        return None
    if ran is None:
        return None
    key, results = ran
    early = EarlyProbes(
        key=key,
        results=tuple(
            ProbeResult(
                returncode=r.returncode, stdout=r.stdout, stderr=r.stderr, timed_out=r.timed_out
            )
            for r in results
        ),
        isolation=tuple(sorted(used)),
        limits=tuple(hit),
    )
    return stash.put_probes(st.run_id, early.model_dump(mode="json"))


def collect(st: RunState, results: list[Any]) -> RunState:
    """The fan-in: the tester's outcomes, then the reviewers' in their order, then the
    composition's skips. A part that is not a list of outcomes (static's own state, when no
    reviewer followed it) carries none; the derived probes run ahead become the state's.

    A skill can arrive in two parts (qa's deterministic coverage from the tester task, its
    judgement from the review task): they become one outcome with both parts' findings.
    """
    merged: dict[str, SkillOutcome] = {}
    probed = None
    for part in results:
        for raw in stash.outcomes(part):
            o = SkillOutcome.model_validate(raw)
            merged[o.skill] = merged[o.skill].combine(o) if o.skill in merged else o
        found = stash.probes(part)
        probed = EarlyProbes.model_validate(found) if found is not None else probed
    outcomes = [*merged.values(), *composition_skips(st)]
    return st.model_copy(update={"outcomes": tuple(outcomes), "probed": probed})


@app.task(name="verify_dag.scope", bind=True)
def scope_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    return _scope(self, state)


@app.task(name="verify_dag.engineer", bind=True)
def engineer_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    return _engineer(self, state)


@app.task(name="verify_dag.triage", bind=True)
def triage_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    return _triage(self, state)


@app.task(name="verify_dag.static", bind=True)
def static_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    return _static(self, state)


@app.task(name="verify_dag.test", bind=True)
def test_task(self: Any, state: dict[str, Any]) -> Any:
    return _tester(self, state)


@app.task(name="verify_dag.reviews", bind=True)
def reviews_task(self: Any, results: list[Any]) -> list[Any]:
    """The reviewers' fan-in: the references to their outcomes as one list, in header order
    (collect reads them)."""
    return [ref for part in results for ref in (part if isinstance(part, list) else [part])]


@app.task(name="verify_dag.collect", bind=True)
def collect_task(self: Any, results: list[Any], context_id: str) -> dict[str, Any]:
    """Chord body. A chord body only receives the header's results (the tester's outcomes and
    the reviewers'), so the run's state is read back from the static task's stored result (its
    id is fixed when the canvas is built)."""
    done = previous_result(self)
    if done is not None:
        return dict(done)
    ctx = AsyncResult(context_id, app=app).get(disable_sync_subtasks=False, timeout=60)
    st = stash.state(ctx)
    if st.stopped:
        return dict(ctx)
    progress(self, st.run_id, "collect")
    return stash.put_state(collect(st, results), "collect")


@app.task(name="verify_dag.probe", bind=True)
def probe_task(self: Any, state: dict[str, Any]) -> Any:
    return _probe(self, state)


@app.task(name="verify_dag.exerciser", bind=True)
def exerciser_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    return _exerciser(self, state)


@app.task(name="verify_dag.debugger", bind=True)
def debugger_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    return _debugger(self, state)


@app.task(name="verify_dag.report", bind=True)
def report_task(self: Any, state: dict[str, Any]) -> dict[str, Any]:
    """Always runs, whatever happened before: the report is the product. Returns a
    ReportResult as JSON; the client validates it back (client.report_result)."""
    done = previous_result(self)
    if done is not None:
        return dict(done)
    st = stash.state(state)
    progress(self, st.run_id, "report")
    doc = report.build(st, _source(st))
    report.validate(doc.model_dump(mode="json"))
    result = _stored(st, doc, report.markdown(doc)).model_dump(mode="json")
    # The run is over: its checkouts go, here and on every worker that made one.
    workspaces.release(st.run_id)
    if doc.status != "ok":
        # Stored first, then failed: an errored or blocked run shows as FAILURE in Flower (its
        # Failed filter, flower_events_total{type="task-failed"}), and the client still gets
        # the report, carried by the exception (RunFailed).
        why = doc.error.message if doc.error is not None else "no analysis completed"
        raise RunFailed(f"run {st.run_id} {doc.status}: {why}", result)
    return result


def _source(st: RunState) -> Callable[[str], list[str]] | None:
    """The verified commit's files, read from git when a fingerprint needs one (report.build)."""
    if st.scope is None or not st.scope.new_commit:
        return None
    try:
        repo = repos.localize(st).request.repo
    except VerifyDagError:
        return None  # fingerprints then go by rule and path alone
    # Issues lie on the files the change touched: asking for one reads them all.
    touched = [f.path for f in st.scope.included if f.status != "deleted"]
    read = git.reader(repo, st.scope.new_commit, touched)

    def lines(path: str) -> list[str]:
        return (read(path) or "").split("\n")

    return lines


def _stored(st: RunState, doc: Report, markdown: str) -> ReportResult:
    """Write the run's files to the store; what could not be written is said, never raised."""
    # The evidence bundle first: record() writes meta.json, which marks the run complete.
    try:
        bundle = store.record_evidence(st.run_id, st.request, evidence.build(st))
    # Whatever broke the bundle, the report itself must still be delivered and stored.
    except Exception as exc:  # noqa: BLE001
        bundle = {"storeError": f"evidence bundle not built: {type(exc).__name__}: {exc}"}
    xml = next((o.coverage_xml for o in st.outcomes if o.coverage_xml), None)
    kept = store.record_coverage(st.run_id, st.request, xml)
    saved = store.record(st.run_id, st.request, doc, markdown)
    # A report the store could not keep leaves no run there: that is the one error to tell,
    # whatever became of the run's other files.
    written = [saved] if "storeError" in saved else [bundle, kept]
    sc = st.scope
    return ReportResult(
        verdict=verdict.words(doc),
        exit_code=doc.run.exit_code,
        report=doc,
        markdown=markdown,
        stored=saved.get("stored"),
        store_errors=tuple(w["storeError"] for w in written if "storeError" in w),
        compared_commit=sc.old_commit if sc is not None else None,
        verified_commit=(sc.new_commit or None) if sc is not None else None,
    )
