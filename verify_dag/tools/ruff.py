"""ruff check, read from its JSON output.

Exit codes (docs.astral.sh/ruff/linter/#exit-codes): 0 no violations, 1 violations found,
2 abnormal termination (invalid configuration or CLI options, internal error). We do not pass
--exit-zero: it would still exit 2 on a crash, but 0/1 is useful evidence that the run was whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from verify_dag.models.findings import IssueClass
from verify_dag.tools.base import (
    PY_SUFFIXES,
    Discovery,
    Invocation,
    Rating,
    RawFinding,
    ToolSpec,
    python_tool_argv,
    relative,
)


def argv(inv: Invocation) -> list[str] | None:
    base = python_tool_argv("ruff", inv.python)
    if base is None:
        return None
    # --no-fix: a project may set `fix = true`, and verification must never edit the checkout.
    # --force-exclude: files we name explicitly still honour the project's exclude settings.
    # Ruff reads no argument files, so the runner chunks the file list instead.
    return [
        *base,
        "check",
        "--output-format=json",
        "--no-cache",
        "--no-fix",
        "--force-exclude",
        "--",
        *inv.files,
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


_CORRECT: IssueClass = "correctness"
_STYLE: IssueClass = "style"

# The severity table: a rule code's longest matching prefix decides ("" matches every code; a
# prefix of letters only matches that whole linter name).
# 7 is code that fails when it runs (it does not compile, a name is not defined, a format call
# raises); 5 a probable bug; 2-3 style, upgrades and completeness, which never fail at run time.
RULES: dict[str, Rating] = {
    "invalid-syntax": Rating(7, _CORRECT, "syntax error: Python refuses to compile the file"),
    "E9": Rating(7, _CORRECT, "syntax or read error (E999, E902): the file cannot be compiled"),
    "F7": Rating(7, _CORRECT, "a statement the compiler rejects (break outside a loop, ...)"),
    "F82": Rating(7, _CORRECT, "undefined name, in `__all__` too, or used before assignment"),
    "F50": Rating(7, _CORRECT, "a %-format that raises (wrong count or key, bad directive)"),
    "F504": Rating(5, _CORRECT, "a %-format's unused named argument (ignored, not raised)"),
    "F52": Rating(7, _CORRECT, "a `.format` call that raises (missing argument, bad string)"),
    "F522": Rating(5, _CORRECT, "a `.format` call's unused named argument (ignored)"),
    "F523": Rating(5, _CORRECT, "a `.format` call's unused positional argument (ignored)"),
    "F": Rating(5, _CORRECT, "other pyflakes: unused imports and variables, redefinitions"),
    "PLE": Rating(5, _CORRECT, "pylint errors: probable bugs"),
    "B": Rating(4, _CORRECT, "bugbear: likely bugs, often deliberate"),
    "S": Rating(4, "security", "bandit: a pattern that needs a security reading"),
    "ANN": Rating(2, _STYLE, "annotation completeness"),
    "UP": Rating(2, _STYLE, "pyupgrade: newer syntax for the same code"),
    "I": Rating(2, _STYLE, "import order"),
    "D": Rating(2, _STYLE, "docstring conventions"),
    "E501": Rating(2, _STYLE, "line length"),
    "": Rating(3, _STYLE, "every other rule: style"),
}


def rating(code: str | None) -> Rating:
    """The table row of ``code``: its longest matching prefix."""
    code = code or "invalid-syntax"
    return RULES[max((p for p in RULES if _matches(p, code)), key=len)]


def _matches(prefix: str, code: str) -> bool:
    """A prefix of letters is a whole linter's name: "S" is bandit (S101), not flake8-simplify
    (SIM201); "F" is pyflakes, not flake8-boolean-trap (FBT001)."""
    if not code.startswith(prefix):
        return False
    rest = code[len(prefix) :]
    return not prefix or not rest or prefix[-1].isdigit() or rest[0].isdigit()


def rate(f: RawFinding) -> tuple[int, IssueClass]:
    row = rating(f.code)
    return row.severity, row.issue_class


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
