"""The project's own command lines of the tools verify-dag runs itself (mypy, ruff).

tox ``commands``, Makefile recipes, CI ``run:`` lines and pre-commit hooks may run mypy or
``ruff check`` with targets and options (`mypy typing-examples`, `ruff check pkg tests
--select E`); stubtest, mypy's stub checker, type-checks its modules with mypy. Each tool's
module reads its own command line (which options take a value, which configure the check);
here a line is only recognised as one of them, the way it is written to run: directly,
through `python -m`, or a runner (`uv run`, ...). Several declarations of one tool are merged
into one command whose targets are their union.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from verify_dag.tools import mypy_config, pinned, ruff

_RUNNER = re.compile(r"^(?:uv run|uvx|poetry run|pipenv run|hatch run|pdm run|pipx run)\s+")
_SHELL = re.compile(r"[$`|<>]|^\w+=")  # a line that needs a shell: its words are not its argv
# `python -m X` as the program X runs as.
_MODULES = {"mypy": "mypy", "mypy.stubtest": "stubtest", "ruff": "ruff"}
# A tox factor condition before a command (`mypy: mypy src`, `py3{10,11}-lint,!pypy:`).
_FACTORS = re.compile(r"^!?[\w{}.,-]+(?:,!?[\w{}.,-]+)*:\s+")
# pre-commit/mirrors-mypy's hook arguments when the project sets none.
_MIRROR_MYPY_ARGS = ("--ignore-missing-imports",)


@dataclass(frozen=True)
class Line:
    tool: str  # the ToolSpec the line runs: "mypy" (stubtest included) or "ruff"
    argv: tuple[str, ...]  # starting with the program: mypy, stubtest or ruff
    source: str


def read(text: str, source: str) -> Line | None:
    """``text`` as a declared mypy/stubtest/ruff command line, or None when it is not one or
    needs a shell (its words would not be the arguments the tool sees)."""
    text = _RUNNER.sub("", text.strip().lstrip("@-+ ").strip())
    if _SHELL.search(text):
        return None
    try:
        argv = shlex.split(text)
    except ValueError:
        return None
    if len(argv) >= 3 and re.fullmatch(r"(?:\S*/)?(?:python[\d.]*|py)", argv[0]):
        if argv[1] != "-m" or argv[2] not in _MODULES:
            return None
        argv = [_MODULES[argv[2]], *argv[3:]]
    if not argv:
        return None
    program = argv[0].rsplit("/", 1)[-1]
    if program in ("mypy", "stubtest"):
        return Line("mypy", (program, *argv[1:]), source)
    if program == "ruff":
        return Line("ruff", ("ruff", *argv[1:]), source)
    return None


# What a mirror hook runs before the project's ``args`` (its .pre-commit-hooks.yaml `entry`),
# and the `args` it has when the project gives none.
_HOOK_ENTRY = {"ruff": ("ruff check --force-exclude", ()), "mypy": ("mypy", _MIRROR_MYPY_ARGS)}


def read_precommit(workdir: Path) -> list[Line]:
    """The mypy and ruff runs of ``.pre-commit-config.yaml``: a mirror hook's entry with its
    ``args``, a local hook's ``entry``. pre-commit hands a hook the changed files it matches
    (its ``files`` / ``exclude``, which the static phase applies) unless ``pass_filenames:
    false``; only then do the hook's own arguments name its targets."""
    path = workdir / pinned.CONFIG
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    out: list[Line] = []
    for repo in data.get("repos") or () if isinstance(data, dict) else ():
        if not isinstance(repo, dict):
            continue
        m = re.search(r"github\.com[/:]([^/]+/[^/]+?)(?:\.git)?/?$", str(repo.get("repo", "")))
        mirror = pinned.HOOKS.get(m.group(1).lower(), {}) if m else {}
        for hook in repo.get("hooks") or ():
            if not isinstance(hook, dict):
                continue
            args = hook.get("args")
            args = [str(a) for a in args] if isinstance(args, list) else None
            known = mirror.get(str(hook.get("id", "")))
            if known is not None:
                entry, default = _HOOK_ENTRY[known[0]]
                text = shlex.join([*shlex.split(entry), *(default if args is None else args)])
            elif repo.get("repo") == "local" and isinstance(hook.get("entry"), str):
                text = shlex.join([*shlex.split(hook["entry"]), *(args or ())])
            else:
                continue
            line = read(text, f"{pinned.CONFIG} hook {hook.get('id')}")
            if line is None:
                continue
            if hook.get("pass_filenames", True) is not False:
                # The files are the changed ones, whatever the entry names besides.
                line = Line(line.tool, _without_targets(line), line.source)
            out.append(line)
    return out


def _without_targets(line: Line) -> tuple[str, ...]:
    if line.tool == "mypy":
        d = mypy_config.declared(line.argv)
        return ("mypy", *d.options) if d is not None else line.argv
    r = ruff.declared(line.argv)
    return ("ruff", "check", *r.options) if r is not None else line.argv


def unfactor(line: str) -> str:
    """A tox ``commands`` line without its factor condition: every env's commands count."""
    return _FACTORS.sub("", line, count=1)


def _mypy(lines: Sequence[Line]) -> tuple[str, ...] | None:
    found = [d for x in lines if (d := mypy_config.declared(x.argv, x.source)) is not None]
    one = mypy_config.merged(found)
    return None if one is None else one.argv()


def _ruff(lines: Sequence[Line]) -> tuple[str, ...] | None:
    found = [d for x in lines if (d := ruff.declared(x.argv, x.source)) is not None]
    one = ruff.merged(found)
    return None if one is None else one.argv()


# tool -> the one command line its declarations amount to (None: none of them checks code).
MERGE: dict[str, Callable[[Sequence[Line]], tuple[str, ...] | None]] = {
    "mypy": _mypy,
    "ruff": _ruff,
}


def merge(tool: str, lines: Sequence[Line]) -> tuple[tuple[str, ...], str] | None:
    """(argv, where it was declared) of ``tool``'s declarations together, or None."""
    build = MERGE.get(tool)
    argv = build(lines) if build is not None else None
    if argv is None:
        return None
    used = [x for x in lines if tool != "mypy" or x.argv[0] == argv[0]]
    return argv, "; ".join(dict.fromkeys(x.source for x in used))
