"""Coverage per requirement (rubric item 2) with tier awareness (item 4).

For each requirement, the bundle's tests that match it (:mod:`~verify_dag.arbiter.matching`):

- a matching test failed or errored: **uncovered**;
- else one passed or was xfailed: **covered** (the passing ones are its evidence_map entry);
- else none matches: **uncovered**;
- else every matching test was skipped. The skip is declared valid only for a tier shortfall the
  plan sanctions: the inventory tier is below ``required_tier`` and below the requirement's
  ``skip_if_tier_below``. Then it is **skipped with reason**, not a gap. Any other skip (no
  shortfall, a shortfall without ``skip_if_tier_below``, or an unknown tier) is **uncovered**: a
  test cannot waive its own requirement by skipping itself.

Every uncovered requirement is a blocker concern.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verify_dag.arbiter.concerns import Concerns
from verify_dag.arbiter.matching import index


@dataclass(frozen=True)
class Scored:
    summary: dict[str, Any]  # the verdict's coverage object
    evidence_map: dict[str, list[str]]


def score(
    requirements: Sequence[Mapping[str, Any]],
    bundle: Mapping[str, Any] | None,
    tier: int | None,
    concerns: Concerns,
) -> Scored:
    by_req = index(t for r in bundle["results"] for t in r["tests"]) if bundle is not None else {}
    covered: list[str] = []
    uncovered: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    evidence_map: dict[str, list[str]] = {}
    for req in requirements:
        rid = req["id"]
        if bundle is None:
            # The bundle's own blocker says why; one per requirement would only repeat it.
            uncovered.append({"requirement_id": rid, "reason": "the bundle could not be used"})
            continue
        matching = by_req.get(rid, [])
        bad = [t["nodeid"] for t in matching if t["outcome"] in ("failed", "error")]
        passing = [t["nodeid"] for t in matching if t["outcome"] == "passed"]
        if bad:
            reason = f"matching test(s) failed or errored: {_some(bad)}"
        elif passing or any(t["outcome"] == "xfailed" for t in matching):
            covered.append(rid)
            if passing:
                evidence_map[rid] = passing
            continue
        elif not matching:
            reason = "no test in the bundle matches it"
        else:
            sanctioned, reason = _skip(req, matching, tier)
            if sanctioned:
                skipped.append(
                    {"requirement_id": rid, "reason": reason, "tier_required": req["required_tier"]}
                )
                continue
        uncovered.append({"requirement_id": rid, "reason": reason})
        concerns.add("blocker", f"{rid} is not covered: {reason}", requirement_id=rid)
    summary = {
        "requirements_total": len(requirements),
        "requirements_covered": len(covered),
        "requirements_skipped": len(skipped),
        "covered": covered,
        "uncovered": uncovered,
        "skipped_with_reason": skipped,
    }
    return Scored(summary, evidence_map)


def _skip(
    req: Mapping[str, Any], matching: Sequence[Mapping[str, Any]], tier: int | None
) -> tuple[bool, str]:
    """Whether every matching test being skipped is a sanctioned tier skip, and why."""
    said = sorted({str(t.get("reason") or "no reason given") for t in matching})
    skips = f"{len(matching)} matching test(s) skipped ({'; '.join(said)[:300]})"
    required = req["required_tier"]
    below = req.get("skip_if_tier_below")
    if tier is None:
        return False, f"{skips} and the inventory tier is unknown"
    if tier >= required:
        return False, (
            f"{skips} at inventory tier {tier}, which meets required_tier "
            f"{required}: a skip there is a coverage gap"
        )
    if below is None:
        return False, (
            f"tier shortfall: {skips} at inventory tier {tier}, below required_tier "
            f"{required}, and the plan declares no skip_if_tier_below"
        )
    if tier >= below:
        return False, (
            f"tier shortfall: {skips} at inventory tier {tier}, below required_tier "
            f"{required}, but skip_if_tier_below {below} does not sanction tier {tier}"
        )
    return True, (
        f"inventory tier {tier} is below required_tier {required} and the plan "
        f"declares skip_if_tier_below {below}: {skips}"
    )


def _some(nodeids: Sequence[str]) -> str:
    return ", ".join(nodeids[:3]) + (f" and {len(nodeids) - 3} more" if len(nodeids) > 3 else "")
