"""The report in a few lines, for a git hook's output (``verify --quiet``): the verdict, then
each issue the gates fail on as ``path:line: [severity] title (source)``, as linters print
theirs, and where the whole report is."""

from __future__ import annotations

from verify_dag.models.report import Report
from verify_dag.report import verdict


def summary_lines(report: Report, fail_on: int | None = None) -> str:
    code = verdict.exit_code(report, fail_on)
    gates = report.run.gates
    threshold = fail_on if fail_on is not None else gates.fail_on if gates else 7
    new_only = gates is not None and gates.new_only
    at_gate = [i for i in report.issues if i.severity >= threshold and verdict.counts(i, new_only)]
    below = len(report.issues) - len(at_gate)
    head = f"verify-dag: {verdict.words(report)} (exit {code})"
    if report.error is not None:
        head += f": {report.error.message}"
    elif report.issues:
        head += f": {len(at_gate)} issue(s) at severity {threshold}+"
        head += f", {below} below it" if below else ""
    lines = [head]
    for issue in at_gate:
        where = "-"
        if issue.location is not None:
            where = issue.location.path
            if issue.location.line is not None:
                where += f":{issue.location.line}"
        lines.append(f"{where}: [{issue.severity}] {issue.title} ({', '.join(issue.sources)})")
    missing = verdict.not_run(report)
    if missing:
        lines.append("did not run: " + ", ".join(f"{s} ({status})" for s, status, _ in missing))
    lines.append(f"full report: verify-dag report {report.run.id}")
    return "\n".join(lines) + "\n"
