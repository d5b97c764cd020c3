"""What both halves of the debugger share: a failure signature and how a verdict is written.

Tests are re-run in :mod:`~verify_dag.phases.debugger`, exerciser failures in
:mod:`~verify_dag.phases.debugger.exercise`; both report the same Diagnosis shape from these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

from verify_dag import processes
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
    why, text = processes.redact(why), processes.redact(output)
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


# How pytest's output says where a failure broke, what it raised, and how many ran.
_CRASH = re.compile(r"^(?P<path>[^\s:]+\.py):\d+: (?P<exc>[A-Za-z_][\w.]*)[ \t]*$", re.MULTILINE)
_EXC_MESSAGE = re.compile(r"^(?P<exc>[A-Za-z_][\w.]*)(?::|$)")  # "ValueError: x" -> ValueError
_HUNG = re.compile(r"Timeout \(>[\d.]+s\) from pytest-timeout")
_E_LINE = re.compile(r"^E\s+(?P<text>\S.*)$", re.MULTILINE)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


def hung(output: str) -> bool:
    """Whether pytest-timeout stopped the test (its words in pytest's output)."""
    return _HUNG.search(output) is not None


def branch_signature(findings: list[Finding]) -> tuple[str | None, str]:
    """(exception class, first message line) of the failure as the tester recorded it."""
    for f in findings:
        crash = list(_CRASH.finditer(f.description))
        message = next(
            (
                ln.strip()
                for ln in f.description.splitlines()
                if ln.strip() and not ln.startswith("Error outside the test body")
            ),
            "",
        )
        if crash:
            return crash[-1]["exc"], message
        m = _EXC_MESSAGE.match(message)
        if m:
            return m["exc"], message
        # pytest's rewritten assertions report "assert <expr>" with no class in the message.
        if message == "assert" or message.startswith("assert "):
            return "AssertionError", message
        if message:
            return None, message
    return None, ""


def base_signature(output: str) -> tuple[str | None, str]:
    crash = list(_CRASH.finditer(output))
    first_e = _E_LINE.search(output)
    return (crash[-1]["exc"] if crash else None), (first_e["text"].strip() if first_e else "")


def counts(stdout: str) -> dict[str, int]:
    # pytest's summary: the last line with counts (through tox, tox's own lines follow it).
    out: dict[str, int] = {}
    for line in reversed(stdout.splitlines()):
        if found := _COUNT.findall(line):
            for n, kind in found:
                out[kind.removesuffix("s") if kind == "errors" else kind] = int(n)
            break
    return out


def summary(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "no result line"
