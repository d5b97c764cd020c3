"""The one way verify-dag names content by a hash: the result cache's entries
(verify_dag/resultcache.py) and an unchanged re-verify's kept answer (verify_dag/cli/replay.py),
which is looked up before anything heavier than this is imported."""

from __future__ import annotations

import hashlib


def key(*parts: str) -> str:
    """The sha256 of ``parts``, each length-prefixed so that no two lists collide."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogateescape")
        h.update(f"{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()
