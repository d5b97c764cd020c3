"""mypy, read from its one-line text output.

The text format is used rather than `--output json`: JSON only exists since mypy 1.11 (we allow
1.10) and is still marked experimental, while `path:line:col: severity: message  [code]` has been
stable for years. Exit codes: 0 clean, 1 errors reported, 2 crash, bad usage or a blocking error
(a syntax error stops type checking, but is still printed in the same format).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from verify_dag.models.findings import IssueClass
from verify_dag.tools.base import (
    PY_SUFFIXES,
    Discovery,
    RawFinding,
    ToolSpec,
    python_tool_argv,
    relative,
)

_LINE = re.compile(
    r"^(?P<path>[^:\n]+?):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>error|warning|note): "
    r"(?P<msg>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)


def argv(files: Sequence[str]) -> list[str] | None:
    base = python_tool_argv("mypy")
    if base is None:
        return None
    # Flags override anything the project's config says about the output shape.
    return [
        *base,
        "--show-column-numbers",
        "--show-error-codes",
        "--no-error-summary",
        "--no-color-output",
        "--no-pretty",
        "--hide-error-context",
        # mypy's documented way to write no cache: the checkout stays untouched, and no cache
        # shared between runs (or users) can feed one project's results to another.
        f"--cache-dir={os.devnull}",
        "--",
        *files,
    ]


def parse(stdout: str, stderr: str, workdir: Path) -> list[RawFinding]:
    out: list[RawFinding] = []
    for raw in stdout.splitlines():
        m = _LINE.match(raw.rstrip())
        # Notes explain the error before them; they are not findings of their own.
        if m is None or m["sev"] == "note":
            continue
        out.append(
            RawFinding(
                path=relative(m["path"], workdir),
                line=int(m["line"]),
                col=int(m["col"]) if m["col"] else None,
                code=m["code"],
                message=m["msg"],
                severity=m["sev"],
            )
        )
    return out


# These say the verification environment lacks the project's dependencies or their stubs (the
# checkout is analysed with verify-dag's interpreter), not that the change is wrong.
_ENVIRONMENT = frozenset({"import-not-found", "import-untyped"})


def rate(f: RawFinding) -> tuple[int, IssueClass]:
    """Every mypy error is a probable bug (7, correctness), except missing imports (3)."""
    if f.code in _ENVIRONMENT:
        return 3, "environment"
    return 7, "correctness"


SPEC = ToolSpec(
    name="mypy",
    argv=argv,
    ok_exit_codes=frozenset({0, 1}),
    parse=parse,
    rate=rate,
    suffixes=PY_SUFFIXES,
    blocking_rules=frozenset({"syntax"}),
    discovery=Discovery(
        kind="typecheck",
        argv=("mypy",),
        module="mypy",
        config_files=("mypy.ini", ".mypy.ini"),
        ini_sections=("mypy",),
    ),
)
