"""The shadow verification result: one dict (schemas/shadow.schema.json) and its text form."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from verify_dag import jsonschemas
from verify_dag.errors import FatalError
from verify_dag.shadow import merge, select
from verify_dag.shadow.inputs import Findings
from verify_dag.shadow.models import RoundResult, ShadowJob
from verify_dag.shadow.preflight import Candidate

SCHEMA = "schemas/shadow.schema.json"
NOT_SELECTED = "NOT_SELECTED"
UNANCHORED_TAG = "[needs-human-review]"
ORDER = (
    "REFUTED",
    "STALE",
    "UNVERIFIED-COMPOSITION",
    "UNVERIFIED-ECHO-CHAMBER",
    "UNVERIFIABLE",
    "CONFIRMED",
    NOT_SELECTED,
)


def document(
    *,
    source: str,
    findings: Findings,
    candidates: Sequence[Candidate],
    selected: Sequence[str],
    everything: bool,
    job: ShadowJob,
    result: RoundResult | None,
) -> dict[str, Any]:
    verdicts = {v.claim_id: v for v in result.verdicts} if result else {}
    settled = {s.claim_id: s for s in result.settled} if result else {}
    claims = []
    for c in candidates:
        cid = c.claim.id
        entry: dict[str, Any] = {
            "claim_id": cid,
            "claim": c.claim.text(),
            "subject": c.claim.subject,
            "predicate": c.claim.predicate,
            "evidence_ref": c.claim.evidence_ref or None,
            "kind": c.claim.kind,
            "ref": c.claim.ref,
            "original": c.title,
            "stakes": select.score(c),
            "selected": cid in selected,
            "verifier_verdict": None,
            "evidence_pointer": None,
            "evidence_base": None,
            "method": None,
            "detail": "",
            "corrected": None,
            "round": None,
            "stop_reason": None,
            "seconds": None,
            "boundary": [],
            "escalated": False,
        }
        if c.unanchored is not None:
            entry.update(
                verdict="UNVERIFIABLE",
                tags=[UNANCHORED_TAG],
                note=f"not anchored: {c.unanchored}; no verifier was dispatched",
            )
        elif cid not in verdicts:
            entry.update(
                verdict=NOT_SELECTED,
                tags=[],
                note="not among the highest-stakes claims; --all verifies every claim",
            )
        else:
            v, s = verdicts[cid], settled[cid]
            entry.update(
                verdict=s.verdict,
                tags=list(s.tags),
                note=s.note,
                escalated=s.escalated,
                verifier_verdict=v.verdict,
                evidence_pointer=v.evidence_pointer,
                evidence_base=v.evidence_base,
                method=v.method,
                detail=v.detail,
                corrected=v.corrected,
                round=v.round,
                stop_reason=v.stop_reason,
                seconds=v.seconds,
                boundary=list(v.boundary),
            )
        claims.append(entry)
    counted = Counter(e["verdict"] for e in claims)
    gate = merge.gate(e["verdict"] for e in claims if e["verdict"] != NOT_SELECTED)
    doc = {
        "schemaVersion": 1,
        "gate": gate,
        "summary": _summary(
            gate, counted, len(verdicts), len(claims), result.round if result else 0
        ),
        "input": {"path": source, "shape": findings.shape, "goal": findings.goal},
        "repository": {"path": job.repo, "ref": job.label, "commit": job.commit},
        "selection": {
            "mode": "all" if everything else "stakes",
            "verified": len(verdicts),
            "total": len(claims),
        },
        "rounds": result.round if result else 0,
        "budget_seconds": job.budget,
        "counts": {k: counted[k] for k in ORDER if counted[k]},
        "notes": list(findings.notes),
        "claims": claims,
    }
    validate(doc)
    return doc


def validate(doc: dict[str, Any]) -> None:
    """Our own output must match its schema; a mismatch is our bug, reported as an error."""
    errors = sorted(jsonschemas.validator(SCHEMA).iter_errors(doc), key=str)
    if errors:
        raise FatalError(
            f"the shadow result does not match {SCHEMA} at {errors[0].json_path}: "
            f"{errors[0].message[:200]}"
        )


def _summary(gate: str, counted: Counter[str], verified: int, total: int, rounds: int) -> str:
    parts = [f"{counted[k]} {k.lower()}" for k in ORDER[:-1] if counted[k]]
    scope = f"{verified} of {total} claim(s) verified" + (
        f" in {rounds} round(s)" if rounds else ""
    )
    return f"{gate}: {', '.join(parts) or 'no claims'} ({scope})"


def text(doc: dict[str, Any]) -> str:
    repo = doc["repository"]
    out = [
        f"SHADOW GATE: {doc['summary']}",
        f"repository: {repo['path']} at {repo['ref']}",
        *(f"note: {n}" for n in doc["notes"]),
    ]
    verified = [c for c in doc["claims"] if c["verifier_verdict"] is not None]
    unanchored = [c for c in doc["claims"] if c["evidence_ref"] is None]
    skipped = [c for c in doc["claims"] if c["verdict"] == NOT_SELECTED]
    for c in sorted(verified, key=lambda c: ORDER.index(c["verdict"])):
        tags = " ".join(c["tags"])
        out += ["", c["claim"], f"  {c['verdict']}{' ' + tags if tags else ''}: {c['note']}"]
        if c["verdict"] in ("REFUTED", "STALE"):
            out.append(f"  original: {c['original']}")
            if c["corrected"]:
                out.append(
                    f"  {'corrected' if c['verdict'] == 'REFUTED' else 'updated'}: {c['corrected']}"
                )
        out.append(
            f"  evidence: {c['evidence_pointer']} ({c['evidence_base']}, round "
            f"{c['round']}): {c['detail']}"
        )
    if unanchored:
        out += ["", "Unanchored claims (UNVERIFIABLE [needs-human-review], not dispatched):"]
        out += [f"  {c['claim']}" for c in unanchored]
    if skipped:
        out += ["", "Not selected (pass --all to verify them):"]
        out += [f"  {c['claim']} (stakes {c['stakes']})" for c in skipped]
    return "\n".join(out) + "\n"


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
