"""Auto-fix's verification: the checks that raised the fixed issues, run again on the fixed files.

The verified commit plus the applied fixes is committed in a throwaway index (never the user's)
and verified as a range from the same base as the run (``--scope=branch --base=OLD --head=FIXED``,
report-only): the same tools, the same suite, the same reviewers, on the same changed lines plus
the fixes'. Then, for each fixed issue:

- **fixed**: no issue of the re-run has its fingerprint (the rule and the line's text) or, in the
  same file, its title;
- **not fixed**: one does; its description is the check's output;
- and a fix after which a deterministic check (a tool, the suite) reports an issue the run did not
  have is reverted: the one whose files hold the new issue, or every fix when it is in none of
  them (a test that now fails). Judgement reviewers' new findings are reported, never reverted on.

Whole-file scopes (all, files, module) have no base to compare with: their fixes are left applied
and "not-checked", and say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from verify_dag import git, store
from verify_dag.fixes.plan import Step
from verify_dag.models.report import Report, ReportIssue
from verify_dag.models.request import VerifyRequest
from verify_dag.report import formats
from verify_dag.report.dedup import norm_title

# The sources whose findings are deterministic: a new one after a fix is the fix's doing.
_DETERMINISTIC_CLASSES = ("test-failure",)


@dataclass(frozen=True)
class FixCheck:
    verified: str  # "fixed" | "not-fixed" | "not-checked"
    evidence: str
    revert: bool = False


def old_side(repo: Path, report: Report, compared: str | None) -> str | None:
    """The commit the run compared against (``compared``, from the run's result): the merge
    base of a branch, HEAD for a staged change, the index's snapshot for an unstaged one; None
    for whole-file scopes, and for a staged or unstaged run whose worker did not say."""
    scope = report.scope
    if scope.mode == "branch":
        return scope.merge_base
    if scope.mode in ("staged", "unstaged") and compared:
        return git.verify_commit(repo, compared)
    return None


def request_for(request: VerifyRequest, old: str, fixed: str) -> VerifyRequest:
    return request.model_copy(
        update={
            "scope": "branch",
            "base": old,
            "head": fixed,
            "files": (),
            "module": None,
            "mode": "report-only",
            "unattended": None,
            "format": formats.DEFAULT,
            "output": None,
            "new_only": False,
            "fail_under": None,
            "since": None,
            "ledger": None,
            "ledger_data": None,
            "no_carry_forward": False,
            "snapshot": None,
            "bundle": None,
            "submitted": store.now(),
        }
    )


def judge(
    report: Report, after: Report, applied: Sequence[Step], fixed: Mapping[str, str | None]
) -> dict[str, FixCheck]:
    """Each applied fix's outcome, from the run's report and the re-run's (``after``);
    ``fixed``: the files as the fixes left them."""
    out: dict[str, FixCheck] = {}
    regressions = [
        j for j in after.issues if _deterministic(j) and _match(j, report.issues) is None
    ]
    for s in applied:
        still = _match(s.issue, after.issues)
        if still is not None:
            out[s.issue.id] = FixCheck(
                "not-fixed",
                f"re-run: {', '.join(still.sources)} still report it: {still.description}",
            )
        else:
            out[s.issue.id] = FixCheck(
                "fixed",
                f"re-run (run {after.run.id}): {', '.join(s.issue.sources)} no longer report it",
            )
    for new in regressions:
        path = new.location.path if new.location is not None else None
        guilty = _guilty(new, applied, fixed)
        said = f"{new.title} ({', '.join(new.sources)}" + (f", {path})" if path else ")")
        for s in guilty:
            out[s.issue.id] = FixCheck(
                "not-fixed", f"reverted: after the fix, a check failed: {said}", True
            )
    return out


def _guilty(
    new: ReportIssue, applied: Sequence[Step], fixed: Mapping[str, str | None]
) -> list[Step]:
    """The fixes a new issue is blamed on: those that added its line, else those of its file,
    else (a test that now fails, say) every one."""
    loc = new.location
    if loc is None:
        return list(applied)
    in_file = [s for s in applied if loc.path in s.option.files]
    lines = (fixed.get(loc.path) or "").splitlines()
    if loc.line is not None and 0 < loc.line <= len(lines):
        text = lines[loc.line - 1].strip()
        added = [s for s in in_file if text and text in _added_lines(s.option.patch)]
        if added:
            return added
    return in_file or list(applied)


def _added_lines(patch_text: str) -> set[str]:
    return {
        line[1:].strip()
        for line in patch_text.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    }


def _deterministic(issue: ReportIssue) -> bool:
    return issue.tool is not None or issue.issue_class in _DETERMINISTIC_CLASSES


def _match(issue: ReportIssue, others: Sequence[ReportIssue]) -> ReportIssue | None:
    path = issue.location.path if issue.location is not None else None
    for o in others:
        if issue.fingerprint and o.fingerprint == issue.fingerprint:
            return o
        o_path = o.location.path if o.location is not None else None
        if o_path == path and norm_title(o.title) == norm_title(issue.title):
            return o
    return None
