"""The process exit code a report stands for."""

from __future__ import annotations

from verify_dag import exitcodes, skills
from verify_dag.errors import EXIT_ERROR, EXIT_INCOMPLETE, EXIT_ISSUES, EXIT_OK
from verify_dag.models.report import Report, ReportIssue

DEFAULT_FAIL_ON = 7


def exit_code(report: Report, fail_on: int | None = None) -> int:
    """3 for error or blocked; 1 when an issue that counts reaches the severity threshold, or
    the changed lines' coverage is below ``--fail-under``; 4 when neither, but a check of the
    depth's composition did not run (``not_run``) and ``--allow-incomplete`` was not given;
    otherwise 0. So 0 means every check ran and none failed: a CI gate reading the exit code
    cannot pass a change no reviewer looked at.

    The gates are the report's own (``run.gates``); ``fail_on`` overrides its threshold (a
    stored report shown again with another one). blocked exits 3 like error: a run that analysed
    nothing must never let a caller proceed as though the change had passed.
    """
    if report.status in ("error", "blocked"):
        return EXIT_ERROR
    gates = report.run.gates
    threshold = fail_on if fail_on is not None else gates.fail_on if gates else DEFAULT_FAIL_ON
    new_only = gates is not None and gates.new_only
    if any(issue.severity >= threshold and counts(issue, new_only) for issue in report.issues):
        return EXIT_ISSUES
    if gates is not None and gates.fail_under is not None and not report.scope.nothing_to_verify:
        # Coverage that was not measured is not coverage that passed.
        cov = report.coverage
        if cov is None or cov.percent < gates.fail_under:
            return EXIT_ISSUES
    if not_run(report) and not (gates is not None and gates.allow_incomplete):
        return EXIT_INCOMPLETE
    return EXIT_OK


def counts(issue: ReportIssue, new_only: bool) -> bool:
    """Whether ``issue`` can fail the run: with --new-only, one that was already there at the
    base (a lint finding the same tool reported there, a test the debugger saw fail there) is
    reported but does not."""
    return not (new_only and issue.baseline == "pre-existing")


def level(issue: ReportIssue) -> str:
    """The issue's weight in the words CI formats share: error (7+: what --fail-on fails by
    default), warning (4-6), note (1-3)."""
    if issue.severity >= DEFAULT_FAIL_ON:
        return "error"
    return "warning" if issue.severity >= 4 else "note"


def fails(report: Report, issue: ReportIssue) -> bool:
    """Whether ``issue`` is one the run's gates fail on."""
    gates = report.run.gates
    threshold = gates.fail_on if gates else DEFAULT_FAIL_ON
    return issue.severity >= threshold and counts(issue, gates is not None and gates.new_only)


def words(report: Report) -> str:
    """The verdict: pass, issues found, incomplete (nothing failed, but checks did not run),
    blocked or error."""
    if report.status in ("error", "blocked"):
        return report.status
    return exitcodes.VERIFY.name(exit_code(report))


def not_run(report: Report) -> list[tuple[str, str, str]]:
    """(skill, status, notes) of every check of the composition that should have run and did
    not: NOT_RUN and BLOCKED. SKIPPED is not among them: outside the depth's composition, or
    nothing of its kind in scope, is a decision, not a hole. One exception: light's one
    judgement reviewer. When both its candidates skipped (Codex on PATH but --scope=all, which
    codex-reviewer does not audit), no judgement ran at all, and that slot is the hole."""
    missing: list[tuple[str, str, str]] = [
        (r.skill, r.status, r.notes)
        for r in report.skill_results
        if r.status in ("NOT_RUN", "BLOCKED")
    ]
    if (
        report.scope.depth == "light"
        and report.status == "ok"
        and not report.scope.nothing_to_verify
    ):
        slot = skills.light_slot()
        held = {r.skill: r for r in report.skill_results if r.skill in slot}
        if held and all(r.status == "SKIPPED" for r in held.values()):
            why = "; ".join(f"{r.skill}: {r.notes}" for r in held.values() if r.notes)
            missing.append(("judgement reviewer", "NOT_RUN", f"none of light's ran ({why})"))
    return missing
