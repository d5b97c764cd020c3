"""A venv of the linters at the versions the project pins, over the project's own env.

The static tools must run as the project runs them: the ruff and mypy its pre-commit config pins
(with the hook's ``additional_dependencies``), resolving imports against what the project's env
installed. This venv holds the pinned tools; a .pth file adds the project env's site-packages
after its own, so ``python -m mypy`` here is the pinned mypy and sees the project's
dependencies, and mypy's ``--python-executable`` may point at it. uv installs the pins (fast, and
cached under verify-dag's cache); the venv itself is cached by what it holds and which env it
extends, and built once under a lock.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verify_dag import processes
from verify_dag.files import file_lock, write_atomic
from verify_dag.phases.tester.env.base import (
    MARKER,
    RECIPE,
    left,
    pip_env,
    purelib,
    redacted,
    tail,
    uv_install,
)
from verify_dag.tools.pinned import Pin


@dataclass(frozen=True)
class ToolEnv:
    python: Path | None  # None: the pins could not be installed (``error`` says why)
    error: str | None = None


def build(pins: Sequence[Pin], project: Path | None, cache: Path, timeout: float = 600) -> ToolEnv:
    """The tools venv for ``pins`` over the env of the ``project`` interpreter (None: over
    nothing, the pinned tools alone)."""
    wanted = sorted({p.requirement for p in pins} | {e for p in pins for e in p.extra})
    h = hashlib.sha256(f"{RECIPE}\0tools\0{sys.version}\0{project}\0{wanted}".encode())
    key = h.hexdigest()[:24]
    root = cache / "tools"
    root.mkdir(parents=True, exist_ok=True)
    venv = root / key
    deadline = time.monotonic() + timeout
    with file_lock(root / f"{key}.lock", deadline) as got:
        if not got:
            return ToolEnv(None, "timed out waiting for another run building the same tools")
        python = venv / "bin" / "python"
        if (venv / MARKER).is_file() and python.exists():
            return ToolEnv(python)
        shutil.rmtree(venv, ignore_errors=True)
        error = _build(venv, wanted, project, cache, deadline)
        if error is not None:
            shutil.rmtree(venv, ignore_errors=True)
            return ToolEnv(None, redacted(error))
        write_atomic(venv / MARKER, json.dumps({"pins": wanted}).encode("utf-8"))
    return ToolEnv(python)


def _build(
    venv: Path, wanted: list[str], project: Path | None, cache: Path, deadline: float
) -> str | None:
    res = processes.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        timeout=left(deadline),
        env=pip_env(),
    )
    if res.returncode != 0 or res.timed_out:
        return f"python -m venv failed: {tail(res)}"
    python = venv / "bin" / "python"
    # Wheels first, from uv's shared cache, while the venv sees nothing of the project's env (its
    # .pth files would run when uv asks the interpreter about itself); an sdist among the pins
    # is built with a private cache.
    res = uv_install(python, wanted, cache=cache, deadline=deadline, shared=True)
    if res.returncode != 0 and not res.timed_out:
        res = uv_install(python, wanted, cache=cache, deadline=deadline)
    if res.returncode != 0 or res.timed_out:
        return f"installing {' '.join(wanted)} failed: {tail(res)}"
    if project is not None:
        ours = purelib(python)
        theirs = purelib(project)
        if ours is None or theirs is None:
            return "could not locate the site-packages of the tools' or the project's env"
        (ours / "_verify_dag_project.pth").write_text(
            f"import site; site.addsitedir({str(theirs)!r})\n", encoding="utf-8"
        )
    return None
