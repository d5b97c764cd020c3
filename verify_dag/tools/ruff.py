"""ruff check, read from its JSON output.

Exit codes (docs.astral.sh/ruff/linter/#exit-codes): 0 no violations, 1 violations found,
2 abnormal termination (invalid configuration or CLI options, internal error). We do not pass
--exit-zero: it would still exit 2 on a crash, but 0/1 is useful evidence that the run was whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verify_dag.models.findings import IssueClass
from verify_dag.tools.base import (
    PY_SUFFIXES,
    Discovery,
    RawFinding,
    ToolSpec,
    python_tool_argv,
    relative,
)


def argv(files: Sequence[str]) -> list[str] | None:
    base = python_tool_argv("ruff")
    if base is None:
        return None
    # --no-fix: a project may set `fix = true`, and verification must never edit the checkout.
    # --force-exclude: files we name explicitly still honour the project's exclude settings.
    return [
        *base,
        "check",
        "--output-format=json",
        "--no-cache",
        "--no-fix",
        "--force-exclude",
        "--",
        *files,
    ]


def parse(stdout: str, stderr: str, workdir: Path) -> list[RawFinding]:
    start = stdout.find("[")
    if start < 0:
        return []
    try:
        items: Any = json.loads(stdout[start:])
    except json.JSONDecodeError:
        return []
    if not isinstance(items, list):
        return []
    out: list[RawFinding] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
            continue
        loc = item.get("location")
        loc = loc if isinstance(loc, dict) else {}
        out.append(
            RawFinding(
                path=relative(item["filename"], workdir),
                line=loc.get("row") if isinstance(loc.get("row"), int) else None,
                col=loc.get("column") if isinstance(loc.get("column"), int) else None,
                # ruff 0.5+ reports syntax errors with code null (older) or "invalid-syntax"
                # (newer).
                code=item.get("code") or "invalid-syntax",
                message=str(item.get("message", "")),
                severity=str(item.get("severity") or "error"),
            )
        )
    return out


# Undefined names and code Python refuses to compile are bugs, whatever the linter calls them.
# F82x: undefined names (F821 undefined name, F822 in __all__, F823 used before assignment).
# F7xx: statements the compiler rejects (break outside loop, return outside function, ...).
_BROKEN = ("F82", "F7", "E9", "invalid-syntax")


def rate(f: RawFinding) -> tuple[int, IssueClass]:
    """Severity: undefined names and syntax errors 7, other pyflakes (F) 5, everything else 3.

    pyflakes rules find probable bugs (unused imports, redefinitions, unused variables), hence
    correctness; the rest (pycodestyle, isort, pyupgrade, ...) are style.
    """
    code = f.code or ""
    if code.startswith(_BROKEN):
        return 7, "correctness"
    if code.startswith("F"):
        return 5, "correctness"
    return 3, "style"


SPEC = ToolSpec(
    name="ruff",
    argv=argv,
    ok_exit_codes=frozenset({0, 1}),
    parse=parse,
    rate=rate,
    suffixes=PY_SUFFIXES,
    discovery=Discovery(
        kind="lint",
        argv=("ruff", "check"),
        module="ruff",
        config_files=("ruff.toml", ".ruff.toml"),
        default_source="Python files (ruff default rules)",
    ),
)
