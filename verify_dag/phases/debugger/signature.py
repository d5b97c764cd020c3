"""What both halves of the debugger share: a failure signature and how a verdict is written.

Tests are re-run in :mod:`~verify_dag.phases.debugger`, exerciser failures in
:mod:`~verify_dag.phases.debugger.exercise`; both report the same Diagnosis shape from these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

from verify_dag import util
from verify_dag.models import Diagnosis, Finding

PreExisting = Literal["yes", "no", "undetermined"]

EVIDENCE_CAP = 1500
_TRACE_PATH = re.compile(r"^(?P<path>[^\s:]+\.py):\d+:", re.MULTILINE)


@dataclass
class Signature:
    key: str  # the nodeid for pytest failures, else the command or title
    nodeid: str | None
    findings: list[Finding] = field(default_factory=list)
    why_not: str = ""  # why it cannot be re-run, when nodeid is None and it is not exercised
    exercised: bool = False  # an exerciser failure: checked by the exercise at the base


def touched(sig: Signature, scoped: set[str]) -> tuple[str, ...]:
    paths: set[str] = set()
    for f in sig.findings:
        if f.location is not None:
            paths.add(f.location.path)
        paths.update(m["path"] for m in _TRACE_PATH.finditer(f.description))
    paths = {p.removeprefix("./") for p in paths}
    return tuple(sorted(paths & scoped))


def undetermined(sig: Signature, why: str, scoped: set[str]) -> Diagnosis:
    return Diagnosis(
        failure=sig.key,
        pre_existing="undetermined",
        command="not run",
        evidence=why,
        touched_by_diff=touched(sig, scoped),
    )


def excerpt(why: str, output: str) -> str:
    """The verdict, then the tail of the output (where pytest puts the crash line and summary)."""
    why, text = util.redact(why), util.redact(output)
    room = EVIDENCE_CAP - len(why) - 1
    if len(text) > room:
        # Cut on a line boundary: a half line of a traceback reads as a different message.
        text = "...\n" + text[len(text) - room + 4 :].split("\n", 1)[-1]
    return f"{why}\n{text}"[:EVIDENCE_CAP] if text else why[:EVIDENCE_CAP]


def defines(text: str | None, name: str) -> bool:
    """Whether a Python source defines a function or method ``name`` at some indentation."""
    pattern = rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}\b"
    return text is not None and re.search(pattern, text, re.MULTILINE) is not None


def unsafe(nodeid: str) -> str:
    # Node ids become arguments: one that looks like an option or leaves the worktree is refused.
    path = PurePosixPath(nodeid.split("::", 1)[0])
    if nodeid.startswith("-") or path.is_absolute() or ".." in path.parts:
        return f"refused to re-run {nodeid!r}: not a repository-relative test id"
    return ""
