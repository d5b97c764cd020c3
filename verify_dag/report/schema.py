"""Validation of a report dict against schemas/report.v1.schema.json (Draft 2020-12)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

SCHEMA_PATH = "schemas/report.v1.schema.json"


@cache
def schema() -> dict[str, Any]:
    # verify_dag/schemas is a symlink to the top-level schemas/, so the one schema file serves
    # both the repository (tests, docs) and an installed package.
    text = resources.files("verify_dag").joinpath(SCHEMA_PATH).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


def validate(report: dict[str, Any]) -> None:
    """Raise ValueError naming the failing path when ``report`` does not match the v1 schema."""
    error = best_match(_validator().iter_errors(report))
    if error is not None:
        where = error.json_path
        raise ValueError(f"report does not match {SCHEMA_PATH} at {where}: {error.message}")
