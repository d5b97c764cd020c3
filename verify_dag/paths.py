"""Where verify-dag keeps what it builds between runs, and where the user's configuration is.

Below everything that reads them: the sandbox exposes the cache read-only to repository code, the
tester's environments live in it, the model backends read the configuration and redaction masks
the secrets it holds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from verify_dag.errors import UsageError

CACHE_VAR = "VERIFY_DAG_CACHE"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_VAR) or Path.home() / ".cache" / "verify-dag")


def user_file(env: Mapping[str, str]) -> Path | None:
    """The user's config file: $VERIFY_DAG_CONFIG (which must exist), else
    $XDG_CONFIG_HOME/verify-dag/config.toml when there is one."""
    explicit = env.get("VERIFY_DAG_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise UsageError(f"VERIFY_DAG_CONFIG: no such file: {path}")
        return path
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    path = Path(base).expanduser() / "verify-dag" / "config.toml"
    return path if path.is_file() else None
