"""The report of a run (``build``), the one object every output format is generated from.

The Report model's JSON form is JSON v1 (verify_dag/models/report.py). Keys beyond the fields
existing consumers rely on are additive (consumers ignore unknown fields, so they do not bump
schemaVersion): issues[].class/baseline/inScope,
scope.compareRef/pathFilter/diffCommand/notes/nothingToVerify, top-level run (run.repo) and
dedup (docs/report.md, "The JSON v1 document").
"""

from __future__ import annotations

import json
from typing import Any

from verify_dag.git import display_source
from verify_dag.models.findings import Finding, SkillOutcome
from verify_dag.models.report import (
    AdversaryFinding,
    CustomGates,
    DebuggerRow,
    DedupCounts,
    DeferredRow,
    ExcludedRecord,
    ExerciserVerdict,
    FileRecord,
    GateRow,
    GatingRow,
    IssueLocation,
    KnownFindings,
    Overall,
    PointLocation,
    ReaffirmedRow,
    ReopenedRow,
    Report,
    ReportError,
    ReportIssue,
    ReportScope,
    ReportTriage,
    RunInfo,
)
from verify_dag.models.scope import FileChange, Scope
from verify_dag.models.state import RunState
from verify_dag.report import results
from verify_dag.report.dedup import Issue, dedup, norm_title

ENTIRE_FILE = "entire file"
REPORT_ONLY_NOTE = "interactive and auto-fix modes are not built yet; this run was report-only"


def file_record(change: FileChange) -> FileRecord:
    if change.status == "deleted":
        lines: list[str] = []  # nothing remains on the new side to verify
    elif change.lines is None:
        # Kept in the same list as the ranges so a consumer that parses ranges fails loudly on
        # it instead of concluding that no line of an added file is in scope.
        lines = [ENTIRE_FILE]
    else:
        lines = [r.label() for r in change.lines]
    return FileRecord(
        path=change.path,
        status=change.status,
        lines=tuple(lines),
        old_path=change.old_path,
        binary=True if change.binary else None,
    )


def _sha(value: str | None) -> str | None:
    return value or None  # the models use "" for "not observed"; the report says null


def _scope(state: RunState, nothing: bool) -> ReportScope:
    req = state.request
    sc: Scope | None = state.scope
    mode = sc.mode if sc is not None else req.scope
    if mode == "auto":
        # Auto-detection found nothing to resolve to: there is no resolved mode to report.
        mode = None
    branch = mode == "branch" or (sc is None and req.base is not None)
    # An invalid base still reports the ref exactly as requested (docs/report.md: an errored
    # run still gets the complete document).
    base_ref = (sc.base_ref if sc is not None and sc.base_ref else req.base) if branch else None
    return ReportScope(
        depth=req.depth,
        mode=mode,
        base_ref=base_ref,
        merge_base=_sha(sc.merge_base) if sc is not None and mode == "branch" else None,
        head_sha=_sha(sc.head_sha) if sc is not None else None,
        included_files=tuple(file_record(f) for f in sc.included) if sc is not None else (),
        excluded_files=tuple(ExcludedRecord(path=e.path, reason=e.reason) for e in sc.excluded)
        if sc is not None
        else (),
        delta_base_sha=sc.delta_base_sha if sc is not None else None,
        delta_files=tuple(file_record(f) for f in sc.delta_files) if sc is not None else (),
        compare_ref=sc.compare_ref if sc is not None else None,
        path_filter=sc.path_filter if sc is not None else (),
        diff_command=(sc.diff_command or None) if sc is not None else None,
        notes=sc.notes if sc is not None else (),
        nothing_to_verify=nothing,
    )


def _issue_location(issue: Issue) -> IssueLocation | None:
    if issue.path is None:
        return None
    if issue.line is None:
        return IssueLocation(path=issue.path)
    return IssueLocation(path=issue.path, line=issue.line, end_line=issue.end_line)


def _issue(n: int, issue: Issue) -> ReportIssue:
    return ReportIssue(
        id=f"VI-{n}",
        severity=issue.severity,
        title=issue.title,
        sources=issue.sources,
        location=_issue_location(issue),
        description=issue.description,
        issue_class=issue.issue_class,
        baseline=issue.baseline,
        # The tester's IN-SCOPE / OUT-OF-SCOPE call for a failing test, where a skill made one.
        in_scope=issue.in_scope,
    )


def _finding(issue: Issue) -> AdversaryFinding:
    # The adversary contract's location is exactly {path, line}: without a line there is no
    # such location, so it is omitted rather than approximated.
    location = None
    if issue.path is not None and issue.line is not None:
        location = PointLocation(path=issue.path, line=issue.line)
    return AdversaryFinding(
        title=issue.title,
        severity=issue.severity,
        description=issue.description,
        sources=issue.sources,
        location=location,
    )


def _all_findings(state: RunState) -> list[Finding]:
    static = list(state.static.findings) if state.static is not None else []
    return static + [f for o in state.outcomes for f in o.findings]


def _known_findings(state: RunState) -> KnownFindings | None:
    """What the carry-forward rules produced, as the reviewers reported it.

    Reported, never applied: the orchestrator does not filter a finding because it matches the
    ledger; suppression is visible only as a reviewer's REAFFIRMED row (docs/report.md,
    knownFindings).
    """
    ledger = state.request.ledger_data
    if ledger is None:
        return None
    if state.request.no_carry_forward:
        # The reviewers were never given the carry-forward rules (first-run review): a stray
        # REAFFIRMED line is not a decision the rules produced.
        return KnownFindings(supplied=len(ledger.findings), reaffirmed=(), reopened=())
    table = {f.id for f in ledger.known()}
    return KnownFindings(
        supplied=len(ledger.findings),
        # known (additive): whether the id was in the KNOWN FINDINGS table the reviewers saw. A
        # reaffirmation of anything else cites no earlier decision and is shown as such.
        reaffirmed=tuple(
            ReaffirmedRow(
                id=r.id,
                skill=r.skill,
                reason=r.reason,
                new_harm_evidence=r.new_harm_evidence,
                known=r.id in table,
            )
            for o in state.outcomes
            for r in o.reaffirmed
        ),
        reopened=tuple(
            ReopenedRow(
                id=r.id, skill=r.skill, reason=r.reason, evidence=r.evidence, known=r.id in table
            )
            for o in state.outcomes
            for r in o.reopened
        ),
    )


def _triage(state: RunState, all_outcomes: list[SkillOutcome]) -> ReportTriage:
    """Who ran and who did not, with TRIAGE_RESULT itself (additive keys): who was given which
    files, and the gating calls; those are absent when the run stopped before triage."""
    run, skipped = results.triage(all_outcomes)
    tr = state.triage
    if tr is None:
        return ReportTriage(skills_run=run, skills_skipped=skipped)
    return ReportTriage(
        skills_run=run,
        skills_skipped=skipped,
        job_b=tr.job_b,
        skill_assignments={skill: tuple(files) for skill, files in tr.skill_assignments.items()},
        gating={
            skill: GatingRow(applies=g.applies, reason=g.reason, files=tuple(g.files))
            for skill, g in tr.gating.items()
        },
    )


def _gates(state: RunState) -> CustomGates:
    rows: dict[str, list[GateRow]] = {"exerciser": [], "review": []}
    for o in state.outcomes:
        for g in o.gates:
            rows[g.kind].append(
                GateRow(rule=g.rule, status=g.status, evidence=g.evidence, checker=g.checker)
            )
    return CustomGates(exerciser=tuple(rows["exerciser"]), review=tuple(rows["review"]))


def _verifications(state: RunState, issues: list[Issue]) -> tuple[ExerciserVerdict, ...]:
    """The exerciser's verdicts, keyed to VI ids now that the issues are numbered.

    The exerciser names an issue by path, line and the title of the finding it tried (ids do not
    exist before dedup), which may be any member of a merged issue; one verdict per issue, the
    first that matches it.
    """
    ids = {
        (i.path, i.line, norm_title(t)): f"VI-{n}"
        for n, i in enumerate(issues, 1)
        for t in (i.titles or (i.title,))
    }
    at: dict[tuple[str | None, int | None], list[str]] = {}
    for n, i in enumerate(issues, 1):
        at.setdefault((i.path, i.line), []).append(f"VI-{n}")
    seen: set[str] = set()
    out = []
    for o in state.outcomes:
        for v in o.verifications:
            vi = ids.get((v.path, v.line, norm_title(v.title)))
            if vi is None and len(at.get((v.path, v.line), [])) == 1:
                # A merged issue carries its lead's title; the location alone is unambiguous.
                vi = at[(v.path, v.line)][0]
            if vi is None or vi in seen:
                continue
            seen.add(vi)
            out.append(ExerciserVerdict(issue=vi, status=v.status, evidence=v.evidence))
    return tuple(sorted(out, key=lambda e: int(e.issue.removeprefix("VI-"))))


def build(state: RunState) -> Report:
    """The report of a run, complete in every state: ok, blocked and error alike."""
    all_outcomes = results.outcomes(state)
    status = results.run_status(state, all_outcomes)
    err = results.error_of(state)
    raw = _all_findings(state)
    issues = dedup(raw)
    scope = _scope(state, results.nothing_to_verify(state))
    result = ("issues-found" if issues else "pass") if status == "ok" else status
    requested = state.request.mode
    return Report(
        schema_version=1,
        status=status,
        error=ReportError(code=err[0], message=err[1]) if err is not None else None,
        findings=tuple(_finding(i) for i in issues),
        overall=Overall(result=result, mode=scope.mode),
        scope=scope,
        known_findings=_known_findings(state),
        # [] with no --epic-context: a deferral cites an epic the reviewers were given.
        deferred_to_epic=tuple(
            DeferredRow(issue=d.issue, item=d.item, source=d.source)
            for o in state.outcomes
            for d in o.deferred
        )
        if state.request.epic_text is not None
        else (),
        triage=_triage(state, all_outcomes),
        skill_results=results.skill_results(all_outcomes),
        issues=tuple(_issue(n, i) for n, i in enumerate(issues, start=1)),
        exerciser_verification=_verifications(state, issues),
        custom_gates=_gates(state),
        debugger=tuple(
            DebuggerRow(
                failure=d.failure,
                pre_existing=d.pre_existing,
                command=d.command,
                evidence=d.evidence,
                touched_by_diff=d.touched_by_diff,
            )
            for o in state.outcomes
            for d in o.diagnoses
        ),
        run=RunInfo(
            id=state.run_id,
            # The repository as the run named it (never a password): with id and scope.headSha,
            # what a client checks before it believes a report it did not see written.
            repo=display_source(state.request.repo),
            requested_mode=requested,
            mode="report-only",
            note=REPORT_ONLY_NOTE if requested != "report-only" else None,
        ),
        dedup=DedupCounts(skill_findings=len(raw), issues=len(issues)),
    )


def to_json(report: Report) -> str:
    """The report as written to --output and to the store: JSON v1 (the model's JSON form)."""
    return json_text(report.model_dump(mode="json"))


def json_text(document: dict[str, Any]) -> str:
    """A JSON v1 document as text: two-space indentation, non-ASCII kept, a trailing newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
