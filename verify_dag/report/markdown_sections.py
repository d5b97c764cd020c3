"""The Markdown report's later sections: the debugger, the carry-forward decisions, the deferred
items, the exerciser's verification, the custom gates and the fixes (docs/report.md, "The Markdown
report"). Rendered from the Report, as the rest of it (:mod:`verify_dag.report.markdown`)."""

from __future__ import annotations

from verify_dag.models.report import ReaffirmedRow, ReopenedRow, Report
from verify_dag.report.markdown_text import code, path_text, table


def debugger(report: Report) -> list[str]:
    diagnoses = report.debugger
    if not diagnoses:
        return []
    rows: list[list[object]] = [
        [
            d.failure,
            d.pre_existing,
            ", ".join(path_text(p) for p in d.touched_by_diff) or "none",
            code(d.command),
            d.evidence[:300],
        ]
        for d in diagnoses
    ]
    header = ["Failure", "Pre-existing", "Touched by diff", "Command", "Evidence"]
    return ["## Debugger", "", *table(header, rows), "", "---", ""]


def deferred(report: Report) -> list[str]:
    deferred = report.deferred_to_epic
    if not deferred:
        return []  # omitted entirely when nothing was deferred
    rows: list[list[object]] = [[d.issue, d.item, d.source] for d in deferred]
    return [
        "## Deferred to Later Epic Issues",
        "",
        *table(["Issue", "Deferred item", "Reported by"], rows),
        "",
        "These are not findings and never block.",
        "",
        "---",
        "",
    ]


def carried(report: Report) -> list[str]:
    """Beyond the specified sections: every carry-forward decision the reviewers made, so a
    suppression is as visible to a reader of the Markdown as it is in the JSON's knownFindings."""
    known = report.known_findings
    if known is None or not (known.reaffirmed or known.reopened):
        return []

    def mark(row: ReaffirmedRow | ReopenedRow) -> str:
        return row.id if row.known else f"{row.id} (**not in KNOWN FINDINGS**)"

    rows: list[list[object]] = [
        [mark(r), "REAFFIRMED", r.skill, r.reason] for r in known.reaffirmed
    ]
    rows += [
        [mark(r), "REOPENED", r.skill, f"{r.reason} {r.evidence}".strip()] for r in known.reopened
    ]
    return [
        "## Known Findings",
        "",
        f"{known.supplied} finding(s) supplied by the ledger; the reviewers' decisions:",
        "",
        *table(["Known ID", "Decision", "Reviewer", "Reason / evidence"], rows),
        "",
        "A REAFFIRMED finding was not reported again: the reviewer judged its code unchanged "
        "since the delta base.",
        "",
        "---",
        "",
    ]


def exerciser(report: Report) -> list[str]:
    out = ["## Exerciser Verification", ""]
    entries = report.exerciser_verification
    if not entries:
        return [*out, "No issues were evaluated by the exerciser.", ""]
    titles = {i.id: i.title for i in report.issues}
    rows: list[list[object]] = [
        [e.issue, titles.get(e.issue, ""), e.status.replace("_", " "), e.evidence] for e in entries
    ]
    return [*out, *table(["Issue ID", "Title", "Exerciser Status", "Notes"], rows), ""]


def gates(report: Report) -> list[str]:
    gates = report.custom_gates
    if not gates.exerciser and not gates.review:
        return []  # omitted entirely when no custom gates are defined
    out = ["---", "", "## Custom Verification Gates", ""]
    if gates.exerciser:
        rows: list[list[object]] = [
            [n, g.rule, g.status, g.evidence] for n, g in enumerate(gates.exerciser, start=1)
        ]
        out += ["### Exerciser Gates", *table(["#", "Rule", "Status", "Evidence"], rows), ""]
    if gates.review:
        rows = [
            [n, g.rule, g.status.replace("_", " "), g.checker, g.evidence]
            for n, g in enumerate(gates.review, start=1)
        ]
        header = ["#", "Rule", "Status", "Checked By", "Evidence"]
        out += ["### Review Gates", *table(header, rows), ""]
    every = gates.exerciser + gates.review
    passed = sum(g.status == "PASS" for g in every)
    blocked = sum(g.status == "BLOCKED" for g in every)
    return [*out, f"**Custom Gates: {passed}/{len(every)} passed, {blocked} blocked**", ""]


def fixes(report: Report) -> list[str]:
    """What Phase 9 did with each issue (interactive, auto-fix); omitted when it did nothing."""
    if not report.fixes:
        return []
    rows: list[list[object]] = [
        [
            f.issue,
            f.decision,
            f"{f.option} ({f.origin})" if f.option else "",
            ", ".join(path_text(p) for p in f.files),
            "yes" if f.applied else "no",
            f.verified,
            f.evidence[:300],
        ]
        for f in report.fixes
    ]
    header = ["Issue", "Decision", "Fix", "Files", "Applied", "Verified", "Evidence"]
    applied = sum(f.applied for f in report.fixes)
    fixed = sum(f.verified == "fixed" for f in report.fixes)
    summary = f"**Fixes: {applied} applied, {fixed} verified fixed, nothing committed**"
    return ["---", "", "## Fixes", "", *table(header, rows), "", summary, ""]
