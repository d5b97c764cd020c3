"""Floor guard: thresholds lowered and timeouts raised, from ``key = number`` pairs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from verify_dag.reviewers.contract import floor_rules as rules
from verify_dag.reviewers.contract.diffparse import FileDiff, Line
from verify_dag.reviewers.contract.weakening import Weakening, norm, snippet


@dataclass(frozen=True)
class _Setting:
    key: str
    value: float
    line: Line
    path: str


def _settings(diff: FileDiff, lines: Iterable[Line], want: str) -> list[_Setting]:
    out: list[_Setting] = []
    for line in lines:
        seen: set[int] = set()
        for pattern in rules.KEY_VALUE:
            for m in pattern.finditer(line.text):
                if m.start() in seen:
                    continue
                seen.add(m.start())
                key = rules.normal_key(m.group("key"))
                if want == "timeout" and "timeout" not in key:
                    continue
                if want == "threshold" and not (
                    key.rsplit(".", 1)[-1] in rules.THRESHOLD_KEYS
                    or (rules.is_coverage_config(diff.path) and key in rules.COVERAGE_KEYS)
                ):
                    continue
                out.append(
                    _Setting(key, rules.seconds(m.group("num"), m.group("unit")), line, diff.path)
                )
    return out


def changed(diffs: Sequence[FileDiff], want: str) -> list[Weakening]:
    """Pair removed and added settings by key (same file first, then any file): a threshold
    lowered or removed, a timeout raised or removed, is a weakening."""
    kind = "THRESHOLD_LOWERED" if want == "threshold" else "TIMEOUT_RAISED"
    # A deleted CI or test file is already one row of its own (CI_STEP_REMOVED, TEST_DELETED).
    scoped = [
        d
        for d in diffs
        if not rules.is_doc(d.path)
        and not (d.status == "D" and (rules.is_ci_file(d.path) or rules.is_test_file(d.path)))
        and (
            want == "threshold"
            or rules.is_test_file(d.path)
            or rules.is_ci_file(d.path)
            or rules.is_tool_config(d.path)
        )
    ]
    removed = [s for d in scoped for s in _settings(d, d.removed, want)]
    added = [s for d in scoped for s in _settings(d, d.added, want)]
    found: list[Weakening] = []
    unpaired: list[_Setting] = []
    pool: dict[tuple[str, str], list[_Setting]] = defaultdict(list)
    for s in added:
        pool[(s.path, s.key)].append(s)
    for old in removed:
        match = pool[(old.path, old.key)]
        if match:
            found += _compare(kind, old, match.pop(0))
        else:
            unpaired.append(old)
    for old in unpaired:
        elsewhere = next((lst for (_, key), lst in pool.items() if key == old.key and lst), None)
        if elsewhere:
            found += _compare(kind, old, elsewhere.pop(0))
        elif want == "threshold" or not rules.is_test_file(old.path):
            found.append(
                Weakening(
                    kind,
                    old.path,
                    old.line.number,
                    snippet(f"(removed) {norm(old.line.text)}"),
                    old.key,
                )
            )
    return found


def _compare(kind: str, old: _Setting, new: _Setting) -> list[Weakening]:
    weaker = new.value < old.value if kind == "THRESHOLD_LOWERED" else new.value > old.value
    if not weaker:
        return []
    text = f"{norm(new.line.text)} (was: {norm(old.line.text)})"
    return [Weakening(kind, new.path, new.line.number, snippet(text), new.key)]
