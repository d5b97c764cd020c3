"""A static claim whose cited lines changed since its ref, re-derived rather than called stale.

003: STALE is "true at some prior point but no longer holds", and a verifier "re-derives the
verdict independently using tool calls only". That a cited line's text changed says neither:
an import that gained a comment is still unused. So the claim's analyser runs again (the static
verifier, verifiers.py) and this decides on what it reports on the lines that replaced the cited
ones.
"""

from __future__ import annotations

from verify_dag.phases.claims.anchors import Anchor, Where, pointer
from verify_dag.phases.claims.models import Claim, ClaimVerdict
from verify_dag.tools.base import RawFinding


def static(
    claim: Claim, s: Where, anchor: Anchor, mine: list[RawFinding], total: int
) -> ClaimVerdict:
    """A static claim whose cited lines changed since its ref, after its analyser ran again on
    the lines that replaced them: CONFIRMED when it still reports the rule there, with the
    claim's own message when the claim states one (the same fact, not another variable's),
    else STALE with what the analyser says now."""
    tool, rule, path = claim.tool or "", claim.rule or "", claim.path or ""
    first, last = anchor.changed or (anchor.line or 0, anchor.line or 0)
    span = str(first) if first == last else f"{first}-{last}"
    said = " ".join(claim.predicate.partition(f" at line {claim.line}: ")[2].split())
    hit = next(
        (
            r
            for r in mine
            if r.line is not None
            and first <= r.line <= last
            and (not said or " ".join(r.message.split()) == said)
        ),
        None,
    )
    common = {
        "claim_id": claim.id,
        "evidence_base": "artifact-internal",
        "method": "static",
        "artifact": path,
        "scope_guard": f"external referent: {tool} rule {rule}",
    }
    if hit is not None:
        return ClaimVerdict.model_validate(
            {
                **common,
                "verdict": "CONFIRMED",
                "evidence_pointer": pointer(s, path, hit.line),
                "detail": f"{anchor.change}; re-ran {tool} on {path}: {rule} still at line "
                f"{hit.line}: {hit.message}",
            }
        )
    now = "; ".join(f"line {r.line}: {r.message}" for r in mine[:5])
    return ClaimVerdict.model_validate(
        {
            **common,
            "verdict": "STALE",
            "evidence_pointer": pointer(s, path, claim.line),
            "detail": f"{anchor.change}; re-ran {tool} on {path}: the claimed {rule} is not at "
            f"line(s) {span} ({total} finding(s) in the file)",
            "corrected": (
                f"{tool} reports {rule} in {path} in {s.label} at {now}"
                if mine
                else f"{tool} reports no {rule} in {path} in {s.label}"
            ),
        }
    )
