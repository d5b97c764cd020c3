"""What the report task hands back to the client: the v1 report and what the run did with it."""

from __future__ import annotations

from verify_dag.models.base import Frozen
from verify_dag.models.report import Report


class ReportResult(Frozen):
    """What the report task hands back to the client: the report, its Markdown, and where the
    store kept the run or why it could not (the report is delivered either way).

    The verdict, the exit code and the store's directory come first: Flower shows a task's
    result as the start of its repr, so an operator reads there what the run came to."""

    verdict: str = ""  # report.verdict.words: pass, issues found, incomplete, blocked, error
    exit_code: int | None = None  # the exit code the run's gates give
    stored: str | None = None  # the run's directory in the report store
    report: Report
    markdown: str
    store_errors: tuple[str, ...] = ()  # each file of the run the store could not keep, and why
    # The pair of commits the run compared (scope.old_commit, scope.new_commit): a staged or
    # unstaged change's are snapshots no ref names, and Phase 9 fixes what was verified.
    compared_commit: str | None = None
    verified_commit: str | None = None
