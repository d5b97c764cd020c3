"""The Markdown report, rendered from the Report (the JSON v1 document) and never from the run
state.

Rendering from the report keeps the two formats from disagreeing: whatever a machine reads in
the JSON is exactly what a person reads here.
"""

from __future__ import annotations

from typing import Any

from verify_dag import sandbox, skills
from verify_dag.errors import EXIT_INCOMPLETE
from verify_dag.models.report import (
    ExcludedRecord,
    FileRecord,
    Report,
    ReportIssue,
    ReportScope,
    SkillReason,
)
from verify_dag.report import markdown_sections as sections
from verify_dag.report import verdict
from verify_dag.report.markdown_text import code, inline, location_text, path_text, table

_LOUD = ("BLOCKED", "NOT_RUN", "FAILED")
# The composition's judgement row, which the Triage Summary counts at deep ("all five").
_JUDGEMENT = skills.of_kind("judgement")
_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_LEGEND = "*Severity: 9-10 Critical | 7-8 High | 5-6 Moderate | 3-4 Low | 1-2 Trivial*"
_SOURCES_NOTE = (
    "*Sources column shows which agents flagged the issue. Multiple sources = higher confidence.*"
)


def _file_line(rec: FileRecord) -> str:
    status = rec.status
    if status == "deleted":
        return f"- {path_text(rec.path)} (deleted)"
    parts = [f"{status} from {path_text(rec.old_path)}" if rec.old_path is not None else status]
    lines = list(rec.lines)
    if lines == ["entire file"]:
        parts.append("entire file")
    elif len(lines) == 1 and "-" not in lines[0]:
        parts.append(f"line {lines[0]}")
    elif lines:
        parts.append("lines " + ", ".join(lines))
    else:
        parts.append("no added lines")
    if rec.binary:
        parts.append("binary")
    return f"- {path_text(rec.path)} ({', '.join(parts)})"


def _excluded(records: tuple[ExcludedRecord, ...]) -> list[str]:
    if not records:
        return ["**Files Excluded:** none"]
    if [r.path for r in records] == ["ALL_OTHER_FILES"]:
        return [f"**Files Excluded:** All other files ({inline(records[0].reason)})"]
    out = ["**Files Excluded:**", ""]
    for r in records:
        path = "All other files" if r.path == "ALL_OTHER_FILES" else path_text(r.path)
        out.append(f"- {inline(path)} ({inline(r.reason)})")
    return out


def _verdict(report: Report) -> list[str]:
    """The first lines: the verdict, the exit code, and what did not run."""
    code_ = report.run.exit_code
    gates = report.run.gates
    failing = [i for i in report.issues if verdict.fails(report, i)]
    why = ""
    if failing:
        threshold = gates.fail_on if gates else verdict.DEFAULT_FAIL_ON
        new = " introduced by the change" if gates is not None and gates.new_only else ""
        why = f": {len(failing)} issue(s){new} at or above severity {threshold}"
    elif report.issues and report.status == "ok":
        why = f": {len(report.issues)} issue(s), none at the gates"
    if code_ == EXIT_INCOMPLETE:
        why += "; checks did not run (--allow-incomplete accepts that)"
    cov = report.coverage
    if gates is not None and gates.fail_under is not None:
        seen = f"{cov.percent:g}%" if cov is not None else "not measured"
        why += f"; changed-line coverage {seen} (--fail-under {gates.fail_under:g})"
    exit_text = f" (exit {code_})" if code_ is not None else ""
    out = [f"**Verdict: {verdict.words(report)}**{exit_text}{why}", ""]
    missing = verdict.not_run(report)
    if missing:
        listed = "; ".join(
            f"{skill} {status}" + (f" ({inline(notes)[:160]})" if notes else "")
            for skill, status, notes in missing
        )
        out += [f"**Did not run:** {listed}", ""]
    return out


def _banner(report: Report) -> list[str]:
    out: list[str] = []
    if report.run.note:
        out += [f"> Mode: {inline(report.run.note)}", ""]
    if report.error is not None:  # status error: the schema holds the two together
        err = report.error
        out += [f"**Verification error** ({inline(err.code)}): {inline(err.message)}", ""]
    elif report.status == "blocked":
        out += [
            "**Verification blocked:** no static analysis or test run reported and no judgement "
            "reviewer completed, so this report contains no meaningful analysis.",
            "",
        ]
    elif report.scope.nothing_to_verify:
        out += ["**Nothing to verify:** no changes were found in the selected scope.", ""]
    return out


def _scope(scope: ReportScope) -> list[str]:
    out = [
        "## Scope",
        "",
        f"**Depth:** {scope.depth}",
        "",
        f"**Mode:** {scope.mode or 'unresolved'}",
        "",
        f"**Base ref:** {code(scope.base_ref)}",
        "",
        f"**Merge base:** {code(scope.merge_base)}",
        "",
        f"**HEAD:** {code(scope.head_sha)}",
        "",
        "**Files Verified:**",
        "",
    ]
    out += [_file_line(r) for r in scope.included_files] or ["- none"]
    out += ["", *_excluded(scope.excluded_files)]
    if scope.notes:
        out += ["", "**Notes:**", "", *(f"- {inline(n)}" for n in scope.notes)]
    return [*out, "", "---", ""]


def _status_of(report: Report, skill: str) -> str | None:
    return next((r.status for r in report.skill_results if r.skill == skill), None)


def _judgement_line(report: Report) -> str:
    ran = [e.skill for e in report.triage.skills_run]

    def named(skill: str, label: str = "") -> str:
        # A reviewer that was invoked but did not complete must not read like a review.
        status = _status_of(report, skill)
        return f"{label or skill}" + ("" if status == "COMPLETED" else f" — {status}")

    if report.scope.depth == "light":
        with_codex, without = skills.light_slot()
        if with_codex in ran:
            return named(with_codex)
        if without in ran:
            codex = next((r for r in report.skill_results if r.skill == with_codex), None)
            whole = codex is not None and "SKIPPED_UNSUPPORTED_SCOPE" in codex.notes
            why = "Codex does not audit --scope=all" if whole else "Codex unavailable"
            return named(without, f"{without} ({why})")
        return "none ran"
    count = _NUMBERS[len(_JUDGEMENT)]
    done = [s for s in _JUDGEMENT if s in ran]
    if len(done) == len(_JUDGEMENT) and all(_status_of(report, s) == "COMPLETED" for s in done):
        return f"all {count}"
    listed = ", ".join(named(s) for s in done) or "none"
    return f"{len(done)} of {count}: {listed}"


def _static_line(report: Report) -> str:
    res = next((r for r in report.skill_results if r.skill == "static-analysis"), None)
    if res is None:
        return "no result"
    if res.status in ("COMPLETED", "PASSED") and res.notes:
        return inline(res.notes)
    return f"{res.status} — {inline(res.notes)}" if res.notes else res.status


def _grouped(entries: tuple[SkillReason, ...]) -> list[tuple[list[str], str]]:
    """Adjacent skips with one reason share it: "qa, ux-reviewer (not in light composition)"."""
    groups: list[tuple[list[str], str]] = []
    for e in entries:
        if groups and groups[-1][1] == e.reason:
            groups[-1][0].append(e.skill)
        else:
            groups.append(([e.skill], e.reason))
    return groups


def _triage(report: Report) -> list[str]:
    t = report.triage
    run = ", ".join(e.skill for e in t.skills_run) or "none"
    skipped = (
        "; ".join(
            f"{', '.join(names)} ({inline(reason)})" for names, reason in _grouped(t.skills_skipped)
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
    for r in report.skill_results:
        status = f"**{r.status}**" if r.status in _LOUD else r.status
        rows.append([r.skill, status, r.notes])
    out = ["## Skill Results Summary", "", *table(["Skill", "Status", "Notes"], rows)]
    codex = next(
        (r for r in report.skill_results if r.skill == "codex-reviewer" and r.status == "BLOCKED"),
        None,
    )
    if codex is not None:
        out += [
            "",
            "> **Warning: codex-reviewer was BLOCKED.** The independent second-model review did "
            f"not run: {inline(codex.notes) or 'no reason recorded'}",
        ]
    out += _isolation(report)
    out += _tokens(report)
    not_run = [r.skill for r in report.skill_results if r.status == "NOT_RUN"]
    if not_run:
        out += [
            "",
            f"> **Not run:** {', '.join(not_run)}. These checks did not run; the absence of "
            "findings from them is not a pass.",
        ]
    return [*out, "", "---", ""]


def _tokens(report: Report) -> list[str]:
    """One line: what the model calls cost, and the budget they were held to."""
    t = report.review_tokens
    if t is None:
        return []
    unknown = [s.skill for s in t.skills if s.input_tokens is None or s.output_tokens is None]
    said = f"{t.input_tokens:,} in, {t.output_tokens:,} out"
    if t.max_tokens is not None:
        said += f" (budget {t.max_tokens:,})"
    if unknown:
        said += f"; not reported by the backend of {', '.join(unknown)}"
    return ["", f"> **Review tokens:** {said}."]


def _isolation(report: Report) -> list[str]:
    """Which sandbox the repository's code ran in, per skill (docs/security.md)."""
    by_mode: dict[str, list[str]] = {}
    for r in report.skill_details:
        if r.isolation:
            by_mode.setdefault(r.isolation, []).append(r.skill)
    return [
        line
        for mode, names in by_mode.items()
        for line in (
            "",
            f"> **Sandbox:** {', '.join(names)} ran the repository's code in "
            f"{sandbox.describe(mode.split('+'))}.",
        )
    ]


def _issues(report: Report) -> list[str]:
    issues = report.issues
    out = ["## Issues Found", ""]
    if issues:
        rows: list[list[object]] = [
            [
                i.id,
                i.severity,
                _title(i),
                ", ".join(i.sources),
                location_text(i.location),
                i.description,
            ]
            for i in issues
        ]
        out += table(["ID", "Sev", "Title", "Sources", "Location", "Description"], rows)
        out += ["", _LEGEND, _SOURCES_NOTE]
    else:
        out += ["No issues found."]
    skill_findings = report.dedup.skill_findings
    noun = "issue" if len(issues) == 1 else "issues"
    out += [
        "",
        f"**Total: {len(issues)} {noun} from {skill_findings} skill findings (deduplicated)**",
    ]
    return [*out, "", "---", ""]


def _title(issue: ReportIssue) -> str:
    notes = []
    if issue.baseline == "pre-existing":
        notes.append("(pre-existing: also at the merge base)")
    # The tester's call in its own words (IN-SCOPE or OUT-OF-SCOPE; docs/report.md).
    if issue.in_scope is True:
        notes.append("(IN-SCOPE)")
    elif issue.in_scope is False:
        notes.append("(OUT-OF-SCOPE: no scoped file in the test or its traceback)")
    return " ".join([issue.title, *notes])


def markdown(report: Report | dict[str, Any]) -> str:
    """The Markdown report of a Report (docs/report.md).

    A JSON v1 document read back from a file (a report this version wrote, such as a
    ``--output``) is validated into the model first, so it renders exactly as it did when it was
    written; one of any other shape is a pydantic ValidationError.
    """
    if not isinstance(report, Report):
        report = Report.model_validate(report)
    unsandboxed = any("none" in (r.isolation or "").split("+") for r in report.skill_details)
    # A report whose verdict rests on code that ran unconfined says so before anything else.
    title = "# Verification Report" + (
        " (repository code ran WITHOUT a sandbox)" if unsandboxed else ""
    )
    lines = [title, ""]
    lines += _verdict(report)
    lines += _banner(report)
    lines += _scope(report.scope)
    lines += _triage(report)
    lines += _skill_results(report)
    lines += _issues(report)
    lines += sections.debugger(report)
    lines += sections.carried(report)
    lines += sections.deferred(report)
    lines += sections.exerciser(report)
    lines += sections.gates(report)
    lines += sections.fixes(report)
    return "\n".join(lines).rstrip("\n") + "\n"
