"""ToolSpec: an external analyser declared as data (diff_cover style).

A spec says how to build the command line, which exit codes mean "ran", how to read the output
and rate each finding, and (``discovery``) how triage tells that a project uses the tool. Running
it is :mod:`verify_dag.tools.runner`'s business. Parsers are pure functions of the output so they
can be tested on captured text. Each tool's severities are one table of :class:`Rating` rows
(docs/static.md prints them).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from verify_dag.models.findings import IssueClass
from verify_dag.models.toolchain import Command, CommandKind

# Executable names that mean "a Python interpreter": `python -m X` found in a config is run with
# our own interpreter, so that what triage reports as existing is what the phases execute.
PYTHON_NAMES = frozenset({"python", "python3", "py"})
PY_SUFFIXES = frozenset({".py", ".pyi"})


@dataclass(frozen=True)
class RawFinding:
    """One diagnostic as a tool printed it; ``path`` is repo-relative when it is inside the repo."""

    path: str
    line: int | None
    col: int | None
    code: str | None
    message: str
    severity: str = ""  # the tool's own word: error, warning, note, ... ("" when it gave none)
    url: str | None = None  # the rule's documentation, when the tool names it (ruff does)


@dataclass(frozen=True)
class Invocation:
    """What a spec builds one command line from."""

    files: Sequence[str]  # repo-relative; every file at once for specs that take an argfile
    workdir: Path  # the checkout the tool runs in (its configuration is read from there)
    # A fresh directory outside the checkout, writable inside the sandbox and removed after the
    # run: caches and argument files go there, never into the project.
    scratch: Path
    python: Path | None = None  # the project's interpreter, when its environment is known
    # The tool's own incremental cache for this project, kept between runs (ToolSpec.own_cache),
    # held by this run alone while it runs; None: use a throwaway one in ``scratch``.
    cache: Path | None = None


@dataclass(frozen=True)
class Rating:
    """One row of a tool's severity table: what a rule's finding means."""

    severity: int  # 1-10, docs/report.md's scale
    issue_class: IssueClass
    why: str  # the reason, as docs/static.md prints it


Parser = Callable[[str, str, Path], list[RawFinding]]
# A declared type checker's error fails the project's own type check: 004 rates "Build/typecheck
# errors and test failures" severity 9-10.
TYPECHECK_ERROR = 9
# (finding) -> (severity 1-10, issue class); see each spec for the mapping and why.
Rater = Callable[[RawFinding], tuple[int, IssueClass]]
# (workdir, files the spec applies to) -> (the files the project's configuration gives the tool,
# a remark naming the rest and why, "" when none were left out).
Selector = Callable[[Path, Sequence[str]], tuple[list[str], str]]
# (findings on scoped lines, everything the run printed, workdir) -> what is reported: a tool
# whose findings depend on each other (mypy's missing imports) settles them as a whole.
Settler = Callable[[list[RawFinding], list[RawFinding], Path], list[RawFinding]]


@dataclass(frozen=True)
class Discovery:
    """How triage finds a Python tool verify-dag runs itself, from the checkout's config alone:
    ``[tool.<name>]`` in pyproject.toml and the tool among its dev dependencies always count."""

    kind: CommandKind  # "lint" or "typecheck"
    argv: tuple[str, ...]  # the command as the toolchain shows it
    module: str  # what `python -m` runs: the tool exists when our interpreter or PATH has it
    config_files: tuple[str, ...] = ()  # files at the top whose presence means it is configured
    ini_sections: tuple[str, ...] = ()  # setup.cfg / tox.ini sections ([mypy] and [mypy-*])
    # Run on any Python project, configured or not, under this source name.
    default_source: str | None = None


# (argv, where it was declared) of each of a project's command lines of one tool -> the one
# command line they amount to together; None when none of them checks code.
Merger = Callable[[Sequence[tuple[tuple[str, ...], str]]], tuple[str, ...] | None]


@dataclass(frozen=True)
class Declarations:
    """How the project's own command lines of the tool (tox ``commands``, Makefile recipes, CI
    ``run:`` lines, pre-commit hooks) are recognised and read, so that it runs as the project
    runs it: its targets and check options."""

    programs: tuple[str, ...]  # a line's first word that runs it: "mypy", "stubtest"
    # `python -m MODULE` -> the program that line runs as.
    modules: tuple[tuple[str, str], ...]
    spec: Callable[[Command], ToolSpec]  # the spec that runs a toolchain Command of the tool
    merge: Merger
    # A line without its targets, its options kept: pre-commit passes the files itself.
    options_only: Callable[[tuple[str, ...]], tuple[str, ...]]


@dataclass(frozen=True)
class Mirror:
    """pre-commit hook repositories that only wrap the PyPI release of the same version: the
    hook's ``rev`` pins the package, which comes from the package index (this host cannot
    clone the hook repository)."""

    repos: tuple[str, ...]  # owner/name on GitHub, in lower case
    hooks: tuple[str, ...]  # the hook ids that run the tool
    entry: tuple[str, ...]  # what the hook runs before its ``args`` (.pre-commit-hooks.yaml)
    args: tuple[str, ...] = ()  # the hook's ``args`` when the project sets none


@dataclass(frozen=True)
class ToolSpec:
    name: str
    # -> argv; None when the tool cannot be found at all.
    argv: Callable[[Invocation], list[str] | None]
    ok_exit_codes: frozenset[int]
    parse: Parser
    rate: Rater
    # Files the tool is given; empty means it runs as discovered over the whole project and its
    # output is filtered afterwards.
    suffixes: frozenset[str] = frozenset()
    # Rule codes a tool prints while exiting outside ok_exit_codes because it stopped early on
    # them (mypy's blocking syntax errors exit 2): seeing one means the tool did run.
    blocking_rules: frozenset[str] = frozenset()
    takes_files: bool = True
    # The spec passes its files in a file the tool reads (never on the command line), so the
    # runner gives it every file in one run: no argument list grows with the change.
    argfile: bool = False
    # Each file's findings depend on that file alone (and the configuration and layout): the
    # result cache keeps them file by file, so an edit re-checks only the edited file.
    per_file: bool = False
    # The tool keeps an incremental cache that is safe across commits (it checks each file's
    # content before trusting an entry): the runner gives it a directory kept per project.
    own_cache: bool = False
    # The tool never writes into the checkout it checks: the sandbox mounts it read-only.
    read_only: bool = False
    select: Selector | None = None  # None: every applicable file is the tool's
    settle: Settler | None = None  # None: findings are reported one by one as printed
    # Undocumented exit codes (generic commands): a non-zero exit that came with parseable
    # diagnostics is read as "ran and found something"; without any, as "could not run".
    findings_explain_exit: bool = False
    discovery: Discovery | None = None  # None: run only when a discovered command names it
    # The PyPI distribution: a mirror hook's ``rev`` pins it, its metadata says which version
    # ran, and its version is part of every cached result's key. None: no package of ours.
    package: str | None = None
    declarations: Declarations | None = None  # None: the project's command lines are not read
    mirror: Mirror | None = None

    def applies_to(self, path: str) -> bool:
        return not self.suffixes or Path(path).suffix.lower() in self.suffixes


def module_available(module: str) -> bool:
    """Whether ``sys.executable -m module`` would find the module (checked without running it)."""
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def python_tool_argv(module: str, python: Path | None = None) -> list[str] | None:
    """How to run a Python tool: with ``python`` (the project's interpreter), that environment's
    own copy when it installed one (the version the project pins, its plugins beside it), else
    our interpreter when it has the module (PATH does not matter), else the executable on PATH,
    else None."""
    # An environment that installed the tool has its console script beside the interpreter;
    # looking for it runs nothing of the project's.
    if python is not None and (python.parent / module).is_file():
        return [str(python), "-m", module]
    if module_available(module):
        return [sys.executable, "-m", module]
    exe = shutil.which(module)
    return [exe] if exe else None


def resolve_argv(argv: Sequence[str]) -> list[str]:
    """A discovered command as it is executed: `python -m X` runs on our interpreter."""
    out = list(argv)
    if len(out) >= 3 and Path(out[0]).name in PYTHON_NAMES and out[1] == "-m":
        out[0] = sys.executable
    return out


def command_exists(argv: Sequence[str]) -> bool:
    """The executable resolves; for `python -m X`, X is importable by our interpreter."""
    if not argv:
        return False
    if len(argv) >= 3 and Path(argv[0]).name in PYTHON_NAMES and argv[1] == "-m":
        return module_available(argv[2])
    return shutil.which(argv[0]) is not None


def relative(path: str, workdir: Path) -> str:
    """A tool's path as repo-relative POSIX text; paths outside the repo are returned unchanged."""
    p = Path(path)
    if p.is_absolute():
        try:
            return p.resolve().relative_to(workdir.resolve()).as_posix()
        except ValueError:
            return path
    text = p.as_posix()
    return text[2:] if text.startswith("./") else text
