"""The JSON Schemas shipped in the package (report v1, run ledger), loaded once each.

verify_dag/schemas is a symlink to the top-level schemas/, so the one file serves both the
repository (tests, docs) and an installed package.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator


@cache
def load(path: str) -> dict[str, Any]:
    """``path`` relative to the package, e.g. ``schemas/report.v1.schema.json``."""
    text = resources.files("verify_dag").joinpath(path).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def validator(path: str) -> Draft202012Validator:
    return Draft202012Validator(load(path))
