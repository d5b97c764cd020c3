"""Validation of a report dict against schemas/report.v1.schema.json (Draft 2020-12)."""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import best_match

from verify_dag import jsonschemas

SCHEMA_PATH = "schemas/report.v1.schema.json"


def schema() -> dict[str, Any]:
    return jsonschemas.load(SCHEMA_PATH)


def validate(report: dict[str, Any]) -> None:
    """Raise ValueError naming the failing path when ``report`` does not match the v1 schema."""
    error = best_match(jsonschemas.validator(SCHEMA_PATH).iter_errors(report))
    if error is not None:
        where = error.json_path
        raise ValueError(f"report does not match {SCHEMA_PATH} at {where}: {error.message}")
