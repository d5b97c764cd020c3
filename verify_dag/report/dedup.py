"""Phase 8a: merge findings that several skills reported about the same thing, then sort."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from verify_dag.models.findings import Finding, IssueClass

# When findings of different classes merge, the issue takes the first class in this order.
# Callers cap repeated coverage findings and never cap correctness, so a merge must never turn a
# correctness defect into coverage (seed 8a step 5: "when in doubt ... it is correctness").
CLASS_PRECEDENCE: tuple[IssueClass, ...] = (
    "security", "correctness", "test-failure", "environment", "plan-completeness",
    "ux", "visual", "coverage", "comment", "style",
)

_NON_WORD = re.compile(r"\W+")


@dataclass(frozen=True)
class Issue:
    """One deduplicated issue: what issues[] and findings[] are both projected from."""

    severity: int
    title: str
    issue_class: IssueClass
    sources: tuple[str, ...]
    description: str
    path: str | None
    line: int | None
    end_line: int | None
    # "introduced" / "pre-existing" when a static member was compared with the merge base.
    baseline: str | None = None


def norm_title(title: str) -> str:
    # Reviewers phrase one finding slightly differently ("Unused import `os`" / "unused import os").
    return _NON_WORD.sub(" ", title.casefold()).strip()


def _line(finding: Finding) -> int | None:
    loc = finding.location
    # Line 0 is how some tools say "the whole file"; the report has no line 0.
    if loc is None or loc.line is None or loc.line < 1:
        return None
    return loc.line


def _key(finding: Finding) -> tuple[str | None, int | None, str]:
    path = finding.location.path if finding.location else None
    what = f"rule:{finding.rule}" if finding.rule else f"title:{norm_title(finding.title)}"
    return path, _line(finding), what


def _severity(finding: Finding) -> int:
    # The report must always be written; an out-of-range severity from a buggy parser is clamped
    # rather than failing schema validation and losing every other result with it.
    return min(10, max(1, finding.severity))


def _merge(group: list[Finding]) -> Issue:
    # The title comes from the most severe member (first one on a tie: input order is stable).
    lead = max(group, key=_severity)
    severity = _severity(lead)  # the highest: a comment-review finding is never rated down
    sources = tuple(dict.fromkeys(f.source for f in group))
    descriptions = dict.fromkeys(d for f in group if (d := f.description.strip()))
    issue_class = min((f.issue_class for f in group), key=CLASS_PRECEDENCE.index)
    line = _line(lead)
    ends = [
        f.location.end_line for f in group
        if f.location and f.location.end_line is not None and line is not None
        and f.location.end_line > line
    ]
    baselines = {f.baseline for f in group if f.baseline}
    # One introduced occurrence makes the merged issue introduced: the change added it.
    baseline = "introduced" if "introduced" in baselines else (
        "pre-existing" if baselines else None)
    return Issue(
        baseline=baseline,
        severity=severity,
        title=lead.title.strip(),
        issue_class=issue_class,
        sources=sources,
        description="\n\n".join(descriptions),
        path=lead.location.path if lead.location else None,
        line=line,
        end_line=max(ends) if ends else None,
    )


def _sort_key(issue: Issue) -> tuple[int, bool, str, int, str]:
    # Issues without a location sort after located ones of the same severity.
    return (-issue.severity, issue.path is None, issue.path or "", issue.line or 0, issue.title)


def dedup(findings: Iterable[Finding]) -> list[Issue]:
    """Group by path + line + (rule, or normalised title when there is no rule), merge, sort.

    The grouping is deliberately literal: two findings merge only when they point at the same
    line about the same rule or title. A fuzzier match would hide a second, different defect
    behind the first one, and a missed merge only costs a duplicate row.
    """
    groups: dict[tuple[str | None, int | None, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault(_key(finding), []).append(finding)
    return sorted((_merge(g) for g in groups.values()), key=_sort_key)
