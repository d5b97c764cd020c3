"""The project's declaration files that do not parse, found with the parsers that read them.

A change that breaks its own ``pyproject.toml`` (or tox.ini, setup.cfg, noxfile.py, setup.py,
.pre-commit-config.yaml) has a problem of its own, not the caller's: the run reports it as a
finding on the file's line (phases/static) and runs what can still run without the file (a
tester that cannot build its env from it, or a linter that cannot read its configuration, says
so and points at that finding instead of raising one of its own).

Each file is read the way the tool that reads it reads it: TOML as pip, tox and ruff do
(tomllib), INI files with the strict ConfigParser tox and setuptools use, Python files compiled
as nox and setuptools would import them, YAML with PyYAML's safe loader as pre-commit does.
Nothing of the repository is executed.
"""

from __future__ import annotations

import configparser
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import yaml

from verify_dag.models.toolchain import Broken

# tomllib (Python 3.11) puts the position in its message only: "... (at line 3, column 9)".
_TOML_AT = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)$")

_READING = re.compile(r"^While reading from .*? \[line \d+\]: ")

# Files whose failure to parse stops every tool that reads configuration from them: the build
# of the test env (pip, setuptools) and the linters (ruff, mypy, pytest read pyproject.toml,
# setup.cfg and tox.ini).
CONFIGURING = frozenset({"pyproject.toml", "setup.cfg", "tox.ini", "setup.py"})


def _toml(text: str) -> tuple[int, int | None, str] | None:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        m = _TOML_AT.search(message)
        if m is None:
            return 1, None, message
        if m.group(1) is None:  # at the end of the document
            return max(1, text.count("\n") + (0 if text.endswith("\n") else 1)), None, message
        return int(m.group(1)), int(m.group(2)), message[: m.start()]
    return None


def _ini(text: str) -> tuple[int, int | None, str] | None:
    parser = configparser.ConfigParser(interpolation=None)
    # Option names as written: setuptools keeps their case, so "Name" and "name" are two.
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.MissingSectionHeaderError as exc:
        return exc.lineno, None, f"line {exc.lineno} comes before any [section] header"
    except configparser.ParsingError as exc:
        # Every bad line is listed; the first is where a reader looks.
        line, text_of = exc.errors[0] if exc.errors else (1, "")
        return line, None, f"cannot parse line {line}: {text_of}"  # the line, repr'd
    except configparser.Error as exc:
        line = getattr(exc, "lineno", None) or 1
        return int(line), None, _READING.sub("", " ".join(str(exc).split()))
    return None


def _python(text: str) -> tuple[int, int | None, str] | None:
    try:
        compile(text, "<declaration>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return exc.lineno or 1, exc.offset or None, exc.msg
    except ValueError as exc:  # a NUL byte
        return 1, None, str(exc)
    return None


def _yaml(text: str) -> tuple[int, int | None, str] | None:
    try:
        yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        column = mark.column + 1 if mark is not None else None
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        return line, column, what or str(exc)
    except yaml.YAMLError as exc:
        return 1, None, str(exc)
    return None


# file name -> (its parser's name, the check).
PARSERS: dict[str, tuple[str, Callable[[str], tuple[int, int | None, str] | None]]] = {
    "pyproject.toml": ("TOML", _toml),
    "tox.toml": ("TOML", _toml),
    "tox.ini": ("INI", _ini),
    "setup.cfg": ("INI", _ini),
    "setup.py": ("Python", _python),
    "noxfile.py": ("Python", _python),
    ".pre-commit-config.yaml": ("YAML", _yaml),
    ".pre-commit-config.yml": ("YAML", _yaml),
}


# What stops on each file, and what verify-dag ran instead where something still could.
_PRE_COMMIT = (
    "pre-commit stops on it; its pinned linter versions and hook file patterns were not used: "
    "the linters ran at verify-dag's own versions."
)
CONSEQUENCE: dict[str, str] = {
    "pyproject.toml": (
        "Building the project, pytest, ruff, mypy and tox stop on it: the test env cannot be "
        "built from it."
    ),
    "tox.toml": "tox stops on it: the suite ran in the env the rest of the project declares.",
    "tox.ini": (
        "tox stops on it (and pytest, where it holds pytest's configuration): the suite ran in "
        "the env the rest of the project declares."
    ),
    "setup.cfg": "setuptools, pytest and the linters that read it stop on it.",
    "setup.py": "Building the project stops on it: the test env cannot be built from it.",
    "noxfile.py": "nox stops on it: the suite ran in the env the rest of the project declares.",
    ".pre-commit-config.yaml": _PRE_COMMIT,
    ".pre-commit-config.yml": _PRE_COMMIT,
}


def check(name: str, text: str) -> Broken | None:
    """``text`` of the declaration file ``name`` (a key of PARSERS) as its parser sees it."""
    parser, parse = PARSERS[name]
    failed = parse(text)
    if failed is None:
        return None
    line, column, message = failed
    return Broken(path=name, line=line, column=column, parser=parser, message=message.strip())


def broken(workdir: Path) -> tuple[Broken, ...]:
    """The declaration files at the top of ``workdir`` that do not parse, in PARSERS' order."""
    out = []
    for name in PARSERS:
        path = workdir / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            out.append(Broken(path=name, line=1, column=None, parser="UTF-8", message=str(exc)))
            continue
        except OSError:
            continue  # unreadable here is not the change's doing
        found = check(name, text)
        if found is not None:
            out.append(found)
    return tuple(out)


def named(found: tuple[Broken, ...], names: frozenset[str] | set[str]) -> tuple[Broken, ...]:
    return tuple(b for b in found if b.path in names)


def because(found: tuple[Broken, ...]) -> str:
    """Why a tool could not run, in one clause: "pyproject.toml does not parse (line 1)"."""
    return "; ".join(f"{b.path} does not parse (line {b.line}: {b.message})" for b in found)
