"""GitHub Actions workflow commands: one annotation per issue, on its file and line in the pull
request, rendered from the Report (the same deduplicated issues as every other format).

An issue the run's gates fail on is an ``::error``; the rest are ``::warning`` (severity 4+) or
``::notice``. Every check that did not run is a ``::warning`` of its own, and a last
``::notice`` states the verdict and the exit code. Values are escaped as the runner requires
(``%``, CR and LF in messages; ``:`` and ``,`` too in properties).
"""

from __future__ import annotations

from verify_dag.models.report import Report, ReportIssue
from verify_dag.report import verdict


def github(report: Report) -> str:
    lines = [_annotation(report, issue) for issue in report.issues]
    lines += [
        _command("warning", f"{skill} {status}", notes or status, {})
        for skill, status, notes in verdict.not_run(report)
    ]
    if report.error is not None:
        lines.append(_command("error", report.error.code, report.error.message, {}))
    code = report.run.exit_code
    said = f"{verdict.words(report)}" + (f", exit {code}" if code is not None else "")
    lines.append(_command("notice", "verify-dag", f"{said}: {len(report.issues)} issue(s)", {}))
    return "\n".join(lines) + "\n"


def _annotation(report: Report, issue: ReportIssue) -> str:
    kind = "error" if verdict.fails(report, issue) else verdict.level(issue)
    kind = "notice" if kind == "note" else kind
    where: dict[str, str] = {}
    loc = issue.location
    if loc is not None:
        where["file"] = loc.path
        if loc.line is not None:
            where["line"] = str(loc.line)
            where["endLine"] = str(loc.end_line or loc.line)
            if loc.column is not None:
                where["col"] = str(loc.column)
    baseline = f", {issue.baseline}" if issue.baseline else ""
    message = f"{issue.title} (severity {issue.severity}{baseline})"
    if issue.description:
        message += f"\n{issue.description}"
    return _command(kind, f"{issue.id} {', '.join(issue.sources)}", message, where)


def _command(kind: str, title: str, message: str, where: dict[str, str]) -> str:
    props = {**where, "title": title}
    joined = ",".join(f"{k}={_property(v)}" for k, v in props.items())
    return f"::{kind} {joined}::{_data(message)}"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
