"""Where verify-dag keeps what it builds between runs, and where the user's configuration is.

Below everything that reads them: the sandbox exposes the cache read-only to repository code
(but for :func:`private_roots`), the tester's environments live in it, the model backends read
the configuration and redaction masks the secrets it holds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from verify_dag.errors import UsageError

CACHE_VAR = "VERIFY_DAG_CACHE"
RESULT_CACHE_VAR = "VERIFY_DAG_RESULT_CACHE"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_VAR) or Path.home() / ".cache" / "verify-dag")


def runs_root() -> Path:
    """The runs' checkouts on this host (verify_dag/workspace.py)."""
    return cache_root() / "runs"


def tools_root() -> Path:
    """The tools' own caches, one per project (mypy's)."""
    return cache_root() / "tools"


def results_root() -> Path:
    """The result cache (verify_dag/resultcache.py)."""
    explicit = os.environ.get(RESULT_CACHE_VAR, "").strip()
    return Path(explicit).expanduser() if explicit else cache_root() / "results"


def private_roots() -> list[Path]:
    """What of the cache belongs to one run or one project: other runs' checkouts, other
    projects' tool caches, and results of every project. Repository code sees none of it but
    what its own step is given (sandbox.py); the envs beside them stay readable."""
    return [runs_root(), tools_root(), results_root()]


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
