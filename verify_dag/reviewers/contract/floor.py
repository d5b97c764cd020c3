"""Floor guard: the weakenings of a diff (docs/contract.md, "Floor guard").

``scan`` is pure (parsed patch + name-status in, weakenings out); ``guard`` runs git for a pair
of commits, scans, and applies the waivers of a contract's CLARIFICATIONS.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from verify_dag import git
from verify_dag.gitparse import Delta
from verify_dag.reviewers.contract import diffparse, floor_settings, waivers
from verify_dag.reviewers.contract import floor_rules as rules
from verify_dag.reviewers.contract.diffparse import FileDiff, Line
from verify_dag.reviewers.contract.models import FloorReport, FloorRow
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


def _test_names(lines: Iterable[Line]) -> list[tuple[str, Line]]:
    out: list[tuple[str, Line]] = []
    for line in lines:
        for pattern in rules.TEST_DEF:
            m = pattern.match(line.text)
            if m:
                out.append((m.groupdict().get("name") or m.group(1), line))
                break
    return out


def _added_tests(diffs: Sequence[FileDiff]) -> set[str]:
    return {name for d in diffs for name, _ in _test_names(d.added)}


def _deleted_tests(diffs: Sequence[FileDiff], deltas: Sequence[Delta]) -> list[Weakening]:
    found: list[Weakening] = []
    by_path = {d.path: d for d in diffs}
    for delta in deltas:
        if delta.status == "D" and rules.is_test_file(delta.path):
            names = (
                [n for n, _ in _test_names(by_path[delta.path].removed)]
                if delta.path in by_path
                else []
            )
            what = f" ({len(names)} test(s): {', '.join(names[:5])})" if names else ""
            found.append(
                Weakening(
                    "TEST_DELETED", delta.path, 1, snippet(f"test file deleted{what}"), "deleted"
                )
            )
    added = _added_tests(diffs)
    for diff in diffs:
        if diff.status == "D" or not rules.is_test_file(diff.path):
            continue
        for name, line in _test_names(diff.removed):
            if name not in added:
                found.append(
                    Weakening("TEST_DELETED", diff.path, line.number, snippet(line.text), name)
                )
    return found


def _assertions(diff: FileDiff, added_tests: set[str]) -> list[Weakening]:
    """Removed assertions not re-added, and assertions replaced by weaker ones. The body of a
    deleted test is that test's TEST_DELETED row, not one row per assertion."""
    if diff.status == "D" or not rules.is_test_file(diff.path):
        return []
    in_deleted: set[int] = set()
    for hunk in diff.hunks:
        gone = [ln.number for name, ln in _test_names(hunk.removed) if name not in added_tests]
        if gone:
            in_deleted |= {ln.number for ln in hunk.removed if ln.number > min(gone)}

    def asserts(lines: Iterable[Line]) -> list[Line]:
        return [
            ln
            for ln in lines
            if not rules.is_comment(ln.text)
            and rules.ASSERTION.search(ln.text)
            and ln.number not in in_deleted
        ]

    # A line on both sides was moved or reflowed, not changed: it pairs with itself.
    same = Counter(_norm(ln.text) for ln in asserts(diff.added)) & Counter(
        _norm(ln.text) for ln in asserts(diff.removed)
    )
    skip_r, skip_a = Counter(same), Counter(same)

    def changed(lines: Iterable[Line], skip: Counter[str]) -> list[Line]:
        out = []
        for ln in asserts(lines):
            if skip[_norm(ln.text)] > 0:
                skip[_norm(ln.text)] -= 1
            else:
                out.append(ln)
        return out

    left_r = [changed(hunk.removed, skip_r) for hunk in diff.hunks]
    left_a = [changed(hunk.added, skip_a) for hunk in diff.hunks]
    return _pair_assertions(diff.path, left_r, left_a)


def _strip_strings(text: str) -> str:
    code = re.sub(r"(['\"]).*?\1", '""', text)
    return re.split(r"\s#\s|\s//\s", code, maxsplit=1)[0]


def _pair_assertions(
    path: str, left_r: list[list[Line]], left_a: list[list[Line]]
) -> list[Weakening]:
    """Pair each hunk's leftovers in order, then the rest across hunks; compare strength."""
    pairs: list[tuple[Line, Line]] = []
    rest_r: list[Line] = []
    rest_a: list[Line] = []
    for rs, as_ in zip(left_r, left_a, strict=True):
        n = min(len(rs), len(as_))
        pairs += list(zip(rs[:n], as_[:n], strict=True))
        rest_r += rs[n:]
        rest_a += as_[n:]
    n = min(len(rest_r), len(rest_a))
    pairs += list(zip(rest_r[:n], rest_a[:n], strict=True))
    found = [
        Weakening("ASSERT_REMOVED", path, ln.number, snippet(ln.text), "assert")
        for ln in rest_r[n:]
    ]
    for old, new in pairs:
        if rules.assertion_rank(_strip_strings(new.text)) < rules.assertion_rank(
            _strip_strings(old.text)
        ):
            found.append(
                Weakening(
                    "ASSERT_LOOSENED",
                    path,
                    new.number,
                    snippet(f"{_norm(new.text)} (was: {_norm(old.text)})"),
                    "assert",
                )
            )
    return found


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


def scan(diffs: Sequence[FileDiff], deltas: Sequence[Delta]) -> list[Weakening]:
    found = _deleted_tests(diffs, deltas) + _ci_files_deleted(deltas)
    added_tests = _added_tests(diffs)
    for diff in diffs:
        found += _markers(diff) + _assertions(diff, added_tests) + _ci_steps(diff)
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
    patch = git.unified_diff(repo, old, new, pathspecs, magic=magic)
    deltas = git.changed_paths(repo, old, new, pathspecs, magic=magic)
    return report(scan(diffparse.parse(patch), deltas), clarifications)
