"""What to exercise when nothing is declared: the probes the project's own declarations give
for a change (the exercise that runs them: :mod:`~verify_dag.phases.exerciser.derived`).

- **console scripts** (``[project.scripts]``, poetry's ``[tool.poetry.scripts]``, setup.cfg's
  ``console_scripts``): each command whose package the change touches is run with ``--help``,
  and so is each subcommand the changed lines define (``add_parser("x")``, ``@cli.command()``);
- **an importable package**: every changed module of it is imported in the run's environment,
  and its doctests are run where the project runs doctests itself (pytest's
  ``--doctest-modules``, ``python -m doctest``, a ``DocTestSuite``): elsewhere a docstring's
  examples are documentation nobody runs, often not written to pass, and a failure of one would
  be verify-dag's false alarm.
"""

from __future__ import annotations

import configparser
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from verify_dag.models import Scope
from verify_dag.phases.exerciser.probes import DOCTEST, Probe

MAX_PROBES = 20
# Files that run when the project is used; a change to none of them has nothing to exercise.
CODE_SUFFIXES = frozenset(
    {".py", ".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".go", ".rs", ".rb", ".java", ".kt"}
    | {".c", ".cc", ".cpp", ".h", ".hpp", ".cs", ".php", ".swift", ".scala", ".sh"}
)
_NOT_RUN_DIRS = frozenset(
    {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "bench"}
)
_NOT_MODULES = frozenset({"setup.py", "conftest.py", "noxfile.py", "fabfile.py"})
# Subcommands a changed line defines: argparse's add_parser("x"), click's or typer's
# @group.command("x") / @group.command() above "def x".
_ADD_PARSER = re.compile(r"""add_parser\(\s*["']([\w-]+)["']""")
_NAMED = re.compile(r"""@\w+(?:\.\w+)*\.command\(\s*(?:name\s*=\s*)?["']([\w-]+)["']""")
_BARE = re.compile(r"@\w+(?:\.\w+)*\.command\(\s*\)\s*(?:@.*\s*)*def\s+(\w+)")


@dataclass(frozen=True)
class Strategy:
    probes: tuple[Probe, ...]
    root: Path  # where the project's modules import from (the checkout, or its src/)
    code_changed: bool  # whether the change touches code at all
    why_none: str  # with no probe: why nothing could be derived


def strategy(wt: Path, scope: Scope) -> Strategy:
    """What the project's declarations say to run for this change."""
    changed = [f.path for f in scope.included if f.status != "deleted"]
    code = [p for p in changed if runs(p)]
    root = wt / "src" if (wt / "src").is_dir() else wt
    modules = {m: p for p in code if (m := module_name(wt, p)) is not None}
    probes: list[Probe] = []
    declared = scripts(wt)
    # A changed module that is a script's own module defines subcommands of that script only
    # (black's and blackd's); any other changed module may define them for any script of its
    # package.
    owners = {t.partition(":")[0].strip() for _, t in declared}
    for name, target in declared:
        own = target.partition(":")[0].strip()
        package = own.split(".")[0]
        if not any(m == package or m.startswith(package + ".") for m in modules):
            continue
        probes.append(Probe(f"{name} --help", (name, target, "--help"), "command"))
        defining = [p for m, p in modules.items() if m == own or m not in owners]
        for sub in subcommands(wt, scope, defining):
            probes.append(Probe(f"{name} {sub} --help", (name, target, sub, "--help"), "command"))
    if runs_doctests(wt):
        probes += [
            Probe(f"import {m} (and its doctests)", (m, DOCTEST), "module") for m in sorted(modules)
        ]
    else:
        probes += [Probe(f"import {m}", (m,), "module") for m in sorted(modules)]
    why = ""
    if not probes:
        why = (
            "the change touches no code (documentation, tests or configuration only)"
            if not code
            else "no console script or importable module of the project covers the changed "
            f"code ({', '.join(code[:5])}{' ...' if len(code) > 5 else ''})"
        )
    unique = tuple(dict.fromkeys(probes))[:MAX_PROBES]
    return Strategy(probes=unique, root=root, code_changed=bool(code), why_none=why)


# Where a project says it runs doctests: its pytest configuration, its test envs and sessions,
# its Makefile, its root conftest.
_DOCTEST_DECLARING = (
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "tox.toml",
    "noxfile.py",
    "hatch.toml",
    "Makefile",
    "conftest.py",
)
_DOCTEST_RUN = re.compile(r"--doctest-modules|-m\s+doctest\b|DocTestSuite|doctest\.testmod")


def runs_doctests(wt: Path) -> bool:
    """Whether the project runs its modules' doctests itself; only then is a failing example
    its own check failing."""
    for name in _DOCTEST_DECLARING:
        try:
            text = (wt / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _DOCTEST_RUN.search(text):
            return True
    return False


def runs(path: str) -> bool:
    """Whether ``path`` is code that runs when the project is used: not a test, an example,
    documentation or a build file (a change to those alone has nothing to exercise)."""
    p = PurePosixPath(path)
    name = p.name
    if p.suffix not in CODE_SUFFIXES or name in _NOT_MODULES or _NOT_RUN_DIRS & set(p.parts[:-1]):
        return False
    stem = name.split(".", 1)[0]
    test_like = stem.startswith("test_") or stem.endswith(("_test", "_tests"))
    return not test_like and ".test." not in name and ".spec." not in name


def module_name(wt: Path, path: str) -> str | None:
    """The dotted name ``path`` imports as, when it is a module of an importable package (or a
    top-level module of a src/ layout); None for tests, scripts and build files."""
    p = PurePosixPath(path)
    if p.suffix != ".py" or not runs(path):
        return None
    parts = list(p.with_suffix("").parts)
    if parts[0] == "src" and (wt / "src").is_dir():
        parts, base = parts[1:], wt / "src"
        if len(parts) == 1:
            return parts[0]
    else:
        base = wt
        if len(parts) == 1:  # a script at the top: importing it would run it
            return None
    for depth in range(1, len(parts)):
        if not (base.joinpath(*parts[:depth]) / "__init__.py").is_file():
            return None
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts[-1] == "__main__" or not all(part.isidentifier() for part in parts):
        return None
    return ".".join(parts)


def scripts(wt: Path) -> list[tuple[str, str]]:
    """(command, "module:function") of every console script the project declares."""
    found: list[tuple[str, str]] = []
    try:
        doc = tomllib.loads((wt / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        doc = {}
    project = _table(doc.get("project"))
    poetry = _table(_table(doc.get("tool")).get("poetry"))
    for table in (project.get("scripts"), poetry.get("scripts")):
        if isinstance(table, dict):
            found += [(n, t) for n, t in table.items() if isinstance(t, str) and ":" in t]
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read(wt / "setup.cfg", encoding="utf-8")
        block = cfg.get("options.entry_points", "console_scripts", fallback="")
    except configparser.Error:
        block = ""
    for line in block.splitlines():
        name, _, target = line.partition("=")
        if name.strip() and ":" in target:
            found.append((name.strip(), target.strip()))
    return list(dict.fromkeys(found))


def _table(value: object) -> dict[str, object]:
    # A declaration of another shape (a broken pyproject.toml) declares no script.
    return value if isinstance(value, dict) else {}


def subcommands(wt: Path, scope: Scope, paths: list[str]) -> list[str]:
    """Subcommands the changed lines of ``paths`` define."""
    names: list[str] = []
    for path in paths:
        change = scope.file(path)
        try:
            lines = (wt / path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        ranges = change.lines if change is not None and change.lines is not None else None
        spans = [(r.start, r.end) for r in ranges] if ranges is not None else [(1, len(lines))]
        for start, end in spans:
            # A decorator's function is on a line or two below it.
            text = "\n".join(lines[start - 1 : end + 3])
            names += _ADD_PARSER.findall(text) + _NAMED.findall(text)
            names += [n.replace("_", "-") for n in _BARE.findall(text)]
    return list(dict.fromkeys(names))
