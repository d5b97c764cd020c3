"""Phase 8a: merge findings that several skills reported about the same thing, then sort."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from verify_dag.models.findings import Finding, IssueClass

# When findings of different classes merge, the issue takes the first class in this order, which
# lists every class (tests/test_house.py checks it against models.findings.ISSUE_CLASSES).
# Callers cap repeated coverage findings and never cap correctness, so a merge must never turn a
# correctness defect into coverage: when in doubt it is correctness (docs/report.md, "Severities
# and classes").
CLASS_PRECEDENCE: tuple[IssueClass, ...] = (
    "security",
    "correctness",
    "test-failure",
    "environment",
    "plan-completeness",
    "ux",
    "visual",
    "coverage",
    "comment",
    "style",
)

# Two titles with no rule code between them name the same problem when this share of their
# content words is common to both (Jaccard). "Unused import json" and "`json` imported but
# unused" share all three; "Unused import json" and "Unused import os" share half, and stay two.
SIMILAR = 0.6

_NON_WORD = re.compile(r"\W+")
# Tool rule codes as tools print them and reviewers quote them: ruff/flake8/pylint (F401, E501,
# PLR0913), tsc (TS2345), shellcheck (SC2086); mypy's error codes in brackets ([arg-type]).
_CODE = re.compile(r"\b[A-Z]{1,4}[0-9]{2,5}\b|(?<=\[)[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?=\])")
_SUBJECT = re.compile(r"`([^`]+)`")
# Words that carry no problem: two titles do not describe the same thing because both say "the".
_STOP = frozenset(
    (
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "here",
        "there",
    )
)


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
    baseline: Literal["introduced", "pre-existing"] | None = None
    # Tester failures: whether the failure touches a scoped file; None when no member says.
    in_scope: bool | None = None
    # Every member's title: the exerciser names an issue by the title of the finding it tried,
    # which need not be the one the merged issue shows.
    titles: tuple[str, ...] = ()
    # The rule id, the tool and the rule's documentation of the lead (or of the first member
    # that has them); the lead's column where the tool gave one.
    rule: str | None = None
    tool: str | None = None
    help_uri: str | None = None
    column: int | None = None


def norm_title(title: str) -> str:
    # Reviewers phrase one finding slightly differently ("Unused import `os`" / "unused import os").
    return _NON_WORD.sub(" ", title.casefold()).strip()


def _codes(finding: Finding) -> set[str]:
    found = {m.casefold() for m in _CODE.findall(finding.title)}
    return found | ({finding.rule.casefold()} if finding.rule else set())


def _stem(word: str) -> str:
    # Only has to equate the inflections two titles use for one word (import/imported/imports),
    # not to be a linguist's stemmer: both sides go through the same cuts.
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _words(finding: Finding, codes: set[str]) -> set[str]:
    # Codes are compared on their own, and the tool's name ("ruff F401: ...") says who reported
    # the problem, not what it is.
    noise = _STOP | codes | ({finding.tool.casefold()} if finding.tool else set())
    return {_stem(w) for w in norm_title(finding.title).split() if w not in noise}


def same_problem(a: Finding, b: Finding) -> bool:
    """Whether two findings at one location describe one underlying problem (docs/report.md,
    "Dedup, VI ids and order").

    A test id or a rule code settles it when both sides have one: the same code is the same
    problem whatever the wording, different codes are different problems (two parametrized cases
    of one test fail at one line and are two failures). Otherwise the titles must share most of
    their content words. Either way, two titles that name different code (`os` / `json`) are two
    problems: one line can hold two unused imports.
    """
    if a.nodeid and b.nodeid:
        return a.nodeid == b.nodeid
    subjects_a = {s.casefold() for s in _SUBJECT.findall(a.title)}
    subjects_b = {s.casefold() for s in _SUBJECT.findall(b.title)}
    if subjects_a and subjects_b and not subjects_a & subjects_b:
        return False
    codes_a, codes_b = _codes(a), _codes(b)
    if codes_a and codes_b:
        return bool(codes_a & codes_b)
    if norm_title(a.title) == norm_title(b.title):
        return True
    words_a, words_b = _words(a, codes_a), _words(b, codes_b)
    union = words_a | words_b
    return bool(union) and len(words_a & words_b) / len(union) >= SIMILAR


def _line(finding: Finding) -> int | None:
    loc = finding.location
    # Line 0 is how some tools say "the whole file"; the report has no line 0.
    if loc is None or loc.line is None or loc.line < 1:
        return None
    return loc.line


def _where(finding: Finding) -> tuple[str | None, int | None]:
    return (finding.location.path if finding.location else None), _line(finding)


def _severity(finding: Finding) -> int:
    # The report must always be written; an out-of-range severity from a buggy parser is clamped
    # rather than failing schema validation and losing every other result with it.
    return min(10, max(1, finding.severity))


def _merge(group: list[Finding]) -> Issue:
    # The title comes from the most severe member (first one on a tie: input order is stable).
    lead = max(group, key=_severity)
    # The highest: a comment-review finding's 5-6 floor is never rated down by a merge.
    severity = _severity(lead)
    sources = tuple(dict.fromkeys(f.source for f in group))
    descriptions = dict.fromkeys(d for f in group if (d := f.description.strip()))
    issue_class = min((f.issue_class for f in group), key=CLASS_PRECEDENCE.index)
    line = _line(lead)
    ends = [
        f.location.end_line
        for f in group
        if f.location
        and f.location.end_line is not None
        and line is not None
        and f.location.end_line > line
    ]
    baselines = {f.baseline for f in group if f.baseline}
    # One introduced occurrence makes the merged issue introduced: the change added it.
    baseline: Literal["introduced", "pre-existing"] | None = (
        "introduced" if "introduced" in baselines else ("pre-existing" if baselines else None)
    )
    scoped = {f.in_scope for f in group if f.in_scope is not None}
    ruled = next((f for f in sorted(group, key=lambda f: f is not lead) if f.rule), lead)
    column = lead.location.column if lead.location is not None and line is not None else None
    return Issue(
        rule=ruled.rule,
        tool=ruled.tool or lead.tool,
        help_uri=ruled.help_uri,
        column=column,
        baseline=baseline,
        severity=severity,
        title=lead.title.strip(),
        issue_class=issue_class,
        sources=sources,
        description="\n\n".join(descriptions),
        path=lead.location.path if lead.location else None,
        line=line,
        end_line=max(ends) if ends else None,
        # One in-scope member makes the issue in scope, as with "introduced" above.
        in_scope=(True in scoped) if scoped else None,
        titles=tuple(dict.fromkeys(f.title.strip() for f in group)),
    )


def _sort_key(issue: Issue) -> tuple[int, bool, str, int, str]:
    # Issues without a location sort after located ones of the same severity.
    return (-issue.severity, issue.path is None, issue.path or "", issue.line or 0, issue.title)


def dedup(findings: Iterable[Finding]) -> list[Issue]:
    """Merge findings at one path and line that describe one problem, then sort.

    A finding joins the first group at its location whose every member it matches
    (``same_problem``), never a group it matches through a third finding only: chaining loose
    matches would hide a second, different defect behind the first one, and a missed merge only
    costs a duplicate row.
    """
    at: dict[tuple[str | None, int | None], list[list[Finding]]] = {}
    for finding in findings:
        groups = at.setdefault(_where(finding), [])
        group = next((g for g in groups if all(same_problem(finding, f) for f in g)), None)
        if group is None:
            groups.append([finding])
        else:
            group.append(finding)
    return sorted((_merge(g) for gs in at.values() for g in gs), key=_sort_key)
