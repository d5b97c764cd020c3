"""schemas/report.v1.schema.json: valid itself, shipped in the package, and strict where v1 is."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from verify_dag import report
from verify_dag.models import (
    EngineerContext,
    Finding,
    Location,
    RunState,
    Scope,
    SkillOutcome,
    Toolchain,
    VerifyRequest,
)
from verify_dag.models.source import parse_source
from verify_dag.report.schema import schema

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "schemas" / "report.v1.schema.json"
SHA = "0123456789abcdef0123456789abcdef01234567"

Doc = dict[str, Any]


def sample() -> Doc:
    """A small ok report with one issue that has a line range, made by the real builder."""
    bug = Finding(
        title="Off by one",
        severity=8,
        description="last page dropped",
        source="reviewer",
        issue_class="correctness",
        location=Location(path="src/a.py", line=27, end_line=36),
    )
    state = RunState(
        run_id="r1",
        request=VerifyRequest(source=parse_source("/srv/repo"), scope="branch", base="origin/main"),
        scope=Scope(mode="branch", base_ref="origin/main", merge_base=SHA, head_sha=SHA),
        engineer=EngineerContext(),
        toolchain=Toolchain(),
        static=SkillOutcome(skill="static-analysis", status="COMPLETED"),
        outcomes=(SkillOutcome(skill="reviewer", status="COMPLETED", findings=(bug,)),),
    )
    doc = report.build(state).model_dump(mode="json")
    report.validate(doc)
    return doc


def test_schema_is_valid_draft_2020_12() -> None:
    loaded = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(loaded)
    assert loaded["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_package_ships_the_same_schema() -> None:
    # verify_dag/schemas is a symlink to ../schemas: one file, found through importlib.resources.
    assert schema() == json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def test_sample_is_valid_and_additive_keys_are_allowed() -> None:
    doc = sample()
    doc["somethingNew"] = {"any": "shape"}
    doc["scope"]["anotherNew"] = 1
    report.validate(doc)


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    *parents, last = path.split(".")

    def mutate(doc: Doc) -> None:
        target: Any = doc
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(last) if last.isdigit() else last] = value

    return mutate


def _delete(path: str) -> Callable[[Doc], None]:
    *parents, last = path.split(".")

    def mutate(doc: Doc) -> None:
        target: Any = doc
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        del target[last]

    return mutate


INVALID: dict[str, Callable[[Doc], None]] = {
    "findings location with endLine": _set(
        "findings.0.location", {"path": "src/a.py", "line": 27, "endLine": 36}
    ),
    "findings location empty object": _set("findings.0.location", {}),
    "findings location prose": _set("findings.0.location", "src/a.py:27"),
    "finding with an id": _set("findings.0.id", "VI-1"),
    "unknown status": _set("status", "partial"),
    "unknown overall result": _set("overall.result", "warn"),
    "schemaVersion 2": _set("schemaVersion", 2),
    "unknown skill status": _set("skillResults.0.status", "DONE"),
    "skill result extra key": _set("skillResults.0.reason", "x"),
    "skill result with isolation": _set("skillResults.0.isolation", "bubblewrap"),
    "skill result with cached": _set("skillResults.0.cached", []),
    "skill detail extra key": _set("skillDetails.0.notes", "x"),
    "findings location with column": _set(
        "findings.0.location", {"path": "src/a.py", "line": 27, "column": 3}
    ),
    "finding with a rule": _set("findings.0.rule", "F401"),
    "finding with a tool": _set("findings.0.tool", "ruff"),
    "issue location without line": _set("issues.0.location", {"path": "src/a.py"}),
    "skill result without notes": _delete("skillResults.0.notes"),
    "issue location empty object": _set("issues.0.location", {}),
    "issue endLine without line": _set("issues.0.location", {"path": "a", "endLine": 3}),
    "issue bad id": _set("issues.0.id", "ISSUE-1"),
    "severity 11": _set("issues.0.severity", 11),
    "missing depth": _delete("scope.depth"),
    "missing includedFiles": _delete("scope.includedFiles"),
    "bad line range": _set(
        "scope.includedFiles", [{"path": "a", "status": "modified", "lines": ["lines 3 to 4"]}]
    ),
    "short merge base": _set("scope.mergeBase", "abc123"),
    "exerciser status with a space": _set(
        "exerciserVerification", [{"issue": "VI-1", "status": "NOT REPRODUCED", "evidence": "x"}]
    ),
    "exerciser entry without evidence": _set(
        "exerciserVerification", [{"issue": "VI-1", "status": "CONFIRMED"}]
    ),
    "customGates without review": _delete("customGates.review"),
    "error without message": _set("error", {"code": "X"}),
    "ok with an error object": _set("error", {"code": "X", "message": "y"}),
    "ok with result error": _set("overall.result", "error"),
    "pass with issues": _set("overall.result", "pass"),
    "missing knownFindings": _delete("knownFindings"),
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_documents_are_rejected(name: str) -> None:
    doc = copy.deepcopy(sample())
    INVALID[name](doc)
    with pytest.raises(ValueError, match=r"report does not match schemas/report\.v1\.schema\.json"):
        report.validate(doc)


def test_status_error_needs_error_object_and_result() -> None:
    doc = sample()
    doc["status"] = "error"
    with pytest.raises(ValueError):
        report.validate(doc)  # error is still null
    doc["error"] = {"code": "INVALID_BASE", "message": "no such ref"}
    with pytest.raises(ValueError, match=r"\$\.overall\.result"):
        report.validate(doc)
    doc["overall"]["result"] = "error"
    report.validate(doc)


def test_base_ref_only_for_branch_scope() -> None:
    doc = sample()
    doc["scope"]["mode"] = doc["overall"]["mode"] = "staged"
    with pytest.raises(ValueError, match="scope"):
        report.validate(doc)
    doc["scope"]["baseRef"] = doc["scope"]["mergeBase"] = None
    report.validate(doc)


def test_error_message_names_the_failing_path() -> None:
    doc = sample()
    doc["skillResults"][0]["status"] = "DONE"
    with pytest.raises(ValueError, match=r"at \$\.skillResults\[0\]\.status"):
        report.validate(doc)
