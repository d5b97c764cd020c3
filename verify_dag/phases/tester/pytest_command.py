"""A repository's own pytest command line, as the tester keeps it.

Triage finds where a repository says how it runs pytest (an engineer skill, a Makefile test
target, tox ``commands``, CI); the tester still runs pytest itself, once, under coverage.py, in
the provisioned env, with its own junit report. From the declared line it keeps everything that
selects or configures the tests (paths, node ids, ``-k``, ``-m``, ``-p``, ``-o``, ``--ignore``,
``-x``, ...), so the counts are the ones the repository's own run gives, and drops only the
options in ``_DROPPED``, each of which would break that one run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from verify_dag.models.toolchain import Command

if TYPE_CHECKING:
    from verify_dag.phases.tester.env.base import Env

_PYTHON = re.compile(r"^(?:python(?:\d+(?:\.\d+)*)?|py)$")
_RUNNERS = frozenset({"uv", "poetry", "pipenv", "hatch", "pdm"})  # `<runner> run pytest ...`
# A token a shell would have interpreted: the line's arguments cannot be taken literally.
_SHELL_TOKEN = re.compile(r"[$`]|^(?:\|\|?|&&?|;|\d?>>?.*|<.*)$")

_CACHE = "needs pytest's cache, which verify-dag disables (-p no:cacheprovider) for a clean run"
_COVERAGE = "coverage is measured by verify-dag's own coverage.py run"
_REPORT = "verify-dag writes and reads its own junit report"
_RUN = "the suite must run, once, in this process"
_XDIST = (
    "xdist workers are not measured by coverage.py's run; the suite runs in one process, "
    "with the same tests"
)
# option -> (takes a separate value when written without "=", why it is dropped)
_DROPPED: dict[str, tuple[bool, str]] = {
    **{
        o: (False, _CACHE)
        for o in (
            "--lf",
            "--last-failed",
            "--ff",
            "--failed-first",
            "--nf",
            "--new-first",
            "--sw",
            "--stepwise",
            "--sw-skip",
            "--stepwise-skip",
            "--sw-reset",
            "--stepwise-reset",
            "--cache-clear",
            "--cache-show",
        )
    },
    **{o: (True, _CACHE) for o in ("--lfnf", "--last-failed-no-failures")},
    **{
        o: (False, _COVERAGE)
        for o in ("--cov-append", "--cov-branch", "--no-cov", "--no-cov-on-fail")
    },
    **{
        o: (True, _COVERAGE)
        for o in (
            "--cov-report",
            "--cov-config",
            "--cov-fail-under",
            "--cov-context",
            "--cov-precision",
        )
    },
    **{
        o: (True, _REPORT) for o in ("--junitxml", "--junit-xml", "--junitprefix", "--junit-prefix")
    },
    "--rootdir": (True, "verify-dag roots the run at the checkout, for repository-relative ids"),
    **{
        o: (False, _RUN)
        for o in (
            "--co",
            "--collect-only",
            "--collectonly",
            "--setup-only",
            "--setup-plan",
            "--pdb",
            "--trace",
        )
    },
    "--pdbcls": (True, _RUN),
    **{o: (True, _XDIST) for o in ("-n", "--numprocesses", "--maxprocesses", "--dist")},
}
_XDIST_SHORT = re.compile(r"^-n(?:\d+|auto|logical)$")
_NO_JUNIT = ("no:junitxml", "no:junit")


def args(argv: Sequence[str]) -> tuple[str, ...] | None:
    """The arguments ``argv`` gives pytest, or None when ``argv`` does not run pytest.

    Recognised: ``pytest``, ``py.test``, ``python -m pytest``, ``coverage run [opts] -m pytest``
    (also through ``python -m coverage``), each optionally after ``uv run`` and the like.
    """
    argv = tuple(argv)
    if len(argv) > 2 and argv[0] in _RUNNERS and argv[1] == "run":
        argv = argv[2:]
    if not argv:
        return None
    head = Path(argv[0]).name
    if head in ("pytest", "py.test"):
        return argv[1:]
    rest = argv[1:]
    if _PYTHON.match(head) and rest[:1] == ("-m",) and len(rest) > 1:
        if rest[1] == "pytest":
            return rest[2:]
        head, rest = rest[1], rest[2:]
    if head == "coverage" and rest[:1] == ("run",):
        for i in range(1, len(rest) - 1):
            if rest[i] == "-m" and rest[i + 1] == "pytest":
                return rest[i + 2 :]
            if not rest[i].startswith("-"):
                return None  # `coverage run script.py`: not pytest
    return None


def literal(argv: Sequence[str]) -> bool:
    """Whether ``argv`` holds no shell syntax (pipes, redirections, variables), so its tokens are
    the arguments pytest would have received."""
    return not any(_SHELL_TOKEN.search(tok) for tok in argv)


def selection(declared: Sequence[str]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(the declared arguments the tester passes on, (dropped text, why) for the others)."""
    kept: list[str] = []
    dropped: list[tuple[str, str]] = []
    i = 0
    while i < len(declared):
        start, tok = i, declared[i]
        i += 1
        if tok == "--":
            kept.extend(declared[start:])
            break
        name = tok.split("=", 1)[0] if tok.startswith("--") else tok
        why: str | None = None
        if name == "--cov":
            why = _COVERAGE
            # pytest-cov's --cov takes an optional value: argparse gives it the next token
            # unless that one is an option.
            if "=" not in tok and i < len(declared) and not declared[i].startswith("-"):
                i += 1
        elif name in _DROPPED:
            takes_value, why = _DROPPED[name]
            if takes_value and "=" not in tok:
                i = min(i + 1, len(declared))
        elif _XDIST_SHORT.match(tok):
            why = _XDIST
        elif tok == "-p" and declared[i : i + 1] and declared[i] in _NO_JUNIT:
            why, i = _REPORT, i + 1
        elif tok.startswith("-p") and tok[2:] in _NO_JUNIT:
            why = _REPORT
        if why is None:
            kept.append(tok)
        else:
            dropped.append((" ".join(declared[start:i]), why))
    return tuple(kept), tuple(dropped)


# The declared options that configure how pytest runs rather than which tests it selects: a
# single failing test re-run at the merge base needs these (a plugin, an ini override, a config
# file, warnings as errors), and none of the selection (paths, -k, -m) of the whole suite.
_CONFIG_VALUED = frozenset(
    {
        "-p",
        "-o",
        "--override-ini",
        "-c",
        "--config-file",
        "-W",
        "--pythonwarnings",
        "--import-mode",
        "--confcutdir",
    }
)
_CONFIG_FLAGS = frozenset({"--noconftest", "--strict-markers", "--strict-config"})


def config_options(declared: Sequence[str]) -> tuple[str, ...]:
    """The configuring part of the arguments the tester keeps (see :func:`selection`)."""
    kept, _ = selection(declared)
    out: list[str] = []
    i = 0
    while i < len(kept):
        tok = kept[i]
        name = tok.split("=", 1)[0]
        if tok == "--":
            break
        if name in _CONFIG_VALUED and "=" in tok and tok.startswith("--"):
            out.append(tok)
        elif name in _CONFIG_VALUED and i + 1 < len(kept):
            out += [tok, kept[i + 1]]
            i += 1
        elif tok in _CONFIG_FLAGS or (
            tok[:2] in ("-p", "-o", "-W", "-c") and len(tok) > 2 and not tok.startswith("--")
        ):
            out.append(tok)  # --strict-markers, or -pxdist / -Werror glued to its value
        i += 1
    return tuple(out)


def dropped_note(dropped: tuple[tuple[str, str], ...]) -> str:
    """Why options of the declared command were left out, for the tester's notes."""
    if not dropped:
        return ""
    return "; not passed on from the declared command: " + ", ".join(
        f"{text} ({why})" for text, why in dropped
    )


def from_env(env: Env) -> Command | None:
    """The first of the commands an env declares (a tox env's ``commands``, a hatch env's
    pytest line) that runs pytest, as the tester's test command."""
    for argv in env.declared_commands:
        if args(argv) is not None:
            return Command(
                kind="test",
                argv=argv,
                source=f"{env.source} commands",
                exists=True,
                tool="pytest",
            )
    return None
