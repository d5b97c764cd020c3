"""pytest on verify-dag's own interpreter, for a project that declares nothing to install.

Such a project's suite is run by the pytest beside verify-dag: the tester's run and the
exerciser's and the debugger's re-runs alike. pytest loads every plugin installed there, and some
arrive with verify-dag's own dependencies (anyio's through httpx, platformdirs' through tox and
virtualenv). They are not the project's: the env its maintainers run a suite with no dependencies
in has neither, and a plugin can change what a suite collects and how it runs. Every such run
turns them off by name (``-p no:<name>``), which also spares it their imports: a one-test suite
0.58 -> 0.33 s of CPU. A plugin installed there by anything else (the project's own dev venv,
pytest-xdist) is not verify-dag's and loads as before.
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import json
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from verify_dag.files import write_atomic
from verify_dag.phases.tester.env import bytecode
from verify_dag.tools.base import python_tool_argv

DIST = "verify-dag"
GROUP = "pytest11"  # pytest's entry-point group for plugins


def pytest_argv() -> list[str] | None:
    """How a test of such a project is (re-)run: :func:`python_tool_argv`'s pytest, with
    :func:`not_ours` when it is verify-dag's interpreter's."""
    found = python_tool_argv("pytest")
    if found is None or found[0] != sys.executable:
        return found
    return [*found, *not_ours()]


def not_ours() -> list[str]:
    """pytest options turning off the plugins that verify-dag's own dependencies installed."""
    return [arg for name in dependency_plugins() for arg in ("-p", f"no:{name}")]


@functools.cache
def dependency_plugins() -> tuple[str, ...]:
    """The names of the pytest plugins that distributions verify-dag requires provide (its
    runtime requirements, transitively, extras included as requested; not its dev extra).

    Reading every installed distribution's metadata takes about 0.1 s, so the answer is kept
    beside the interpreter's bytecode tree, under the same key (what is installed changes it).
    """
    try:
        kept: Path | None = bytecode.location() / f"{bytecode.key()}.pytest-plugins.json"
    except OSError:
        kept = None
    if kept is not None:
        try:
            names = json.loads(kept.read_text(encoding="utf-8"))
            if isinstance(names, list) and all(isinstance(n, str) for n in names):
                return tuple(names)
        except (OSError, ValueError):
            pass
    found = _dependency_plugins()
    if kept is not None:
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(kept, json.dumps(found).encode())
        except OSError:
            pass  # found again next time
    return found


def _dependency_plugins() -> tuple[str, ...]:
    # One walk of the installed distributions: looking each one up by name walks them all again.
    installed: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name is not None:
            installed.setdefault(canonicalize_name(name), dist)
    names: set[str] = set()
    for name in _requirements_closure(DIST, installed):
        names.update(ep.name for ep in installed[name].entry_points if ep.group == GROUP)
    return tuple(sorted(names))


def _requirements_closure(root: str, installed: dict[str, metadata.Distribution]) -> set[str]:
    """``root`` and every installed distribution it requires, transitively."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[str, frozenset[str]]] = [(canonicalize_name(root), frozenset())]
    while todo:
        item = todo.pop()
        name, extras = item
        if item in seen or name not in installed:
            continue
        seen.add(item)
        for line in installed[name].requires or []:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            wanted = req.marker is None or any(
                req.marker.evaluate({"extra": extra}) for extra in (*extras, "")
            )
            if wanted:
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return {name for name, _ in seen}
