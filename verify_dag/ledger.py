"""Read a run ledger (``--ledger=PATH``): what earlier verification runs on a change decided.

The format is ours, JSON, validated against ``schemas/ledger.schema.json`` (Draft 2020-12) and
documented for users in docs/ledger.md::

    {
      "schemaVersion": 1,
      "change": "feature/login",                                    # optional
      "runs": [{"head": "9d8f...", "at": "2025-01-31T10:00:00Z",    # optional, informational
                "result": "issues-found"}],
      "findings": [
        {"id": "F-3", "skill": "reviewer", "title": "Token compared with ==",
         "severity": 6, "disposition": "accepted",                  # open|accepted|deferred|
         "location": "src/auth.py:42",                              #   wontfix|fixed
         "rootCause": "constant-time compare not needed: token is a public nonce",
         "reason": "agreed in round 2"}
      ]
    }

Every finding that is not ``fixed`` becomes a row of the reviewers' KNOWN FINDINGS table. verify
only reads the ledger, never writes it: the caller that loops over a change owns it. Any problem
with the file is a usage error (exit 2) with one line naming the file and the first problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema.exceptions import best_match

from verify_dag import jsonschemas
from verify_dag.errors import UsageError
from verify_dag.models.carry import Ledger, LedgerFinding

SCHEMA_PATH = "schemas/ledger.schema.json"
_MESSAGE_MAX = 200


def schema() -> dict[str, Any]:
    return jsonschemas.load(SCHEMA_PATH)


def load(path: str | Path) -> Ledger:
    """Read, validate and map a ledger file; UsageError with one line on any problem."""
    where = f"--ledger {path}"
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"{where}: file not found") from None
    except IsADirectoryError:
        raise UsageError(f"{where}: is a directory, not a ledger file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{where}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    error = best_match(jsonschemas.validator(SCHEMA_PATH).iter_errors(data))
    if error is not None:
        raise UsageError(
            f"{where}: does not match {SCHEMA_PATH} at {error.json_path}: "
            f"{_one_line(error.message)}"
        )
    findings = tuple(_finding(f) for f in data["findings"])
    seen: set[str] = set()
    for i, f in enumerate(findings):
        if f.id in seen:
            raise UsageError(f"{where}: duplicate finding id {f.id!r} at $.findings[{i}].id")
        seen.add(f.id)
    return Ledger(findings=findings)


def _finding(raw: dict[str, Any]) -> LedgerFinding:
    return LedgerFinding(
        id=raw["id"],
        skill=raw["skill"],
        title=raw["title"],
        severity=raw["severity"],
        disposition=raw["disposition"],
        location=raw.get("location"),
        root_cause=raw.get("rootCause", ""),
        reason=raw.get("reason", ""),
    )


def _one_line(message: str) -> str:
    # jsonschema messages embed reprs of the offending value, which can span lines or be huge.
    flat = " ".join(message.split())
    return flat if len(flat) <= _MESSAGE_MAX else flat[: _MESSAGE_MAX - 3] + "..."
