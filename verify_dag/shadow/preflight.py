"""Pre-flight: each finding normalised to ``[CLAIM_ID] subject :: predicate :: evidence_ref``.

The kind of a claim, which decides how it can be re-derived, and its wording are the claim
verifier's (:mod:`verify_dag.phases.claims.phrasing`). A finding with nothing concrete to
point at (no file, line, node id, git ref, config key or endpoint) is unanchored: UNVERIFIABLE at
once, and never dispatched.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify_dag.errors import UsageError, VerifyDagError
from verify_dag.exitcodes import SHADOW
from verify_dag.phases.claims import phrasing
from verify_dag.phases.claims.models import Claim
from verify_dag.shadow.inputs import Findings, Record, split_ref

MAX_CLAIMS = 50  # the scale cap docs/shadow.md documents
EXIT_SCALE = SHADOW.code("halted")


class ScaleError(VerifyDagError):
    """More claims than MAX_CLAIMS: the operator scopes the investigation first."""

    exit_code = EXIT_SCALE


@dataclass(frozen=True)
class Candidate:
    """A normalised claim on the coordinator's side, with what selection may read."""

    claim: Claim
    title: str  # the finding as stated, shown alongside a refutation
    record: Record
    unanchored: str | None = None  # why no evidence_ref could be found: UNVERIFIABLE at once


def normalise(findings: Findings, only: tuple[str, ...] = ()) -> list[Candidate]:
    """Every finding as a candidate claim (only the ids in ``only``, when given); more than
    MAX_CLAIMS is a ScaleError."""
    records = list(findings.records)
    if only:
        known = {r.id for r in records}
        unknown = [i for i in only if i not in known]
        if unknown:
            raise UsageError(
                f"--claims: no claim {unknown[0]!r} in the input (its ids: "
                f"{', '.join(sorted(known)[:10]) or 'none'})"
            )
        records = [r for r in records if r.id in only]
    if len(records) > MAX_CLAIMS:
        raise ScaleError(
            f"{len(records)} claims exceed the limit of {MAX_CLAIMS}: scope the "
            "investigation first",
            hint="verify fewer files, or name the claims to check with --claims=ID,ID,...",
        )
    return [candidate(r, findings.ref) for r in records]


def candidate(record: Record, ref: str | None = None) -> Candidate:
    """One finding normalised; ``ref`` is the document's commit unless the finding names one."""
    path, line, end = record.path, record.line, record.end_line
    explicit = (record.evidence_ref or "").strip()
    if path is None and explicit:
        path, line, end = split_ref(explicit)
    claim = phrasing.claim(record.id, record, path, line, end, explicit, record.ref or ref)
    unanchored = (
        None
        if claim.evidence_ref
        else (
            "no concrete evidence_ref: the finding names no file, line, test, git ref, config key "
            "or endpoint"
        )
    )
    return Candidate(claim=claim, title=record.title, record=record, unanchored=unanchored)
