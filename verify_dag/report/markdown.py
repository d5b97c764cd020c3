"""Phase 8b: the Markdown report, rendered from the JSON v1 dict and never from the run state.

Rendering from the dict keeps the two formats from disagreeing: whatever a machine reads in the
JSON is exactly what a person reads here.
"""

from __future__ import annotations

import re
from typing import Any

from verify_dag import sandbox

Report = dict[str, Any]

_LOUD = ("BLOCKED", "NOT_RUN", "FAILED")
_FIVE = ("reviewer", "codex-reviewer", "comment-review", "qa", "ux-reviewer")
_LEGEND = "*Severity: 9-10 Critical | 7-8 High | 5-6 Moderate | 3-4 Low | 1-2 Trivial*"
# git's C-style quoting of file names (quote.c), so a quoted name reads as git prints it.
_C_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}
_SOURCES_NOTE = (
    "*Sources column shows which agents flagged the issue. Multiple sources = higher confidence.*"
)


def cell(text: object) -> str:
    """One table cell: a `|` or a newline inside it would break the row."""
    s = str(text).replace("|", "\\|")
    return s.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def path_text(path: str) -> str:
    """A file name as one unambiguous piece of Markdown.

    Names git would quote (a control character such as a newline, a backslash, a double quote)
    are shown as git quotes them, "a\\nb.py", in a code span so Markdown keeps the backslashes.
    Turning the newline into a space or a line break instead would show a different file name.
    """
    if all(c.isprintable() and c not in _C_ESCAPES for c in path):
        return path
    quoted = '"' + "".join(_quote_char(c) for c in path) + '"'
    fence = "`" * (max(map(len, re.findall("`+", quoted)), default=0) + 1)
    return f"{fence}{quoted}{fence}"


def _quote_char(c: str) -> str:
    if c in _C_ESCAPES:
        return _C_ESCAPES[c]
    return c if c.isprintable() else "".join(f"\\{b:03o}" for b in c.encode())


def _inline(text: object) -> str:
    """Text inside a list item or a paragraph: a newline would end it early."""
    return " ".join(str(text).splitlines())


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def _code(value: object) -> str:
    return "`null`" if value is None else f"`{value}`"


def _file_line(rec: dict[str, Any]) -> str:
    status = rec["status"]
    if status == "deleted":
        return f"- {path_text(rec['path'])} (deleted)"
    parts = [f"{status} from {path_text(rec['oldPath'])}" if "oldPath" in rec else status]
    lines: list[str] = rec["lines"]
    if lines == ["entire file"]:
        parts.append("entire file")
    elif len(lines) == 1 and "-" not in lines[0]:
        parts.append(f"line {lines[0]}")
    elif lines:
        parts.append("lines " + ", ".join(lines))
    else:
        parts.append("no added lines")
    if rec.get("binary"):
        parts.append("binary")
    return f"- {path_text(rec['path'])} ({', '.join(parts)})"


def _excluded(records: list[dict[str, str]]) -> list[str]:
    if not records:
        return ["**Files Excluded:** none"]
    if [r["path"] for r in records] == ["ALL_OTHER_FILES"]:
        return [f"**Files Excluded:** All other files ({_inline(records[0]['reason'])})"]
    out = ["**Files Excluded:**", ""]
    for r in records:
        path = "All other files" if r["path"] == "ALL_OTHER_FILES" else path_text(r["path"])
        out.append(f"- {_inline(path)} ({_inline(r['reason'])})")
    return out


def _banner(report: Report) -> list[str]:
    out: list[str] = []
    if report["run"]["note"]:
        out += [f"> Mode: report-only — {_inline(report['run']['note'])}", ""]
    if report["status"] == "error":
        err = report["error"]
        out += [f"**Verification error** ({_inline(err['code'])}): {_inline(err['message'])}", ""]
    elif report["status"] == "blocked":
        out += [
            "**Verification blocked:** no static analysis or test run reported and no judgement "
            "reviewer completed, so this report contains no meaningful analysis.",
            "",
        ]
    elif report["scope"].get("nothingToVerify"):
        out += ["**Nothing to verify:** no changes were found in the selected scope.", ""]
    return out


def _scope(scope: dict[str, Any]) -> list[str]:
    out = [
        "## Scope",
        "",
        f"**Depth:** {scope['depth']}",
        "",
        f"**Mode:** {scope['mode'] or 'unresolved'}",
        "",
        f"**Base ref:** {_code(scope['baseRef'])}",
        "",
        f"**Merge base:** {_code(scope['mergeBase'])}",
        "",
        f"**HEAD:** {_code(scope['headSha'])}",
        "",
        "**Files Verified:**",
        "",
    ]
    out += [_file_line(r) for r in scope["includedFiles"]] or ["- none"]
    out += ["", *_excluded(scope["excludedFiles"])]
    if scope.get("notes"):
        out += ["", "**Notes:**", "", *(f"- {_inline(n)}" for n in scope["notes"])]
    return [*out, "", "---", ""]


def _status_of(report: Report, skill: str) -> str | None:
    return next((r["status"] for r in report["skillResults"] if r["skill"] == skill), None)


def _judgement_line(report: Report) -> str:
    ran: list[str] = report["triage"]["skills_run"]

    def named(skill: str, label: str = "") -> str:
        # A reviewer that was invoked but did not complete must not read like a review.
        status = _status_of(report, skill)
        return f"{label or skill}" + ("" if status == "COMPLETED" else f" — {status}")

    if report["scope"]["depth"] == "light":
        if "codex-reviewer" in ran:
            return named("codex-reviewer")
        if "reviewer" in ran:
            return named("reviewer", "reviewer (Codex unavailable)")
        return "none ran"
    five = [s for s in _FIVE if s in ran]
    if len(five) == len(_FIVE) and all(_status_of(report, s) == "COMPLETED" for s in five):
        return "all five"
    listed = ", ".join(named(s) for s in five) or "none"
    return f"{len(five)} of five: {listed}"


def _static_line(report: Report) -> str:
    res = next((r for r in report["skillResults"] if r["skill"] == "static-analysis"), None)
    if res is None:
        return "no result"
    if res["status"] in ("COMPLETED", "PASSED") and res["notes"]:
        return _inline(res["notes"])
    return f"{res['status']} — {_inline(res['notes'])}" if res["notes"] else str(res["status"])


def _grouped(entries: list[dict[str, str]]) -> list[tuple[list[str], str]]:
    """Adjacent skips with one reason share it: "qa, ux-reviewer (not in light composition)"."""
    groups: list[tuple[list[str], str]] = []
    for e in entries:
        if groups and groups[-1][1] == e["reason"]:
            groups[-1][0].append(e["skill"])
        else:
            groups.append(([e["skill"]], e["reason"]))
    return groups


def _triage(report: Report) -> list[str]:
    t = report["triage"]
    run = ", ".join(t["skills_run"]) or "none"
    skipped = (
        "; ".join(
            f"{', '.join(names)} ({_inline(reason)})"
            for names, reason in _grouped(t["skillsSkipped"])
        )
        or "none"
    )
    return [
        "## Triage Summary",
        "",
        f"**Skills run:** {run}",
        "",
        f"**Skills skipped:** {skipped}",
        "",
        f"**Judgement reviewer:** {_judgement_line(report)}",
        "",
        f"**Static analysis:** {_static_line(report)}",
        "",
        "---",
        "",
    ]


def _skill_results(report: Report) -> list[str]:
    rows: list[list[object]] = []
    for r in report["skillResults"]:
        status = f"**{r['status']}**" if r["status"] in _LOUD else r["status"]
        rows.append([r["skill"], status, r["notes"]])
    out = ["## Skill Results Summary", "", *_table(["Skill", "Status", "Notes"], rows)]
    codex = next(
        (
            r
            for r in report["skillResults"]
            if r["skill"] == "codex-reviewer" and r["status"] == "BLOCKED"
        ),
        None,
    )
    if codex is not None:
        out += [
            "",
            "> **Warning: codex-reviewer was BLOCKED.** The independent second-model review did "
            f"not run: {_inline(codex['notes']) or 'no reason recorded'}",
        ]
    out += _isolation(report)
    not_run = [r["skill"] for r in report["skillResults"] if r["status"] == "NOT_RUN"]
    if not_run:
        out += [
            "",
            f"> **Not run:** {', '.join(not_run)}. These checks did not run; the absence of "
            "findings from them is not a pass.",
        ]
    return [*out, "", "---", ""]


def _isolation(report: Report) -> list[str]:
    """Which sandbox the repository's code ran in, per skill (docs/security.md)."""
    by_mode: dict[str, list[str]] = {}
    for r in report["skillResults"]:
        if r.get("isolation"):
            by_mode.setdefault(r["isolation"], []).append(r["skill"])
    return [
        line
        for mode, skills in by_mode.items()
        for line in (
            "",
            f"> **Sandbox:** {', '.join(skills)} ran the repository's code in "
            f"{sandbox.describe(mode.split('+'))}.",
        )
    ]


def location_text(loc: dict[str, Any] | None) -> str:
    if loc is None:
        return "—"
    path = path_text(loc["path"])
    if "line" not in loc:
        return path
    end = f"-{loc['endLine']}" if "endLine" in loc else ""
    return f"{path}:{loc['line']}{end}"


def _issues(report: Report) -> list[str]:
    issues = report["issues"]
    out = ["## Issues Found", ""]
    if issues:
        rows: list[list[object]] = [
            [
                i["id"],
                i["severity"],
                _title(i),
                ", ".join(i["sources"]),
                location_text(i["location"]),
                i["description"],
            ]
            for i in issues
        ]
        out += _table(["ID", "Sev", "Title", "Sources", "Location", "Description"], rows)
        out += ["", _LEGEND, _SOURCES_NOTE]
    else:
        out += ["No issues found."]
    skill_findings = report.get("dedup", {}).get("skillFindings", len(issues))
    noun = "issue" if len(issues) == 1 else "issues"
    out += [
        "",
        f"**Total: {len(issues)} {noun} from {skill_findings} skill findings (deduplicated)**",
    ]
    return [*out, "", "---", ""]


def _title(issue: dict[str, Any]) -> str:
    notes = []
    if issue.get("baseline") == "pre-existing":
        notes.append("(pre-existing: also at the merge base)")
    # The tester's call in the seed's own words (its tester prompt: IN-SCOPE or OUT-OF-SCOPE).
    if issue.get("inScope") is True:
        notes.append("(IN-SCOPE)")
    elif issue.get("inScope") is False:
        notes.append("(OUT-OF-SCOPE: no scoped file in the test or its traceback)")
    return " ".join([str(issue["title"]), *notes])


def _debugger(report: Report) -> list[str]:
    diagnoses = report.get("debugger") or []
    if not diagnoses:
        return []
    rows: list[list[object]] = [
        [
            d["failure"],
            d["preExisting"],
            ", ".join(path_text(p) for p in d["touchedByDiff"]) or "none",
            _code(d["command"]),
            d["evidence"][:300],
        ]
        for d in diagnoses
    ]
    header = ["Failure", "Pre-existing", "Touched by diff", "Command", "Evidence"]
    return ["## Debugger", "", *_table(header, rows), "", "---", ""]


def _deferred(report: Report) -> list[str]:
    deferred = report["deferredToEpic"]
    if not deferred:
        return []  # seed 8b: omitted entirely when nothing was deferred
    rows: list[list[object]] = [[d["issue"], d["item"], d["source"]] for d in deferred]
    return [
        "## Deferred to Later Epic Issues",
        "",
        *_table(["Issue", "Deferred item", "Reported by"], rows),
        "",
        "These are not findings and never block.",
        "",
        "---",
        "",
    ]


def _carried(report: Report) -> list[str]:
    """Additive to 8b: every carry-forward decision the reviewers made, so a suppression is as
    visible to a reader of the Markdown as it is in the JSON's knownFindings."""
    known = report["knownFindings"]
    if known is None or not (known["reaffirmed"] or known["reopened"]):
        return []

    def mark(row: dict[str, Any]) -> str:
        return row["id"] if row.get("known", True) else f"{row['id']} (**not in KNOWN FINDINGS**)"

    rows: list[list[object]] = [
        *[[mark(r), "REAFFIRMED", r["skill"], r["reason"]] for r in known["reaffirmed"]],
        *[
            [mark(r), "REOPENED", r["skill"], f"{r['reason']} {r['evidence']}".strip()]
            for r in known["reopened"]
        ],
    ]
    return [
        "## Known Findings",
        "",
        f"{known['supplied']} finding(s) supplied by the ledger; the reviewers' decisions:",
        "",
        *_table(["Known ID", "Decision", "Reviewer", "Reason / evidence"], rows),
        "",
        "A REAFFIRMED finding was not reported again: the reviewer judged its code unchanged "
        "since the delta base.",
        "",
        "---",
        "",
    ]


def _exerciser(report: Report) -> list[str]:
    out = ["## Exerciser Verification", ""]
    entries = report["exerciserVerification"]
    if not entries:
        return [*out, "No issues were evaluated by the exerciser.", ""]
    titles = {i["id"]: i["title"] for i in report["issues"]}
    rows: list[list[object]] = [
        [e["issue"], titles.get(e["issue"], ""), e["status"].replace("_", " "), e["evidence"]]
        for e in entries
    ]
    return [*out, *_table(["Issue ID", "Title", "Exerciser Status", "Notes"], rows), ""]


def _gates(report: Report) -> list[str]:
    gates = report["customGates"]
    if not gates["exerciser"] and not gates["review"]:
        return []  # seed 8b: omitted entirely when no custom gates are defined
    out = ["---", "", "## Custom Verification Gates", ""]
    if gates["exerciser"]:
        rows: list[list[object]] = [
            [n, g["rule"], g["status"], g["evidence"]]
            for n, g in enumerate(gates["exerciser"], start=1)
        ]
        out += ["### Exerciser Gates", *_table(["#", "Rule", "Status", "Evidence"], rows), ""]
    if gates["review"]:
        rows = [
            [n, g["rule"], g["status"].replace("_", " "), g["checker"], g["evidence"]]
            for n, g in enumerate(gates["review"], start=1)
        ]
        header = ["#", "Rule", "Status", "Checked By", "Evidence"]
        out += ["### Review Gates", *_table(header, rows), ""]
    every = gates["exerciser"] + gates["review"]
    passed = sum(g["status"] == "PASS" for g in every)
    blocked = sum(g["status"] == "BLOCKED" for g in every)
    return [*out, f"**Custom Gates: {passed}/{len(every)} passed, {blocked} blocked**", ""]


def markdown(report: Report) -> str:
    """The 8b Markdown report for a JSON v1 report dict (as made by ``build``)."""
    lines = ["# Verification Report", ""]
    lines += _banner(report)
    lines += _scope(report["scope"])
    lines += _triage(report)
    lines += _skill_results(report)
    lines += _issues(report)
    lines += _debugger(report)
    lines += _carried(report)
    lines += _deferred(report)
    lines += _exerciser(report)
    lines += _gates(report)
    return "\n".join(lines).rstrip("\n") + "\n"
