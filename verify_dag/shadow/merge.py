"""The merge rules, the composition-axis and echo-chamber guards, the round loop's next step and
the gate verdict (docs/shadow.md). Pure functions of the verifiers' verdicts.

Merge: CONFIRMED is validated; REFUTED is shown with its corrected finding, tagged
``[was: confident, now: refuted]``; STALE ``[was true, now stale]`` with the updated finding;
UNVERIFIABLE ``[needs-human-review]``. A budget-exhausted verifier is not a verdict:
UNVERIFIABLE ``[budget-exhausted]``, re-dispatched with its search surface narrowed to the
claim's own files; after the last round it is escalated.

Guards, for verdicts whose primary evidence is the cited artifact itself
(``artifact-internal``) and that have no scope guard (no external referent such as a tool's
rule or a test run, and not a purely local fact such as a line count):

- composition axis: such a CONFIRMED needs a composition-boundary read; when the read finds
  references outside the artifact (a boundary the confirmation never looked at), or could not be
  made, it becomes UNVERIFIED-COMPOSITION ``[needs-human-review: composition boundary
  unchecked]``. A REFUTED is exempt (a refutation already halts action).
- echo chamber: when two or more concluded verdicts (CONFIRMED, REFUTED, STALE) cite the same
  artifact, its CONFIRMED and STALE ones are UNVERIFIED-ECHO-CHAMBER ``[needs-human-review:
  echo-chamber suspected]`` and the first of those is re-dispatched with the instruction to read
  outside the artifact; at the round cap, ``[loop-cap-reached]`` instead. A REFUTED counts
  towards the two but stays REFUTED, exempt as from the composition axis: it already halts
  action, and relabelling it would turn the gate's FAIL into a WARN that may proceed.

Gate: FAIL when a claim is REFUTED; else WARN when one is STALE, UNVERIFIABLE or UNVERIFIED-*;
else PASS.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Literal

from verify_dag.phases.claims.models import ClaimVerdict
from verify_dag.shadow.models import Redispatch, RoundResult, Settled

MAX_ROUNDS = 3
Gate = Literal["PASS", "WARN", "FAIL"]

REVIEW = "[needs-human-review]"
BUDGET = "[budget-exhausted]"
COMPOSITION = "[needs-human-review: composition boundary unchecked]"
ECHO = "[needs-human-review: echo-chamber suspected]"
CAP = "[loop-cap-reached]"
REFUTED_TAG = "[was: confident, now: refuted]"
STALE_TAG = "[was true, now stale]"


def _guarded(v: ClaimVerdict) -> bool:
    return v.evidence_base == "artifact-internal" and v.scope_guard is None


def settle_one(v: ClaimVerdict, last_round: bool) -> tuple[Settled, Redispatch | None]:
    if v.stop_reason == "budget-exhausted":
        if last_round:
            return Settled(
                claim_id=v.claim_id,
                verdict="UNVERIFIABLE",
                tags=(BUDGET, REVIEW, CAP),
                escalated=True,
                note="the verifier ran out of budget in every round: escalated to the operator",
            ), None
        return (
            Settled(
                claim_id=v.claim_id,
                verdict="UNVERIFIABLE",
                tags=(BUDGET,),
                note="not a verdict: re-dispatched with a narrower surface",
            ),
            Redispatch(claim_id=v.claim_id, narrow=True, reason="budget exhausted"),
        )
    if v.verdict == "CONFIRMED" and _guarded(v):
        if v.boundary_checked and not v.boundary:
            return Settled(
                claim_id=v.claim_id,
                verdict="CONFIRMED",
                note="validated (no composition surface outside the artifact)",
            ), None
        seen = (
            f"missed boundary: {', '.join(v.boundary[:3])}"
            if v.boundary
            else "no boundary read could be made"
        )
        return Settled(
            claim_id=v.claim_id,
            verdict="UNVERIFIED-COMPOSITION",
            tags=(COMPOSITION,),
            note=f"do not act until a boundary read confirms or refutes it ({seen})",
        ), None
    if v.verdict == "CONFIRMED":
        return Settled(claim_id=v.claim_id, verdict="CONFIRMED", note="validated"), None
    if v.verdict == "REFUTED":
        return Settled(
            claim_id=v.claim_id,
            verdict="REFUTED",
            tags=(REFUTED_TAG,),
            note="replaced by the corrected finding; do not act until the conflict is resolved",
        ), None
    if v.verdict == "STALE":
        return Settled(
            claim_id=v.claim_id,
            verdict="STALE",
            tags=(STALE_TAG,),
            note="do not forward the original claim; re-investigate if currency matters",
        ), None
    return Settled(
        claim_id=v.claim_id,
        verdict="UNVERIFIABLE",
        tags=(REVIEW,),
        note="surfaced for human review",
    ), None


def settle(
    verdicts: Mapping[str, ClaimVerdict], round_no: int, max_rounds: int = MAX_ROUNDS
) -> RoundResult:
    """Every verdict so far (the latest per claim), merged and guarded, and what round
    ``round_no + 1`` re-dispatches (nothing after ``max_rounds``)."""
    last = round_no >= max_rounds
    settled: dict[str, Settled] = {}
    again: list[Redispatch] = []
    for cid in sorted(verdicts, key=_order):
        s, r = settle_one(verdicts[cid], last)
        settled[cid] = s
        if r is not None:
            again.append(r)
    for artifact, group in _echo_groups(verdicts.values()).items():
        # The refutations in the group made it a group (each is a verifier that re-read only
        # this artifact) but keep their verdict: the gate must still FAIL on them.
        flagged = [cid for cid in group if verdicts[cid].verdict != "REFUTED"]
        if not flagged:
            continue
        first = min(flagged, key=_order)
        for cid in flagged:
            old = settled[cid]
            tags = (ECHO, CAP) if last else (ECHO,)
            settled[cid] = Settled(
                claim_id=cid,
                verdict="UNVERIFIED-ECHO-CHAMBER",
                tags=tuple(dict.fromkeys((*tags, *old.tags))),
                escalated=last,
                note=(
                    f"{len(group)} verifiers re-read only {artifact}: "
                    + (
                        "loop cap reached, escalated to the operator"
                        if last
                        else "one is re-dispatched to read outside it"
                    )
                ),
            )
        if not last:
            again.append(
                Redispatch(claim_id=first, outside=artifact, reason=f"echo chamber on {artifact}")
            )
    return RoundResult(
        round=round_no,
        verdicts=tuple(verdicts[c] for c in sorted(verdicts, key=_order)),
        settled=tuple(settled[c] for c in sorted(settled, key=_order)),
        redispatch=tuple(again),
    )


def _echo_groups(verdicts: Iterable[ClaimVerdict]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for v in verdicts:
        if (
            _guarded(v)
            and v.artifact
            and v.stop_reason == "completed"
            and v.verdict in ("CONFIRMED", "REFUTED", "STALE")
        ):
            groups[v.artifact].append(v.claim_id)
    return {a: ids for a, ids in sorted(groups.items()) if len(ids) >= 2}


def _order(claim_id: str) -> tuple[str, int, str]:
    """VI-2 before VI-10: ids sort by their prefix, then numerically."""
    head = claim_id.rstrip("0123456789")
    tail = claim_id[len(head) :]
    return head, int(tail) if tail else -1, claim_id


def gate(verdicts: Iterable[str]) -> Gate:
    seen = set(verdicts)
    if "REFUTED" in seen:
        return "FAIL"
    if seen & {"STALE", "UNVERIFIABLE", "UNVERIFIED-COMPOSITION", "UNVERIFIED-ECHO-CHAMBER"}:
        return "WARN"
    return "PASS"
