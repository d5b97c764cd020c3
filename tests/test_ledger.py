"""ledger.load: our run-ledger format, validated against schemas/ledger.schema.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from verify_dag import ledger
from verify_dag.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent


def _doc() -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "change": "feature/login",
        "runs": [{"head": "a" * 40, "at": "2025-01-31T10:00:00Z", "result": "issues"}],
        "findings": [
            {
                "id": "F-3",
                "skill": "reviewer",
                "title": "Token compared with ==",
                "severity": 6,
                "disposition": "accepted",
                "location": "src/auth.py:42",
                "rootCause": "public nonce, constant-time compare not needed",
                "reason": "agreed in round 2",
            },
            {
                "id": "F-4",
                "skill": "qa",
                "title": "No test for logout",
                "severity": 5,
                "disposition": "fixed",
                "location": None,
            },
        ],
    }


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "ledger.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(UsageError) as info:
        ledger.load(path)
    line = info.value.line()
    assert "\n" not in line and str(path) in line
    return line


def test_schema_is_valid_and_shipped_through_the_package_link() -> None:
    on_disk = json.loads((ROOT / "schemas" / "ledger.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(on_disk)
    assert ledger.schema() == on_disk


def test_valid_ledger_maps_to_the_models(tmp_path: Path) -> None:
    loaded = ledger.load(_write(tmp_path, _doc()))
    first, second = loaded.findings
    assert (first.id, first.skill, first.severity, first.disposition) == (
        "F-3",
        "reviewer",
        6,
        "accepted",
    )
    assert first.location == "src/auth.py:42"
    assert first.root_cause.startswith("public nonce") and first.reason == "agreed in round 2"
    assert second.location is None and second.root_cause == ""
    assert [f.id for f in loaded.known()] == ["F-3"]  # fixed findings are not KNOWN


def test_minimal_ledger(tmp_path: Path) -> None:
    assert ledger.load(_write(tmp_path, {"schemaVersion": 1, "findings": []})).findings == ()


def test_missing_file(tmp_path: Path) -> None:
    assert "file not found" in _error(tmp_path / "nope.json")


def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    line = _error(_write(tmp_path, '{"schemaVersion": 1,\n "findings": [}'))
    assert "invalid JSON at line 2" in line


def test_bad_disposition_names_the_json_path(tmp_path: Path) -> None:
    doc = _doc()
    doc["findings"][1]["disposition"] = "maybe"
    line = _error(_write(tmp_path, doc))
    assert "$.findings[1].disposition" in line and "'maybe'" in line


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"schemaVersion": 2}, "$.schemaVersion"),
        ({"extra": True}, "$"),
    ],
)
def test_other_schema_violations(tmp_path: Path, change: dict[str, Any], where: str) -> None:
    line = _error(_write(tmp_path, {**_doc(), **change}))
    assert f"at {where}:" in line


def test_severity_out_of_range_and_duplicate_ids(tmp_path: Path) -> None:
    doc = _doc()
    doc["findings"][0]["severity"] = 11
    assert "$.findings[0].severity" in _error(_write(tmp_path, doc))
    doc = _doc()
    doc["findings"][1]["id"] = "F-3"
    assert "duplicate finding id 'F-3'" in _error(_write(tmp_path, doc))


def test_directory_is_a_usage_error(tmp_path: Path) -> None:
    assert "is a directory" in _error(tmp_path)
