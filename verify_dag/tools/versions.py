"""The version an analyser ran at, read from its distribution's metadata in the environment it
ran from: nothing is run, so reading it costs a directory listing, not a process."""

from __future__ import annotations

import functools
import importlib.metadata
import re
import shutil
from collections.abc import Sequence
from pathlib import Path


def installed(name: str, argv: Sequence[str], path_var: str) -> str | None:
    """The version of distribution ``name`` in the environment ``argv`` runs from (its program
    or the interpreter of ``python -m name``); None when that cannot be told (a system binary,
    a project's own lint command, a tool the environment does not hold)."""
    if not argv:
        return None
    program = argv[0] if Path(argv[0]).is_absolute() else shutil.which(argv[0], path=path_var)
    if program is None:
        return None
    return _version(name, Path(program).parent.parent)


@functools.cache
def _version(name: str, prefix: Path) -> str | None:
    wanted = re.sub(r"[-_.]+", "-", name).lower()
    sites = [
        *sorted(prefix.glob("lib/python3*/site-packages")),
        *sorted(prefix.glob("lib64/python3*/site-packages")),
    ]
    if not sites:
        return None
    # Found by its .dist-info directory's normalised name (what ``name=`` matches), so only the
    # one distribution's METADATA is parsed: reading every one's to compare names parsed the 146
    # of verify-dag's own env for each lookup, most of a CLI run's time in importlib.metadata.
    for dist in importlib.metadata.distributions(name=name, path=[str(s) for s in sites]):
        if re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower() == wanted:
            return dist.version
    return None
