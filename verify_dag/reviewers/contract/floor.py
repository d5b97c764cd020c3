"""Floor guard: the weakenings of a diff (docs/contract.md, "Floor guard").

``scan`` is pure (parsed patch, name-status and the changed test files' text in, weakenings
out); ``guard`` runs git for a pair of commits, scans, and applies the waivers of a contract's
CLARIFICATIONS. Tests and assertions are judged per test, which needs whole files, not hunks:
pertest.py over testunits.py.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from verify_dag import git
from verify_dag.git import Delta
from verify_dag.reviewers.contract import diffparse, floor_settings, pertest, testunits, waivers
from verify_dag.reviewers.contract import floor_rules as rules
from verify_dag.reviewers.contract.diffparse import FileDiff, Line
from verify_dag.reviewers.contract.models import FloorReport, FloorRow
from verify_dag.reviewers.contract.testunits import Unit
from verify_dag.reviewers.contract.weakening import Weakening, snippet
from verify_dag.reviewers.contract.weakening import norm as _norm

# --- markers ---------------------------------------------------------------------------------


def _markers(diff: FileDiff) -> list[Weakening]:
    """Added marker lines beyond those the file already had (an edited or moved line keeps its
    marker: removed lines with the same marker are credited first, identical ones first of all)."""
    if rules.is_doc(diff.path):
        return []
    found: list[Weakening] = []
    for kind, name, pattern in rules.MARKERS:
        if not rules.marker_applies(name, diff.path) or (
            kind == "ALLOW_FAILURE"
            and not (rules.is_ci_file(diff.path) or rules.is_tool_config(diff.path))
        ):
            continue

        def hit(line: Line, kind: str = kind, pattern: re.Pattern[str] = pattern) -> bool:
            if kind in rules.COMMENT_FREE_KINDS and rules.is_comment(line.text):
                return False
            return pattern.search(line.text) is not None

        removed = Counter(_norm(line.text) for line in diff.removed if hit(line))
        fresh: list[Line] = []
        for line in diff.added:
            if not hit(line):
                continue
            key = _norm(line.text)
            if removed[key] > 0:
                removed[key] -= 1
            else:
                fresh.append(line)
        credit = sum(removed.values())
        found += [
            Weakening(kind, diff.path, line.number, snippet(line.text), name)
            for line in fresh[credit:]
        ]
    return found


# --- tests and assertions --------------------------------------------------------------------


@dataclass(frozen=True)
class Sources:
    """The test files the guard reads whole (``needs_text``), as they were and as they are."""

    before: Mapping[str, str]  # by the path before (a renamed file's old path)
    after: Mapping[str, str]


def needs_text(diff: FileDiff) -> bool:
    """A test file whose tests may have changed: Python (an assertion can span lines no
    pattern sees), or one whose changed lines hold an assertion or a test definition."""
    if diff.binary or not rules.is_test_file(diff.path):
        return False
    if diff.path.endswith(".py") or diff.status in ("A", "D"):
        return True
    return any(
        rules.ASSERTION.search(ln.text) or testunits.test_name(ln.text)
        for ln in [*diff.removed, *diff.added]
    )


def sources(repo: Path, old: str, new: str, diffs: Sequence[FileDiff]) -> Sources:
    wanted = [d for d in diffs if needs_text(d)]
    before = git.read_files(repo, old, [d.old_path or d.path for d in wanted if d.status != "A"])
    after = git.read_files(repo, new, [d.path for d in wanted if d.status != "D"])
    return Sources(
        {p: t for p, t in before.items() if t is not None},
        {p: t for p, t in after.items() if t is not None},
    )


def _tests(diffs: Sequence[FileDiff], deltas: Sequence[Delta], src: Sources) -> list[Weakening]:
    """Per test (pertest.py); a deleted test file is one row naming the tests it took along,
    none when each of its tests lives on elsewhere in the diff, with all of its assertions."""
    before: list[Unit] = []
    after: list[Unit] = []
    for diff in diffs:
        if needs_text(diff):
            old = src.before.get(diff.old_path or diff.path) if diff.status != "A" else None
            new = src.after.get(diff.path) if diff.status != "D" else None
            units = testunits.pair(diff.path, old, new)
            before += units[0]
            after += units[1]
    found = pertest.judge(before, after)
    deleted = [d.path for d in deltas if d.status == "D" and rules.is_test_file(d.path)]
    kept = [w for w in found if w.path not in deleted]
    for path in deleted:
        names = [w.marker for w in found if w.path == path and w.kind == "TEST_DELETED"]
        had_tests = any(u.path == path and u.is_test for u in before)
        if had_tests and not any(w.path == path for w in found):
            continue  # every test moved out whole: a split or a renamed file
        what = f" ({len(names)} test(s): {', '.join(names[:5])})" if names else ""
        kept.append(
            Weakening("TEST_DELETED", path, 1, snippet(f"test file deleted{what}"), "deleted")
        )
    return kept


# --- CI steps --------------------------------------------------------------------------------


def _ci_steps(diff: FileDiff) -> list[Weakening]:
    if not rules.is_ci_file(diff.path) or diff.status == "D":
        return []
    items = bool(rules.CI_ITEM_FILES.match(diff.path))

    def steps(lines: Iterable[Line]) -> dict[str, list[Line]]:
        out: dict[str, list[Line]] = defaultdict(list)
        for line in lines:
            m = rules.CI_STEP.match(line.text)
            if m:
                out[m.group("key") or m.group("groovy")].append(line)
            elif items and rules.CI_SCRIPT_ITEM.match(line.text):
                out["item"].append(line)
        return out

    removed, added = steps(diff.removed), steps(diff.added)
    found: list[Weakening] = []
    for key, lines in removed.items():
        texts = Counter(_norm(ln.text) for ln in added.get(key, []))
        left = []
        for ln in lines:
            if texts[_norm(ln.text)] > 0:
                texts[_norm(ln.text)] -= 1
            else:
                left.append(ln)
        edits = sum(texts.values())  # added steps of this key not matched: edited in place
        found += [
            Weakening("CI_STEP_REMOVED", diff.path, ln.number, snippet(ln.text), key)
            for ln in left[edits:]
        ]
    return found


def _ci_files_deleted(deltas: Sequence[Delta]) -> list[Weakening]:
    return [
        Weakening("CI_STEP_REMOVED", d.path, 1, "CI file deleted", "deleted")
        for d in deltas
        if d.status == "D" and rules.is_ci_file(d.path)
    ]


# --- scan, waive, guard ----------------------------------------------------------------------

KINDS = (
    "TEST_DELETED",
    "SKIP",
    "XFAIL",
    "ASSERT_REMOVED",
    "ASSERT_LOOSENED",
    "SUPPRESSION",
    "THRESHOLD_LOWERED",
    "TIMEOUT_RAISED",
    "OR_TRUE",
    "ALLOW_FAILURE",
    "CI_STEP_REMOVED",
)


def scan(diffs: Sequence[FileDiff], deltas: Sequence[Delta], src: Sources) -> list[Weakening]:
    """The weakenings of a parsed patch; ``src`` holds the test files it changes, whole."""
    found = _tests(diffs, deltas, src) + _ci_files_deleted(deltas)
    for diff in diffs:
        found += _markers(diff) + _ci_steps(diff)
    found += floor_settings.changed(diffs, "threshold") + floor_settings.changed(diffs, "timeout")
    unique = {(w.kind, w.path, w.line): w for w in found}
    return sorted(unique.values(), key=lambda w: (w.path, w.line, KINDS.index(w.kind)))


def report(found: Sequence[Weakening], clarifications: str) -> FloorReport:
    rows: list[FloorRow] = []
    for w in found:
        sentence = waivers.authorising(w, clarifications)
        rows.append(
            FloorRow(
                kind=w.kind,
                file=w.path,
                line=w.line,
                snippet=w.snippet,
                waived=sentence is not None,
                authorisedBy=sentence,
            )
        )
    return FloorReport(rows=tuple(rows))


def guard(
    repo: Path,
    old: str,
    new: str,
    pathspecs: Sequence[str] = (),
    *,
    magic: bool = False,
    clarifications: str = "",
) -> FloorReport:
    """Scan the diff ``old..new`` (limited to ``pathspecs``) and apply the waivers."""
    diffs = diffparse.parse(git.unified_diff(repo, old, new, pathspecs, magic=magic))
    deltas = git.changed_paths(repo, old, new, pathspecs, magic=magic)
    return report(scan(diffs, deltas, sources(repo, old, new, diffs)), clarifications)
