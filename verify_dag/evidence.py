"""The evidence bundle: what the test suite did, per test, in which environment, and what the
security gates said, frozen under a canonical hash. It is the arbiter's input (docs/arbiter.md).

The tester records the per-test results and the inventory on the worker that ran the suite; the
report task assembles the bundle from the run's state and stores it with the report. Nothing in
it names the worker's scratch checkouts or echoes a secret: node ids are repo-relative and free
text goes through :func:`sanitize`.

Canonical bytes are JSON with sorted keys, ``(",", ":")`` separators and ``ensure_ascii=False``,
without the ``bundle_hash`` field; the bundle hash is the sha256 of those bytes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from jsonschema.exceptions import best_match

from verify_dag import jsonschemas
from verify_dag.models import CaseCounts, GateResult, RunState, SuiteEvidence
from verify_dag.phases import gates
from verify_dag.phases.tester.records import sanitize

BUNDLE_VERSION = 1
SCHEMA_PATH = "schemas/evidence_bundle.schema.json"

# The scratch directories verify-dag makes (git.worktree, the tester, testenv, the backends).
_SECURITY_TAG = re.compile(
    r"^[`*]*(G_SECURE|G_SECRETS_SCAN|SECURITY)[`*]*(?:\s*\((strict|advisory)\))?\s*:", re.IGNORECASE
)


def canonical_bytes(bundle: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in bundle.items() if k != "bundle_hash"}
    return _canonical(body)


def bundle_hash(bundle: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_bytes(bundle)).hexdigest()


def inventory_hash(inventory: Mapping[str, Any]) -> str:
    """The hash an arbiter request names the inventory manifest by (same canonical form)."""
    return hashlib.sha256(_canonical(inventory)).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def version() -> str:
    try:
        return importlib.metadata.version("verify-dag")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def runner_version(suite: SuiteEvidence | None) -> str:
    """``verify-dag/0.1.0 pytest/9.0.3``: what produced the bundle (the arbiter's 9th argument)."""
    own = f"verify-dag/{version()}"
    if suite is None:
        return own
    return (
        f"{own} {suite.runner}/{suite.runner_version}"
        if suite.runner_version
        else (f"{own} {suite.runner}")
    )


def security_status(state: RunState) -> dict[str, Any]:
    """The configured security gates and what the exerciser observed for each.

    A security gate is a VERIFICATION.md gate whose rule starts with ``G_SECURE:``,
    ``G_SECRETS_SCAN:`` or ``SECURITY:`` (optionally ``(advisory)`` before the colon). None
    declared is ``not_configured``, never a pass."""
    md = state.engineer.verification_md if state.engineer is not None else None
    parsed = gates.parse(md or "")
    declared = [
        (g, m) for g in (*parsed.exerciser, *parsed.review) if (m := _SECURITY_TAG.match(g.rule))
    ]
    if not declared:
        return {
            "configured": False,
            "status": "not_configured",
            "gates": [],
            "reason": "no security gate is declared (a VERIFICATION.md gate whose rule "
            "starts with G_SECURE:, G_SECRETS_SCAN: or SECURITY:)",
        }
    observed: dict[tuple[str, str], GateResult] = {
        (g.kind, g.rule): g for o in state.outcomes if o.skill == "exerciser" for g in o.gates
    }
    records = []
    for gate, match in declared:
        result = observed.get((gate.kind, gate.rule))
        records.append(
            {
                "name": match.group(1).upper(),
                "kind": gate.kind,
                "rule": sanitize(gate.rule),
                "mode": (match.group(2) or "strict").lower(),
                "status": result.status if result is not None else "NOT_CHECKED",
                "evidence": sanitize(result.evidence, limit=600)
                if result is not None
                else "declared, but the exerciser recorded no result for it",
            }
        )
    status, reason = _aggregate(records)
    return {"configured": True, "status": status, "gates": records, "reason": reason}


def _aggregate(records: list[dict[str, Any]]) -> tuple[str, str]:
    def names(pred: Any) -> str:
        return ", ".join(r["name"] for r in records if pred(r))

    failed = names(lambda r: r["status"] == "FAIL" and r["mode"] == "strict")
    if failed:
        return "failed", f"strict security gate(s) failed: {failed}"
    unchecked = names(lambda r: r["status"] not in ("PASS", "FAIL"))
    if unchecked:
        return "blocked", f"security gate(s) could not be checked: {unchecked}"
    advisory = names(lambda r: r["status"] == "FAIL")
    if advisory:
        return "advisory", f"advisory security gate(s) reported findings: {advisory}"
    return "passed", f"every security gate passed: {names(lambda r: True)}"


def build(state: RunState) -> dict[str, Any] | None:
    """The run's bundle, hashed and validated; None when no test phase ran (nothing to attest)."""
    tester = next((o for o in state.outcomes if o.skill == "tester"), None)
    if tester is None or state.scope is None:
        return None
    suite, sc, req = tester.evidence, state.scope, state.request
    result: dict[str, Any] = {
        "status": tester.status,
        "notes": sanitize(tester.notes, limit=600),
        "runner": suite.runner if suite else None,
        "runner_version": suite.runner_version if suite else None,
        "command": sanitize(suite.command) if suite else None,
        "returncode": suite.returncode if suite else None,
        "per_test": suite.per_test if suite else False,
        "truncated": suite.truncated if suite else False,
        "counts": (suite.counts if suite else CaseCounts()).model_dump(),
        "tests": [_case(c.model_dump(exclude_defaults=True)) for c in suite.tests] if suite else [],
    }
    bundle: dict[str, Any] = {
        "bundle_version": BUNDLE_VERSION,
        "produced_by": f"verify-dag/{version()}",
        "runner_version": runner_version(suite),
        "run_id": state.run_id,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "subject": {
            "repo": req.source.shown,
            "mode": sc.mode,
            "depth": req.depth,
            "commit": sc.new_commit,
            "head_sha": sc.head_sha or None,
            "base_ref": sc.base_ref or None,
            "merge_base": sc.merge_base or None,
        },
        "inventory": suite.inventory.model_dump() if suite else None,
        "results": [result],
        "security_status": security_status(state),
    }
    bundle["bundle_hash"] = bundle_hash(bundle)
    validate(bundle)
    return bundle


def _case(record: dict[str, Any]) -> dict[str, Any]:
    if "requirements" in record:
        record["requirements"] = list(record["requirements"])
    return record


def validate(bundle: Mapping[str, Any]) -> None:
    """Raise ValueError naming the failing path when ``bundle`` does not match its schema."""
    error = best_match(jsonschemas.validator(SCHEMA_PATH).iter_errors(bundle))
    if error is not None:
        raise ValueError(
            f"bundle does not match {SCHEMA_PATH} at {error.json_path}: {error.message}"
        )
