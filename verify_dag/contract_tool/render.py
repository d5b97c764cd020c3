"""The verdict in docs/contract.md's text grammar, and as JSON (contract-verdict.schema.json).

Text (exactly one ``VERIFY — VERDICT:`` line; an ERROR stops after the CONTRACT line)::

    VERIFY — VERDICT: CONFORME | ECARTS(n) | ABANDONED(n) | ERROR(<reason>)
    CONTRACT: <path>
    CRITERIA:
      1. <criterion> — MET — <evidence>
      2. <criterion> — NOT-MET — expected <...> / actual <...> — <file:line>
    SCOPE: in-scope <n> files; out-of-scope: <list | none>
    FLOOR: clean | <n> finding(s) (<m> waived) —
      FLOOR <KIND> <file>:<line> <snippet>
      WAIVED <KIND> <file>:<line> <snippet> — "<CLARIFICATIONS sentence>"
    PROOF: read <n> files, ran <cmd → result; ...>, checked <n>/<n> criteria
"""

from __future__ import annotations

import json
from typing import Any

from verify_dag import jsonschemas
from verify_dag.reviewers.contract.models import ContractVerdict, FloorReport

SCHEMA = "schemas/contract-verdict.schema.json"
SCHEMA_ID = "verify-dag/contract-verdict/v1"


def floor_line(report: FloorReport) -> list[str]:
    if not report.rows:
        return ["FLOOR: clean"]
    head = f"FLOOR: {report.findings} finding(s) ({report.waived} waived) \u2014"
    return [head, *(f"  {row}" for row in report.lines())]


def text(verdict: ContractVerdict) -> str:
    lines = [verdict.line, f"CONTRACT: {verdict.contract}"]
    if verdict.verdict == "ERROR":
        return "\n".join(lines) + "\n"
    lines.append("CRITERIA:")
    lines += [
        f"  {c.number}. {c.text} \u2014 {c.status} \u2014 {c.evidence}" for c in verdict.criteria
    ]
    if verdict.scope is not None:
        outside = ", ".join(verdict.scope.outOfScope) or "none"
        lines.append(f"SCOPE: in-scope {len(verdict.scope.inScope)} files; out-of-scope: {outside}")
    if verdict.floor is not None:
        lines += floor_line(verdict.floor)
    if verdict.proof is not None:
        proof = verdict.proof
        ran = "; ".join(f"{r.command} \u2192 {r.result}" for r in proof.ran) or "nothing"
        lines.append(
            f"PROOF: read {proof.filesRead} files, ran {ran}, checked "
            f"{proof.checked}/{proof.total} criteria"
        )
    return "\n".join(lines) + "\n"


def to_dict(verdict: ContractVerdict) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "line": verdict.line,
        **verdict.model_dump(mode="json"),
    }
    if verdict.floor is not None:
        doc["floor"] = {
            "status": "clean" if not verdict.floor.rows else "findings",
            "findings": verdict.floor.findings,
            "waived": verdict.floor.waived,
            "rows": doc["floor"]["rows"],
        }
    if verdict.gaps is not None:
        doc["gaps"]["total"] = verdict.gaps.total
    return doc


def to_json(verdict: ContractVerdict) -> str:
    """The JSON form, checked against the schema before anyone sees it."""
    doc = to_dict(verdict)
    problems = sorted(jsonschemas.validator(SCHEMA).iter_errors(doc), key=str)
    if problems:
        raise ValueError(f"contract verdict does not match {SCHEMA}: {problems[0].message}")
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
