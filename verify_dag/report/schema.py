"""Validation of a JSON v1 document against schemas/report.v1.schema.json (Draft 2020-12).

It checks the document, not the model: what is written (``Report.model_dump(mode="json")``) and
any v1 file read back alike."""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import best_match

from verify_dag import jsonschemas

SCHEMA_PATH = "schemas/report.v1.schema.json"


def schema() -> dict[str, Any]:
    return jsonschemas.load(SCHEMA_PATH)


def validate(document: dict[str, Any]) -> None:
    """Raise ValueError naming the failing path when ``document`` does not match the v1 schema."""
    error = best_match(jsonschemas.validator(SCHEMA_PATH).iter_errors(document))
    if error is not None:
        where = error.json_path
        raise ValueError(f"report does not match {SCHEMA_PATH} at {where}: {error.message}")
