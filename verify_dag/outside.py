"""What this process asked of the world beyond git: commands other than git (counted by the
subprocess chokepoint, verify_dag/processes.py, found or not, sandboxed or not) and model calls
(verify_dag/backends/http.py). A run during which the count stayed put computed nothing its
commits, its settings and the result cache had not already decided (verify_dag/cli/replay.py)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

_LOCK = threading.Lock()
_COUNT = [0]


def calls() -> int:
    """How many commands other than git, and model calls, this process has made so far."""
    with _LOCK:
        return _COUNT[0]


def call() -> None:
    with _LOCK:
        _COUNT[0] += 1


def command(argv: Sequence[str]) -> None:
    if os.path.basename(argv[0]) != "git":
        call()
