"""The arbiter's rubric 1.2.0, computed deterministically: a pure function of the request and
the bytes of the bundle and the plan (no clock, no environment, no subprocess).

1. self-hash: the bundle's canonical hash (:func:`verify_dag.evidence.bundle_hash`) against
   the request's bundle_hash; a mismatch is a blocker;
2. shape: the bundle and the plan parse and match their schemas, the plan file matches
   plan_hash, the bundle holds test results, was produced by runner_version and carries the
   inventory manifest inventory_hash names; any failing test of the bundle is a blocker;
3. coverage per requirement (:mod:`~verify_dag.arbiter.coverage`) with tier awareness;
4. the security arm (:mod:`~verify_dag.arbiter.security`);
5. the evidence_map of passing node ids, corroborated (:mod:`~verify_dag.arbiter.citations`).

Verdict: AUDIT_UNAVAILABLE when the model arm failed; else REJECTED on any blocker concern;
else AUDIT_UNAVAILABLE when security evidence is required and missing; else
VERIFIED_WITH_CONCERNS when there is any concern; else VERIFIED.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import best_match

from verify_dag import evidence, jsonschemas
from verify_dag.arbiter import PLAN_SCHEMA, citations, coverage, security
from verify_dag.arbiter.concerns import Concerns
from verify_dag.arbiter.inputs import Request


@dataclass(frozen=True)
class Assessment:
    verdict: dict[str, Any]
    bundle: dict[str, Any] | None  # the bundle as parsed, when it matched its schema
    plan: dict[str, Any] | None  # the plan as parsed, when it matched its schema


def evaluate(request: Request, bundle_bytes: bytes, plan_bytes: bytes) -> Assessment:
    concerns = Concerns()
    raw = _parse(bundle_bytes, "bundle", concerns)
    recomputed = evidence.bundle_hash(raw) if isinstance(raw, dict) else None
    matches = recomputed == request.bundle_hash
    if not matches:
        concerns.add(
            "blocker",
            f"self-hash mismatch: the bundle hashes to {recomputed}, the "
            f"request names {request.bundle_hash}"
            if recomputed
            else "self-hash unavailable: the bundle is not a JSON object",
        )
    bundle = _valid(raw, evidence.SCHEMA_PATH, "bundle", concerns)
    tier = None
    if bundle is not None:
        _bundle_checks(bundle, request, recomputed, concerns)
        tier = _tier(bundle, request, concerns)
    plan = _plan(plan_bytes, request, concerns)
    requirements = plan["requirements"] if plan is not None else []
    scored = coverage.score(requirements, bundle, tier, concerns)
    arm = security.arm(bundle, plan, concerns)
    cited = citations.corroborate(scored.evidence_map, bundle or {})
    for problem in cited.problems:
        concerns.add("blocker", f"citation not corroborated: {problem}")
    verdict: dict[str, Any] = {
        "verdict": "",
        **request.echo(),
        "self_hash_check": {"bundle_recomputed_hash": recomputed, "matches_input": matches},
        "coverage": scored.summary,
        "tier": {"inventory_tier": tier, "manifest_matches": tier is not None},
        "security_verdict": arm,
        "evidence_map": scored.evidence_map,
        "citations": cited.as_dict(),
        "concerns": concerns.items,
        # A placeholder: model_arm.apply always replaces it before the verdict is printed.
        "model_arm": {
            "status": "skipped",
            "reason": "the deterministic rubric alone: the model arm has not been asked yet",
        },
    }
    verdict["verdict"] = decide(verdict)
    return Assessment(verdict, bundle, plan)


def decide(verdict: Mapping[str, Any]) -> str:
    severities = {c["severity"] for c in verdict["concerns"]}
    if verdict["model_arm"]["status"] == "unavailable":
        return "AUDIT_UNAVAILABLE"
    if "blocker" in severities:
        return "REJECTED"
    if verdict["security_verdict"]["status"] == "unavailable":
        return "AUDIT_UNAVAILABLE"
    return "VERIFIED_WITH_CONCERNS" if severities else "VERIFIED"


def _parse(data: bytes, name: str, concerns: Concerns) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        concerns.add("blocker", f"the {name} is not parseable JSON: {_first_line(exc)}")
        return None


def _valid(doc: Any, schema: str, name: str, concerns: Concerns) -> dict[str, Any] | None:
    if doc is None:
        return None
    error = best_match(jsonschemas.validator(schema).iter_errors(doc))
    if error is not None:
        concerns.add(
            "blocker",
            f"the {name} does not match {schema} at {error.json_path}: "
            f"{_first_line(error.message)}",
        )
        return None
    assert isinstance(doc, dict)
    return doc


def _bundle_checks(
    bundle: dict[str, Any], request: Request, recomputed: str | None, concerns: Concerns
) -> None:
    if bundle["bundle_hash"] != recomputed:
        concerns.add(
            "warning",
            "the bundle's own bundle_hash field does not match its content "
            "(the field is outside the hash; the content hash is checked)",
        )
    if bundle["runner_version"] != request.runner_version:
        concerns.add(
            "blocker",
            f"runner_version mismatch: the bundle was produced by "
            f"{bundle['runner_version']!r}, the request names "
            f"{request.runner_version!r}",
        )
    results = bundle["results"]
    ran = [
        r
        for r in results
        if r["status"] not in ("BLOCKED", "NOT_RUN") and (r["tests"] or r["returncode"] is not None)
    ]
    if not ran:
        why = "; ".join(r["notes"] for r in results if r["notes"]) or "no suite ran"
        concerns.add("blocker", f"the bundle contains no test results: {why}")
        return
    failing = [t["nodeid"] for r in ran for t in r["tests"] if t["outcome"] in ("failed", "error")]
    total = sum(r["counts"]["failed"] + r["counts"]["error"] for r in ran)
    if failing or total or any(r["status"] == "FAILED" for r in ran):
        shown = ", ".join(failing[:5]) + (" ..." if len(failing) > 5 else "")
        concerns.add(
            "blocker",
            f"the suite failed: {max(total, len(failing))} failing or "
            f"erroring test(s)"
            + (f": {shown}" if shown else f" ({'; '.join(r['notes'] for r in ran)})"),
        )
    if any(not r["per_test"] for r in ran):
        concerns.add(
            "warning",
            "the runner gave only an exit status: no per-test records, so "
            "no test can be matched to a requirement or cited",
        )
    if any(r["truncated"] for r in ran):
        concerns.add("warning", "the bundle was truncated: it does not record every test that ran")


def _tier(bundle: dict[str, Any], request: Request, concerns: Concerns) -> int | None:
    inventory = bundle["inventory"]
    if inventory is None:
        concerns.add("blocker", "the bundle carries no inventory manifest: the tier is unknown")
        return None
    found = evidence.inventory_hash(inventory)
    if found != request.inventory_hash:
        concerns.add(
            "blocker",
            f"inventory_hash {request.inventory_hash} does not name the "
            f"bundle's inventory manifest (which hashes to {found}): the "
            "tier is unknown",
        )
        return None
    tier: int = inventory["tier"]
    return tier


def _plan(data: bytes, request: Request, concerns: Concerns) -> dict[str, Any] | None:
    found = hashlib.sha256(data).hexdigest()
    if found != request.plan_hash:
        concerns.add(
            "blocker",
            f"plan_hash mismatch: the plan file hashes to {found}, the "
            f"request names {request.plan_hash}",
        )
    plan = _valid(_parse(data, "plan", concerns), PLAN_SCHEMA, "plan", concerns)
    if plan is None:
        return None
    ids = [r["id"] for r in plan["requirements"]]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        concerns.add("blocker", f"the plan lists requirement(s) more than once: {', '.join(twice)}")
    return plan


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
