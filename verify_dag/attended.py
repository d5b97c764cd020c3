"""Whether a person can answer a question here: the one rule for every prompt (verify's
interactive mode, the completion verifier's mode gate). No prompt may ever block a pipeline."""

from __future__ import annotations

import os
import sys
from typing import TextIO


def nobody() -> str | None:
    """Why nobody can answer here; None when a person at a terminal can: CI set, or stdin or
    stdout not a terminal."""
    if os.environ.get("CI", "").strip() not in ("", "0", "false"):
        return "nobody attached (CI is set)"
    if not _tty(sys.stdin):
        return "nobody attached (stdin is not a terminal)"
    if not _tty(sys.stdout):
        return "nobody attached (stdout is not a terminal)"
    return None


def _tty(stream: TextIO | None) -> bool:
    # A closed or detached stream (a daemon's, pythonw's) is no terminal either.
    try:
        return stream is not None and stream.isatty()
    except ValueError:
        return False
