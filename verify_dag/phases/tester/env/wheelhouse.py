"""Wheels of a project's build requirements, fetched while its env is built, for the builds its
suite runs itself.

Some suites build their own project: pytest-checkdocs (jaraco's projects) reads the long
description from metadata that ``build`` makes in an isolated env, and packaging tools test their
builds. Such a build installs the project's build requirements from the index, which the suite's
sandbox does not reach: the item would fail here and pass for its maintainers. So the wheels of
``[build-system] requires`` are downloaded once per requirement set (by pip, wheels only: no
package code runs) into verify-dag's cache, and the suite's pip and uv find them there offline
(``PIP_FIND_LINKS`` with ``PIP_NO_INDEX``, ``UV_FIND_LINKS``), read-only.
"""

from __future__ import annotations

import hashlib
import sys
import time
import tomllib
from dataclasses import replace
from pathlib import Path

from verify_dag import processes
from verify_dag.files import file_lock
from verify_dag.phases.tester.env.base import Env, left, pip_env
from verify_dag.sandbox import Policy

_READY = ".verify-dag-ready"
_DEFAULT = ("setuptools>=40.8.0",)  # PEP 517's fallback for a project without [build-system]


def requirements(workdir: Path) -> tuple[str, ...]:
    """The project's build requirements (PEP 518), with ``wheel`` where setuptools builds."""
    try:
        table = tomllib.loads((workdir / "pyproject.toml").read_text(encoding="utf-8"))
        found = table.get("build-system", {}).get("requires", list(_DEFAULT))
    except (OSError, ValueError):
        found = list(_DEFAULT) if (workdir / "setup.py").is_file() else []
    reqs = [str(r) for r in found if isinstance(r, str)]
    return tuple(sorted({*reqs, *(["wheel"] if any("setuptools" in r for r in reqs) else [])}))


def fetched(workdir: Path, cache: Path, timeout: float = 300) -> Path | None:
    """The directory of the wheels of ``workdir``'s build requirements, fetched when missing;
    None when there are none or they cannot be fetched (the suite then runs as before, and a
    build of its own fails there as it would have)."""
    reqs = requirements(workdir)
    if not reqs:
        return None
    key = hashlib.sha256(f"{sys.version}\0{reqs}".encode()).hexdigest()[:24]
    house = cache / "wheels" / key
    house.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    with file_lock(house.with_suffix(".lock"), deadline) as got:
        if got and not (house / _READY).exists():
            house.mkdir(exist_ok=True)
            pip = [sys.executable, "-m", "pip", "download", "--only-binary", ":all:"]
            res = processes.run(
                [*pip, "--dest", str(house), *reqs],
                timeout=left(deadline),
                env={**pip_env(), "PIP_NO_CACHE_DIR": "1"},
                sandbox=Policy(network=True, writable=(house,)),
            )
            if res.returncode == 0 and not res.timed_out:
                (house / _READY).touch()
    return house if (house / _READY).exists() else None


def offline(env: Env, workdir: Path, cache: Path) -> Env:
    """``env`` with the suite's pip and uv pointed at the wheelhouse, which it may read."""
    house = fetched(workdir, cache)
    if house is None:
        return env
    found = (("PIP_FIND_LINKS", str(house)), ("PIP_NO_INDEX", "1"), ("UV_FIND_LINKS", str(house)))
    return replace(env, variables=(*found, *env.variables), readable=(*env.readable, house))
