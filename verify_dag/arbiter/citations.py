"""The deterministic corroboration of citations (rubric 1.2.0, item 6): every node id a verdict
cites as evidence for a requirement exists in the bundle and passed.

It runs on every verdict, over the arbiter's own evidence_map and over anything the model arm
cites. It catches invented or misattributed evidence, not a real passing test cited for the
wrong requirement. A bundle without per-test records cannot corroborate anything: the check is
then ``unavailable`` and does not veto, as is an empty evidence_map.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

CitationStatus = Literal["corroborated", "unavailable", "refuted"]


@dataclass(frozen=True)
class Corroboration:
    status: CitationStatus
    checked: int
    problems: tuple[str, ...] = ()
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "checked": self.checked,
            "problems": list(self.problems),
            "reason": self.reason,
        }


def outcomes(bundle: Mapping[str, Any]) -> dict[str, set[str]] | None:
    """Every node id of the bundle with the outcomes recorded for it; None when the bundle has
    no per-test records to check against."""
    seen: dict[str, set[str]] = {}
    per_test = False
    for result in _results(bundle):
        per_test = per_test or bool(result.get("per_test"))
        for test in result.get("tests") or ():
            if isinstance(test, Mapping):
                seen.setdefault(str(test.get("nodeid")), set()).add(str(test.get("outcome")))
    return seen if per_test and seen else None


def corroborate(citations: Mapping[str, Sequence[str]], bundle: Mapping[str, Any]) -> Corroboration:
    cited = [(req, nodeid) for req, ids in citations.items() for nodeid in ids]
    known = outcomes(bundle)
    if known is None:
        return Corroboration(
            "unavailable",
            len(cited),
            reason="the bundle has no per-test records to check citations against",
        )
    if not cited:
        return Corroboration("unavailable", 0, reason="nothing is cited")
    problems = []
    for req, nodeid in cited:
        found = known.get(nodeid)
        if found is None:
            problems.append(f"{req}: {nodeid} is not in the bundle")
        elif found != {"passed"}:
            problems.append(f"{req}: {nodeid} did not pass ({', '.join(sorted(found))})")
    if problems:
        return Corroboration(
            "refuted",
            len(cited),
            tuple(problems),
            reason=f"{len(problems)} of {len(cited)} citations are not passing tests of the bundle",
        )
    return Corroboration(
        "corroborated", len(cited), reason=f"all {len(cited)} cited node ids passed in the bundle"
    )


def merge(parts: Iterable[Corroboration]) -> Corroboration:
    """One result for the verdict: refuted if any part is, corroborated if any part checked
    something, else unavailable."""
    items = list(parts)
    checked = sum(p.checked for p in items)
    problems = tuple(x for p in items for x in p.problems)
    for status in ("refuted", "corroborated"):
        chosen = [p for p in items if p.status == status]
        if chosen:
            return Corroboration(status, checked, problems, "; ".join(p.reason for p in chosen))
    return Corroboration(
        "unavailable", checked, (), "; ".join(dict.fromkeys(p.reason for p in items))
    )


def _results(bundle: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    results = bundle.get("results")
    return [r for r in results if isinstance(r, Mapping)] if isinstance(results, list) else []
