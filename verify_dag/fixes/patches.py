"""Patches as text, made from whole-file edits.

A fix travels from a worker to the client as a unified diff with ``a/`` and ``b/`` prefixes, the
form ``git apply`` takes, made against the verified commit. Making it here (difflib) rather than
asking a model for a diff: models write line-range replacements far more reliably than hunks.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from verify_dag.errors import VerifyDagError

_NO_EOL = "\\ No newline at end of file\n"


class BadEdit(VerifyDagError):
    """An edit that cannot be made into a patch (a range outside the file, a path outside it)."""


@dataclass(frozen=True)
class Edit:
    """Lines ``start``..``end`` (1-based, inclusive; ``end == start - 1`` inserts before
    ``start``) of ``path`` replaced by ``text``."""

    path: str
    start: int
    end: int
    text: str


def unified(path: str, old: str, new: str) -> str:
    """The patch that turns ``old`` into ``new`` (``path``'s text); "" when they are equal."""
    if old == new:
        return ""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out = [f"diff --git a/{path} b/{path}\n"]
    for line in difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", n=3):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:  # the file's last line, without a newline: git says so after it
            out.append(line + "\n" + _NO_EOL)
    return "".join(out)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with ``edits`` (all of one file, not overlapping) made, bottom to top."""
    lines = text.splitlines(keepends=True)
    last = None
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        if e.start < 1 or e.end < e.start - 1 or e.end > len(lines):
            raise BadEdit(f"{e.path}: lines {e.start}-{e.end} are not in the file")
        if last is not None and e.end >= last:
            raise BadEdit(f"{e.path}: edits overlap at line {e.end}")
        body = e.text if not e.text or e.text.endswith("\n") else e.text + "\n"
        lines[e.start - 1 : e.end] = body.splitlines(keepends=True)
        last = e.start
    return "".join(lines)
