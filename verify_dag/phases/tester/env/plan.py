"""What a repository declares for its test environment (test requirements, tox's [testenv], the
project and its test extra), and the cache key of that declaration."""

from __future__ import annotations

import ast
import configparser
import hashlib
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from verify_dag.phases.tester.env.base import RECIPE

# Test requirements first (the first pattern that matches wins), then the runtime ones.
_TEST_REQUIREMENTS = (
    "requirements-test*.txt",
    "requirements_test*.txt",
    "requirements/test*.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "requirements-dev.txt",
    "requirements_dev.txt",
    "requirements/dev*.txt",
)
_EXTRAS = ("test", "tests", "testing", "dev")
SKIP = frozenset({".git", "node_modules", ".tox", ".nox", ".venv", "__pycache__"})
_INCLUDE = re.compile(r"^(?:-r|-c|--requirement|--constraint)[\s=]*(\S+)")
_SELF = re.compile(r"^(?:(?:-e|--editable)[\s=]*)?(?:file:)?\./?(?:\[[^\]]*\])?$")
_LOCAL = re.compile(r"^(?:(?:-e|--editable)[\s=]*)?(?:file:)?(\.{1,2}/\S*)")


@dataclass(frozen=True)
class Plan:
    requirements: tuple[str, ...]  # repo-relative files passed to pip with -r
    tox_lines: tuple[str, ...]  # tox deps, written to a requirements file in the build's copy
    project: str | None  # "." or ".[extra]": the project's own dependencies are wanted
    source: str
    hashed: tuple[str, ...]  # repo-relative files and directories whose bytes make the key


def read(workdir: Path) -> Plan | None:
    reqs = _test_requirements(workdir)
    tox = None if reqs else (_tox(workdir) or _nox(workdir))
    if tox is None and (workdir / "requirements.txt").is_file() and reqs != ["requirements.txt"]:
        reqs.append("requirements.txt")  # the runtime dependencies the tests import
    declared, extra = _project(workdir)
    spec = (f".[{extra}]" if extra else ".") if declared else None
    sources, tox_lines = list(reqs), tuple[str, ...]()
    if tox is not None:
        tox_lines, skip_install, extras = tox
        sources = [
            "tox.ini [testenv] deps"
            if (workdir / "tox.ini").is_file()
            else "noxfile.py session.install"
        ]
        if declared:
            spec = None if skip_install else f".[{extras}]" if extras else "."
    if not reqs and not tox_lines and spec is None:
        return None
    hashed = {
        p
        for p in ("pyproject.toml", "setup.py", "setup.cfg", "tox.ini", "noxfile.py")
        if (workdir / p).is_file()
    }
    hashed |= _references(workdir, tox_lines, "")
    for req in reqs:
        hashed |= {req, *_references(workdir, _lines(workdir / req), os.path.dirname(req))}
    every = [ln for r in reqs for ln in _lines(workdir / r)] + list(tox_lines)
    if any(ln and _SELF.match(ln) for ln in every):
        spec = None  # `-e .` in a requirements file: the project comes in from there
    elif spec is not None:
        sources.append(f"{declared} {spec}")
    return Plan(tuple(reqs), tuple(tox_lines), spec, ", ".join(sources), tuple(sorted(hashed)))


def _test_requirements(workdir: Path) -> list[str]:
    for pattern in _TEST_REQUIREMENTS:
        found = sorted(p for p in workdir.glob(pattern) if p.is_file())
        if found:
            return [found[0].relative_to(workdir).as_posix()]
    return []


def _project(workdir: Path) -> tuple[str | None, str | None]:
    """(the file declaring an installable project, the test extra it defines)."""
    pyproject = workdir / "pyproject.toml"
    if pyproject.is_file():
        table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project")
        if isinstance(table, dict) and table.get("name"):
            extras = table.get("optional-dependencies") or {}
            return "pyproject.toml", next((e for e in _EXTRAS if e in extras), None)
    if (workdir / "setup.py").is_file():
        return "setup.py", None
    return None, None


def _tox(workdir: Path) -> tuple[tuple[str, ...], bool, str] | None:
    """tox's [testenv]: (deps lines, skip_install, extras). Substitutions other than
    {toxinidir} cannot be evaluated here, so lines holding one are left out."""
    if not (workdir / "tox.ini").is_file():
        return None
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(workdir / "tox.ini", encoding="utf-8")
    if not cfg.has_option("testenv", "deps"):
        return None
    lines = (ln.strip().replace("{toxinidir}", ".") for ln in cfg["testenv"]["deps"].splitlines())
    kept = tuple(ln for ln in lines if ln and not ln.startswith("#") and "{" not in ln)
    skip = cfg.get("testenv", "skip_install", fallback="false").strip().lower() == "true"
    extras = ",".join(cfg.get("testenv", "extras", fallback="").replace(",", " ").split())
    return kept, skip, extras


_NOX_TEST_SESSION = re.compile(r"^(tests?|pytest|unit|unittests?)$")


def _nox(workdir: Path) -> tuple[tuple[str, ...], bool, str] | None:
    """noxfile.py's test session, read without running it: the string arguments of its
    ``session.install(...)`` calls, in the same shape as tox's (deps lines, skip_install, extras).
    The project counts as installed only when the session installs "." (or ".[extra]")."""
    path = workdir / "noxfile.py"
    if not path.is_file():
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None
    sessions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list]
    session = next((n for n in sessions if _NOX_TEST_SESSION.match(n.name)), None)
    if session is None:
        return None
    lines: list[str] = []
    installs_self, extras = False, ""
    for call in ast.walk(session):
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "install"
        ):
            continue
        args = [
            a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        i = 0
        while i < len(args):
            arg = args[i]
            if arg in {"-r", "--requirement", "-c", "--constraint"} and i + 1 < len(args):
                lines.append(f"{arg} {args[i + 1]}")
                i += 2
                continue
            if arg in {"-e", "--editable"}:
                i += 1
                continue
            if m := re.match(r"^\.(?:\[([^\]]*)\])?$", arg):
                installs_self, extras = True, m.group(1) or extras
            else:
                lines.append(arg)
            i += 1
    return tuple(lines), not installs_self, extras


def _lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [ln.split(" #")[0].strip() for ln in text.splitlines() if not ln.startswith("#")]


def _references(
    workdir: Path, lines: list[str] | tuple[str, ...], base: str, seen: frozenset[str] = frozenset()
) -> set[str]:
    """The files requirement ``lines`` include (-r/-c, relative to their file) and the local
    directories they install (relative to pip's working directory, the checkout's root), as
    repo-relative paths: their bytes decide what the env contains, so they make the key."""
    out: set[str] = set()
    for line in lines:
        if m := _INCLUDE.match(line):
            inc = os.path.normpath(os.path.join(base, m.group(1)))
            path = workdir / inc
            if inc not in seen and path.is_file() and _inside(workdir, path):
                out |= {
                    inc,
                    *_references(workdir, _lines(path), os.path.dirname(inc), seen | {inc}),
                }
        elif (
            (m := _LOCAL.match(line))
            and (target := workdir / m.group(1).split("[")[0]).is_dir()
            and _inside(workdir, target)
            and target.resolve() != workdir.resolve()
        ):
            out.add(target.resolve().relative_to(workdir.resolve()).as_posix())
    return out


def _inside(workdir: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(workdir.resolve())


def key(workdir: Path, plan: Plan) -> str:
    h = hashlib.sha256(
        f"{RECIPE}\0{sys.version}\0{os.path.realpath(sys.executable)}\0"
        f"{plan.requirements}\0{plan.tox_lines}\0{plan.project}\0".encode()
    )
    for rel in plan.hashed:
        for path in _files(workdir / rel):
            h.update(path.relative_to(workdir).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            yield Path(dirpath) / name
