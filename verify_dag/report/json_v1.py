"""The report of a run (``build``), the one object every output format is generated from.

The Report model's JSON form is JSON v1 (verify_dag/models/report.py). Keys beyond the fields
existing consumers rely on are additive (consumers ignore unknown fields, so they do not bump
schemaVersion): issues[].class/baseline/inScope,
scope.compareRef/pathFilter/diffCommand/notes/nothingToVerify, top-level run (run.repo) and
dedup (docs/report.md, "The JSON v1 document").
"""
# Long module: one builder per section of the v1 document (scope, triage, skill results, issues,
# findings, gates, verifications, run), each small, all reading the same run state.

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from verify_dag.models.findings import Finding, SkillOutcome
from verify_dag.models.report import (
    AdversaryFinding,
    CoverageFigure,
    CustomGates,
    DebuggerRow,
    DedupCounts,
    DeferredRow,
    ExcludedRecord,
    ExerciserVerdict,
    FileRecord,
    GateRow,
    Gates,
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
    ReviewTokens,
    RunInfo,
    SkillTokens,
)
from verify_dag.models.scope import FileChange, Scope
from verify_dag.models.state import RunState
from verify_dag.phases import gates
from verify_dag.report import results, verdict
from verify_dag.report.dedup import Issue, dedup, norm_title

ENTIRE_FILE = "entire file"


def _phase_seconds(state: RunState) -> dict[str, float] | None:
    timed = dict(state.timings)
    for o in (state.static, *state.outcomes):
        if o is not None and o.seconds is not None:
            timed.setdefault(o.skill, o.seconds)
    return timed or None


def unattended_note(why: str | None) -> str | None:
    """The report's note when interactive mode ran as report-only (Phase 9)."""
    return f"interactive ran as report-only: {why}" if why else None


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


def located(issue: Issue) -> Issue:
    """The issue with a whole location: a path without a line (a test item its plugin gives no
    line, a file a reviewer names as a whole) is put at line 1 of the file, and its description
    says so. A location is structured or null, never half of one (JSON v1)."""
    if issue.path is None or issue.line is not None:
        return issue
    said = f"(No line was given in {issue.path}: the location is line 1 of the file.)"
    return dataclasses.replace(
        issue, line=1, end_line=None, column=None, description=f"{issue.description}\n{said}"
    )


def _issue_location(issue: Issue) -> IssueLocation | None:
    if issue.path is None or issue.line is None:
        return None
    return IssueLocation(
        path=issue.path, line=issue.line, end_line=issue.end_line, column=issue.column
    )


def _issue(n: int, issue: Issue, fingerprint: str) -> ReportIssue:
    issue = located(issue)
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
        rule=issue.rule,
        tool=issue.tool,
        help_uri=issue.help_uri,
        fingerprint=fingerprint,
    )


def _finding(issue: Issue) -> AdversaryFinding:
    # The adversary contract's location is exactly {path, line}, omitted when none applies.
    issue = located(issue)
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


# A file of the verified commit, as lines (empty when it is not there): what fingerprints read.
Source = Callable[[str], list[str]]


def fingerprints(issues: list[Issue], source: Source | None) -> list[str]:
    """Each issue's fingerprint: the sha256 of its rule (its title when it has none), its path
    and the text of its line with the whitespace taken out, not the line's number, so the same
    problem on a line that moved keeps its fingerprint (what code-scanning tools match runs on);
    identical ones are told apart by their order."""
    seen: Counter[tuple[str, str, str]] = Counter()
    out = []
    for issue in issues:
        lines = source(issue.path) if source is not None and issue.path else []
        text = lines[issue.line - 1] if issue.line and issue.line <= len(lines) else ""
        key = (issue.rule or norm_title(issue.title), issue.path or "", "".join(text.split()))
        h = hashlib.sha256("\0".join((*key, str(seen[key]))).encode("utf-8", "surrogateescape"))
        seen[key] += 1
        out.append(h.hexdigest()[:32])
    return out


def _with_debugger(state: RunState, findings: list[Finding]) -> list[Finding]:
    """Failures the debugger checked at the base carry its answer as their baseline: yes is
    pre-existing, no is introduced (what --new-only and SARIF's baselineState read)."""
    answer = {d.failure: d.pre_existing for o in state.outcomes for d in o.diagnoses}
    out = []
    for f in findings:
        said = answer.get(f.nodeid or f.title) if f.baseline is None else None
        if said == "yes":
            f = f.model_copy(update={"baseline": "pre-existing"})
        elif said == "no":
            f = f.model_copy(update={"baseline": "introduced"})
        out.append(f)
    return out


def _coverage(state: RunState) -> CoverageFigure | None:
    measured = next((o.coverage for o in state.outcomes if o.coverage is not None), None)
    if measured is None:
        return None
    return CoverageFigure(
        changed_lines=measured.total,
        covered=measured.covered,
        percent=round(measured.percent, 2),
    )


def _review_tokens(state: RunState) -> ReviewTokens | None:
    """The model calls' tokens, per skill in the order the skills were collected."""
    rows = tuple(
        SkillTokens(
            skill=o.skill,
            backend=o.usage.backend,
            model=o.usage.model,
            input_tokens=o.usage.input_tokens,
            output_tokens=o.usage.output_tokens,
            requests=o.usage.requests,
            from_cache=o.usage.cached,
        )
        for o in state.outcomes
        if o.usage is not None
    )
    budget = state.request.max_review_tokens
    if not rows and budget is None and state.request.audit_budget is None:
        return None
    return ReviewTokens(
        max_tokens=budget,
        input_tokens=sum(r.input_tokens or 0 for r in rows),
        output_tokens=sum(r.output_tokens or 0 for r in rows),
        skills=rows,
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
    """One row per declared gate. A review gate without a CHECK command is NOT_CHECKED in the
    exerciser's rows until a reviewer judges it (its GATE line): the reviewer's PASS or FAIL
    replaces it, and of two reviewers' verdicts a FAIL wins."""
    merged = gates.settled(g for o in state.outcomes for g in o.gates)

    def rows(kind: str) -> tuple[GateRow, ...]:
        return tuple(
            GateRow(rule=g.rule, status=g.status, evidence=g.evidence, checker=g.checker)
            for g in merged
            if g.kind == kind
        )

    return CustomGates(exerciser=rows("exerciser"), review=rows("review"))


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


def build(state: RunState, source: Source | None = None) -> Report:
    """The report of a run, complete in every state: ok, blocked and error alike. ``source``
    reads the verified commit's files for the issues' fingerprints (without it they are made
    from the rule and path alone)."""
    all_outcomes = results.outcomes(state)
    status = results.run_status(state, all_outcomes)
    err = results.error_of(state)
    raw = _with_debugger(state, _all_findings(state))
    issues = dedup(raw)
    prints = fingerprints(issues, source)
    scope = _scope(state, results.nothing_to_verify(state))
    result = ("issues-found" if issues else "pass") if status == "ok" else status
    requested = state.request.mode
    report = Report(
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
        skill_details=results.skill_details(all_outcomes, state.timings),
        issues=tuple(
            _issue(n, i, p) for n, (i, p) in enumerate(zip(issues, prints, strict=True), start=1)
        ),
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
            repo=state.request.source.shown,
            requested_mode=requested,
            mode="report-only" if state.request.unattended else requested,
            note=unattended_note(state.request.unattended),
            phase_seconds=_phase_seconds(state),
        ),
        dedup=DedupCounts(skill_findings=len(raw), issues=len(issues)),
        coverage=_coverage(state),
        review_tokens=_review_tokens(state),
    )
    req = state.request
    gates = Gates(
        fail_on=req.fail_on,
        new_only=req.new_only,
        fail_under=req.fail_under,
        allow_incomplete=req.allow_incomplete,
    )
    judged = report.model_copy(update={"run": report.run.model_copy(update={"gates": gates})})
    return judged.model_copy(
        update={"run": judged.run.model_copy(update={"exit_code": verdict.exit_code(judged)})}
    )


def to_json(report: Report) -> str:
    """The report as written to --output and to the store: JSON v1 (the model's JSON form)."""
    return json_text(report.model_dump(mode="json"))


def json_text(document: dict[str, Any]) -> str:
    """A JSON v1 document as text: two-space indentation, non-ASCII kept, a trailing newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
