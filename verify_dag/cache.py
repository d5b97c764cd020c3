"""Where verify-dag keeps what it builds between runs (test environments, node_modules).

One place, because the sandbox must expose it read-only to the repository code it runs, and it
sits below both the sandbox and the tester's environments.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_VAR = "VERIFY_DAG_CACHE"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_VAR) or Path.home() / ".cache" / "verify-dag")
