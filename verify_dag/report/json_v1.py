"""Phase 8c: the JSON v1 report dict, the one object every output format is generated from.

Keys beyond the seed's 8c shape are additive (consumers ignore unknown fields, so they do not bump
schemaVersion): issues[].class/baseline/inScope,
scope.compareRef/pathFilter/diffCommand/notes/nothingToVerify, top-level run (run.repo) and
dedup.
"""

from __future__ import annotations

import json
from typing import Any

from verify_dag.git import display_source
from verify_dag.models.findings import Finding
from verify_dag.models.scope import ExcludedFile, FileChange, Scope
from verify_dag.models.state import RunState
from verify_dag.report import results
from verify_dag.report.dedup import Issue, dedup, norm_title

Report = dict[str, Any]

ENTIRE_FILE = "entire file"
REPORT_ONLY_NOTE = "interactive and auto-fix modes are not built yet; this run was report-only"


def file_record(change: FileChange) -> dict[str, Any]:
    if change.status == "deleted":
        lines: list[str] = []  # nothing remains on the new side to verify
    elif change.lines is None:
        # Kept in the same list as the ranges so a consumer that parses ranges fails loudly on
        # it instead of concluding that no line of an added file is in scope.
        lines = [ENTIRE_FILE]
    else:
        lines = [r.label() for r in change.lines]
    record: dict[str, Any] = {"path": change.path, "status": change.status, "lines": lines}
    if change.old_path is not None:
        record["oldPath"] = change.old_path
    if change.binary:
        record["binary"] = True
    return record


def _excluded(entries: tuple[ExcludedFile, ...]) -> list[dict[str, str]]:
    return [{"path": e.path, "reason": e.reason} for e in entries]


def _sha(value: str | None) -> str | None:
    return value or None  # the models use "" for "not observed"; the report says null


def _scope(state: RunState, nothing: bool) -> dict[str, Any]:
    req = state.request
    sc: Scope | None = state.scope
    mode = sc.mode if sc is not None else req.scope
    if mode == "auto":
        # Auto-detection found nothing to resolve to: there is no resolved mode to report.
        mode = None
    branch = mode == "branch" or (sc is None and req.base is not None)
    # An invalid base still reports the ref exactly as requested (seed 8c, error case).
    base_ref = (sc.base_ref if sc is not None and sc.base_ref else req.base) if branch else None
    included = list(sc.included) if sc is not None else []
    excluded = list(sc.excluded) if sc is not None else []
    return {
        "depth": req.depth,
        "mode": mode,
        "baseRef": base_ref,
        "mergeBase": _sha(sc.merge_base) if sc is not None and mode == "branch" else None,
        "headSha": _sha(sc.head_sha) if sc is not None else None,
        "includedFiles": [file_record(f) for f in included],
        "excludedFiles": _excluded(tuple(excluded)),
        "files": [file_record(f) for f in included],
        "excluded": _excluded(tuple(excluded)),
        "deltaBaseSha": sc.delta_base_sha if sc is not None else None,
        "deltaFiles": [file_record(f) for f in sc.delta_files] if sc is not None else [],
        "compareRef": sc.compare_ref if sc is not None else None,
        "pathFilter": list(sc.path_filter) if sc is not None else [],
        "diffCommand": (sc.diff_command or None) if sc is not None else None,
        "notes": list(sc.notes) if sc is not None else [],
        "nothingToVerify": nothing,
    }


def _issue_location(issue: Issue) -> dict[str, Any] | None:
    if issue.path is None:
        return None
    loc: dict[str, Any] = {"path": issue.path}
    if issue.line is not None:
        loc["line"] = issue.line
        if issue.end_line is not None:
            loc["endLine"] = issue.end_line
    return loc


def _issue(n: int, issue: Issue) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f"VI-{n}",
        "severity": issue.severity,
        "title": issue.title,
        "sources": list(issue.sources),
        "location": _issue_location(issue),
        "description": issue.description,
        "class": issue.issue_class,
    }
    if issue.baseline is not None:
        out["baseline"] = issue.baseline
    if issue.in_scope is not None:
        # The tester's IN-SCOPE / OUT-OF-SCOPE call for a failing test; absent where no skill
        # made one, since "not known" is not "out of scope".
        out["inScope"] = issue.in_scope
    return out


def _finding(issue: Issue) -> dict[str, Any]:
    out: dict[str, Any] = {
        "title": issue.title,
        "severity": issue.severity,
        "description": issue.description,
        "sources": list(issue.sources),
    }
    # The adversary contract's location is exactly {path, line}: without a line there is no
    # such location, so it is omitted rather than approximated.
    if issue.path is not None and issue.line is not None:
        out["location"] = {"path": issue.path, "line": issue.line}
    return out


def _all_findings(state: RunState) -> list[Finding]:
    static = list(state.static.findings) if state.static is not None else []
    return static + [f for o in state.outcomes for f in o.findings]


def _known_findings(state: RunState) -> dict[str, Any] | None:
    """What the carry-forward rules produced, as the reviewers reported it (seed 8c).

    Reported, never applied: the orchestrator does not filter a finding because it matches the
    ledger; suppression is visible only as a reviewer's REAFFIRMED row.
    """
    ledger = state.request.ledger_data
    if ledger is None:
        return None
    if state.request.no_carry_forward:
        # The reviewers were never given the carry-forward rules (first-run review): a stray
        # REAFFIRMED line is not a decision the rules produced.
        return {"supplied": len(ledger.findings), "reaffirmed": [], "reopened": []}
    table = {f.id for f in ledger.known()}
    return {
        "supplied": len(ledger.findings),
        # known (additive): whether the id was in the KNOWN FINDINGS table the reviewers saw. A
        # reaffirmation of anything else cites no earlier decision and is shown as such.
        "reaffirmed": [
            {
                "id": r.id,
                "skill": r.skill,
                "reason": r.reason,
                "newHarmEvidence": r.new_harm_evidence,
                "known": r.id in table,
            }
            for o in state.outcomes
            for r in o.reaffirmed
        ],
        "reopened": [
            {
                "id": r.id,
                "skill": r.skill,
                "reason": r.reason,
                "evidence": r.evidence,
                "known": r.id in table,
            }
            for o in state.outcomes
            for r in o.reopened
        ],
    }


def _triage_result(state: RunState) -> dict[str, Any]:
    """TRIAGE_RESULT itself (additive keys): who was given which files, and the gating calls."""
    tr = state.triage
    if tr is None:
        return {}
    return {
        "jobB": tr.job_b,
        "skillAssignments": {skill: list(files) for skill, files in tr.skill_assignments.items()},
        "gating": {
            skill: {"applies": g.applies, "reason": g.reason, "files": list(g.files)}
            for skill, g in tr.gating.items()
        },
    }


def _gates(state: RunState) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {"exerciser": [], "review": []}
    for o in state.outcomes:
        for g in o.gates:
            out[g.kind].append(
                {"rule": g.rule, "status": g.status, "evidence": g.evidence, "checker": g.checker}
            )
    return out


def _verifications(state: RunState, issues: list[Issue]) -> list[dict[str, str]]:
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
            out.append({"issue": vi, "status": v.status, "evidence": v.evidence})
    return sorted(out, key=lambda e: int(e["issue"].removeprefix("VI-")))


def build(state: RunState) -> Report:
    """The JSON v1 report for a run, complete in every state: ok, blocked and error alike."""
    all_outcomes = results.outcomes(state)
    status = results.run_status(state, all_outcomes)
    err = results.error_of(state)
    raw = _all_findings(state)
    issues = dedup(raw)
    scope = _scope(state, results.nothing_to_verify(state))
    result = ("issues-found" if issues else "pass") if status == "ok" else status
    requested = state.request.mode
    return {
        "schemaVersion": 1,
        "status": status,
        "error": {"code": err[0], "message": err[1]} if err is not None else None,
        "findings": [_finding(i) for i in issues],
        "overall": {"result": result, "mode": scope["mode"]},
        "scope": scope,
        "knownFindings": _known_findings(state),
        # [] with no --epic-context (seed 8c): a deferral cites an epic the reviewers were given.
        "deferredToEpic": [
            {"issue": d.issue, "item": d.item, "source": d.source}
            for o in state.outcomes
            for d in o.deferred
        ]
        if state.request.epic_text is not None
        else [],
        "triage": {**results.triage(all_outcomes), **_triage_result(state)},
        "skillResults": results.skill_results(all_outcomes),
        "issues": [_issue(n, i) for n, i in enumerate(issues, start=1)],
        "exerciserVerification": _verifications(state, issues),
        "customGates": _gates(state),
        "debugger": [
            {
                "failure": d.failure,
                "preExisting": d.pre_existing,
                "command": d.command,
                "evidence": d.evidence,
                "touchedByDiff": list(d.touched_by_diff),
            }
            for o in state.outcomes
            for d in o.diagnoses
        ],
        "run": {
            "id": state.run_id,
            # The repository as the run named it (never a password): with id and scope.headSha,
            # what a client checks before it believes a report it did not see written.
            "repo": display_source(state.request.repo),
            "requestedMode": requested,
            "mode": "report-only",
            "note": REPORT_ONLY_NOTE if requested != "report-only" else None,
        },
        "dedup": {"skillFindings": len(raw), "issues": len(issues)},
    }


def to_json(report: Report) -> str:
    """The report as written to --output: two-space indentation, trailing newline."""
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"
