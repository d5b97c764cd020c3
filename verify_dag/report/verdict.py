"""The process exit code a report stands for."""

from __future__ import annotations

from verify_dag.errors import EXIT_ERROR, EXIT_ISSUES, EXIT_OK
from verify_dag.models.report import Report


def exit_code(report: Report, fail_on: int) -> int:
    """3 for error or blocked, 1 when an issue reaches ``fail_on``, otherwise 0.

    blocked exits 3 like error: a run that analysed nothing must never let a caller proceed as
    though the change had passed.
    """
    if report.status in ("error", "blocked"):
        return EXIT_ERROR
    if any(issue.severity >= fail_on for issue in report.issues):
        return EXIT_ISSUES
    return EXIT_OK
