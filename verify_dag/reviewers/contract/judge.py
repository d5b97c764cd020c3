"""Criteria without an oracle, judged by a configured model backend (or UNVERIFIABLE).

The prompt is the request, the criterion and the diff (plus the ``--test`` result when one ran);
the reply is asked for as ``{"status": "MET"|"NOT-MET"|"UNVERIFIABLE", "reason": ...,
"location": ...}`` and also read as a first line ``MET — reason`` / ``NOT-MET — reason``. A backend
that is missing, fails, or replies with anything else leaves the criterion UNVERIFIABLE with the
reason: a judgement that did not happen is never a MET.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verify_dag import backends
from verify_dag.backends import Backend

SKILL = "contract"
DIFF_MAX = 60_000  # characters of diff in one prompt
_LINE = re.compile(
    r"^[\s*>#`-]*\**(MET|NOT[- ]MET|UNVERIFIABLE)\**\b\s*(?:[\u2014\u2013:-]+\s*)?"
    r"(.*)$",
    re.IGNORECASE,
)

Judged = Literal["MET", "NOT-MET", "UNVERIFIABLE"]


@dataclass(frozen=True)
class Judgement:
    status: Judged
    reason: str
    location: str | None = None


def prompt(
    request: str, number: int, criterion: str, diff: str, diff_range: str, test: str | None
) -> str:
    if len(diff) > DIFF_MAX:
        diff = diff[:DIFF_MAX] + f"\n[... diff truncated at {DIFF_MAX} characters ...]\n"
    test_part = f"\nTEST COMMAND RESULT:\n{test}\n" if test else ""
    return (
        "You verify ONE acceptance criterion of a contract against an implemented diff. You are "
        "not the developer and you fix nothing. Judge only from the diff below"
        f"{' and the test result' if test else ''}: never mark MET from naming, comments or "
        "plausibility, only from code you read. If the diff does not let you decide, say "
        "UNVERIFIABLE with the precise reason.\n\n"
        f"REQUEST:\n{request.strip()}\n\nCRITERION {number}:\n{criterion}\n{test_part}\n"
        f"DIFF ({diff_range}):\n{diff or '(empty diff)'}\n\n"
        'Reply with one JSON object and nothing else: {"status": "MET" | "NOT-MET" | '
        '"UNVERIFIABLE", "reason": "<one sentence: the evidence for MET; expected vs actual for '
        'NOT-MET>", "location": "<file:line or empty>"}\n'
    )


def parse(reply: str) -> Judgement | None:
    """The judgement in a reply, or None when it states none."""
    for m in re.finditer(r"\{[^{}]*\}", reply):
        try:
            data = json.loads(m.group(0))
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("status"), str):
            status = _status(data["status"])
            if status is not None:
                location = data.get("location")
                return Judgement(
                    status,
                    _one_line(str(data.get("reason") or "")) or "(no reason given)",
                    _one_line(location) if isinstance(location, str) and location.strip() else None,
                )
    for line in reply.splitlines():
        hit = _LINE.match(line)
        if hit and (status := _status(hit.group(1))) is not None:
            return Judgement(status, _one_line(hit.group(2)) or "(no reason given)")
    return None


def _status(text: str) -> Judged | None:
    word = text.strip().upper().replace(" ", "-").replace("_", "-")
    if word == "MET":
        return "MET"
    if word == "NOT-MET":
        return "NOT-MET"
    return "UNVERIFIABLE" if word == "UNVERIFIABLE" else None


def _one_line(text: str, limit: int = 400) -> str:
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


def judge(backend: Backend | None, text: str, *, cwd: Path, how: str = "") -> Judgement:
    """Ask ``backend`` about one criterion (``text`` is the whole prompt)."""
    if backend is None:
        return Judgement(
            "UNVERIFIABLE",
            "no oracle and no model backend configured" + (f" ({how})" if how else ""),
        )
    reply = backends.invoke(backend, text, cwd=cwd)
    who = backend.describe()
    if reply.status != "ok":
        return Judgement("UNVERIFIABLE", f"model backend {who} {reply.status}: {reply.reason}")
    judged = parse(reply.text)
    if judged is None:
        first = _one_line(reply.text.strip().splitlines()[0] if reply.text.strip() else "", 120)
        return Judgement("UNVERIFIABLE", f"model backend {who} gave no verdict: {first!r}")
    return Judgement(judged.status, f"model judgement ({who}): {judged.reason}", judged.location)
