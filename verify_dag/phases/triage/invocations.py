"""The project's own command lines of the tools verify-dag runs itself (the registry's).

tox ``commands``, Makefile recipes, CI ``run:`` lines and pre-commit hooks may run mypy or
``ruff check`` with targets and options (`mypy typing-examples`, `ruff check pkg tests
--select E`). Each tool's module reads its own command line (which options take a value, which
configure the check) and says which programs and `python -m` modules run it (its
``declarations``); here a line is only recognised as one of them, the way it is written to run:
directly, through `python -m`, or a runner (`uv run`, ...). Several declarations of one tool are
merged into one command whose targets are their union.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verify_dag.tools import REGISTRY, precommit

_RUNNER = re.compile(r"^(?:uv run|uvx|poetry run|pipenv run|hatch run|pdm run|pipx run)\s+")
_SHELL = re.compile(r"[$`|<>]|^\w+=")  # a line that needs a shell: its words are not its argv
# A tox factor condition before a command (`mypy: mypy src`, `py3{10,11}-lint,!pypy:`).
_FACTORS = re.compile(r"^!?[\w{}.,-]+(?:,!?[\w{}.,-]+)*:\s+")


@dataclass(frozen=True)
class Line:
    tool: str  # the ToolSpec the line runs: "mypy" (stubtest included) or "ruff"
    argv: tuple[str, ...]  # starting with the program: mypy, stubtest or ruff
    source: str


def _modules() -> dict[str, str]:
    """`python -m MODULE` -> the program it runs as, for every registry tool."""
    return {m: p for s in REGISTRY.values() if s.declarations for m, p in s.declarations.modules}


def _programs() -> dict[str, str]:
    """A command line's program -> the registry tool it runs."""
    return {p: s.name for s in REGISTRY.values() if s.declarations for p in s.declarations.programs}


def read(text: str, source: str) -> Line | None:
    """``text`` as a declared command line of a registry tool, or None when it is not one or
    needs a shell (its words would not be the arguments the tool sees)."""
    text = _RUNNER.sub("", text.strip().lstrip("@-+ ").strip())
    if _SHELL.search(text):
        return None
    try:
        argv = shlex.split(text)
    except ValueError:
        return None
    if len(argv) >= 3 and re.fullmatch(r"(?:\S*/)?(?:python[\d.]*|py)", argv[0]):
        modules = _modules()
        if argv[1] != "-m" or argv[2] not in modules:
            return None
        argv = [modules[argv[2]], *argv[3:]]
    if not argv:
        return None
    program = argv[0].rsplit("/", 1)[-1]
    tool = _programs().get(program)
    return None if tool is None else Line(tool, (program, *argv[1:]), source)


def read_precommit(workdir: Path) -> list[Line]:
    """The registry tools' runs in ``.pre-commit-config.yaml``: a mirror hook's entry with its
    ``args``, a local hook's ``entry``. pre-commit hands a hook the changed files it matches
    (its ``files`` / ``exclude``, which the static phase applies) unless ``pass_filenames:
    false``; only then do the hook's own arguments name its targets."""
    out: list[Line] = []
    for hook in precommit.read(workdir).hooks:
        spec = precommit.mirrored(hook)
        if spec is not None and spec.mirror is not None:
            args = spec.mirror.args if hook.args is None else hook.args
            text = shlex.join([*spec.mirror.entry, *args])
        elif hook.repo == "local" and hook.entry is not None:
            text = shlex.join([*shlex.split(hook.entry), *(hook.args or ())])
        else:
            continue
        line = read(text, f"{precommit.CONFIG} hook {hook.id}")
        if line is None:
            continue
        declarations = REGISTRY[line.tool].declarations
        if hook.pass_filenames and declarations is not None:
            # The files are the changed ones, whatever the entry names besides.
            line = Line(line.tool, declarations.options_only(line.argv), line.source)
        out.append(line)
    return out


def unfactor(line: str) -> str:
    """A tox ``commands`` line without its factor condition: every env's commands count."""
    return _FACTORS.sub("", line, count=1)


def merge(tool: str, lines: Sequence[Line]) -> tuple[tuple[str, ...], str] | None:
    """(argv, where it was declared) of ``tool``'s declarations together, or None."""
    spec = REGISTRY.get(tool)
    if spec is None or spec.declarations is None:
        return None
    argv = spec.declarations.merge([(x.argv, x.source) for x in lines])
    if argv is None:
        return None
    # The lines of the program that runs (mypy's own before stubtest's).
    used = [x for x in lines if x.argv[0] == argv[0]]
    return argv, "; ".join(dict.fromkeys(x.source for x in used))
