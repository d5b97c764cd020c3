"""One weakening the floor guard found, and how its line is shown."""

from __future__ import annotations

from dataclasses import dataclass

from verify_dag import processes

SNIPPET_MAX = 120


@dataclass(frozen=True)
class Weakening:
    kind: str
    path: str
    line: int
    snippet: str
    marker: str = ""  # the pattern's name (noqa, pytest.skip, ...): what a waiver may quote


def snippet(text: str, limit: int = SNIPPET_MAX) -> str:
    """One line, secrets redacted, capped."""
    folded = " ".join(processes.redact(text).split())
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


def norm(text: str) -> str:
    return " ".join(text.split())
