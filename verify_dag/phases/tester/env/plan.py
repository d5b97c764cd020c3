"""What a repository without tox or nox declares for its test environment (test requirements, the
project and its test extra, its PEP 735 dependency groups), and the cache key of that declaration.

tox and nox projects are not read here: tox and nox build their envs (env/tox.py, env/nox.py).
Dependency groups are not read either, only named: uv installs them (``--group``), and resolves
``include-group`` as the standard says."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from verify_dag.phases.tester.env.base import HASH_SKIP, RECIPE, build_inputs, hash_tree

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
# PEP 735 groups a test run needs, by the names projects give them; all that exist are installed.
_GROUPS = ("test", "tests", "testing", "dev")
SKIP = HASH_SKIP
_INCLUDE = re.compile(r"^(?:-r|-c|--requirement|--constraint)[\s=]*(\S+)")
_SELF = re.compile(r"^(?:(?:-e|--editable)[\s=]*)?(?:file:)?\./?(?:\[[^\]]*\])?$")
_LOCAL = re.compile(r"^(?:(?:-e|--editable)[\s=]*)?(?:file:)?(\.{1,2}/\S*)")


@dataclass(frozen=True)
class InstallPlan:
    requirements: tuple[str, ...]  # repo-relative files passed to pip with -r
    groups: tuple[str, ...]  # PEP 735 dependency groups of pyproject.toml, installed by uv
    project: str | None  # "." or ".[extra]": the project's own dependencies are wanted
    source: str
    hashed: tuple[str, ...]  # repo-relative files and directories whose bytes make the key
    # pdm's and poetry's own dev groups, as PEP 508 lines (a requirements file in the build copy)
    group_lines: tuple[str, ...] = ()


def read(workdir: Path) -> InstallPlan | None:
    reqs = _test_requirements(workdir)
    if (workdir / "requirements.txt").is_file() and reqs != ["requirements.txt"]:
        reqs.append("requirements.txt")  # the runtime dependencies the tests import
    declared, extra, groups = _project(workdir)
    spec = (f".[{extra}]" if extra else ".") if declared else None
    sources = list(reqs) + [f"pyproject.toml [dependency-groups] {g}" for g in groups]
    hashed = {p for p in ("pyproject.toml", "setup.py", "setup.cfg") if (workdir / p).is_file()}
    hashed |= set(build_inputs(workdir))
    for req in reqs:
        hashed |= {req, *_references(workdir, _lines(workdir / req), os.path.dirname(req))}
    every = [ln for r in reqs for ln in _lines(workdir / r)]
    if any(ln and _SELF.match(ln) for ln in every):
        spec = None  # `-e .` in a requirements file: the project comes in from there
    elif spec is not None:
        sources.append(f"{declared} {spec}")
    lines, named = _tool_groups(workdir)
    sources += named
    if not reqs and not groups and not lines and spec is None:
        return None
    return InstallPlan(
        tuple(reqs), groups, spec, ", ".join(sources), tuple(sorted(hashed)), tuple(lines)
    )


def _tool_groups(workdir: Path) -> tuple[list[str], list[str]]:
    """(requirement lines, where they come from) of the test groups pdm or poetry declare in
    their own tables. pdm's are PEP 508 already; poetry's constraints (``^8.0``) are poetry's
    own language, so poetry-core, which defines it, turns them into PEP 508."""
    pyproject = workdir / "pyproject.toml"
    if not pyproject.is_file():
        return [], []
    tool = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {})
    lines: list[str] = []
    named: list[str] = []
    pdm = tool.get("pdm", {}).get("dev-dependencies", {}) if isinstance(tool, dict) else {}
    for group in (g for g in _GROUPS if isinstance(pdm, dict) and g in pdm):
        # `-e file:///${PROJECT_ROOT}/...`: the project itself, which comes in as the project.
        lines += [str(r) for r in pdm[group] if "${PROJECT_ROOT}" not in str(r)]
        named.append(f"pyproject.toml [tool.pdm.dev-dependencies] {group}")
    poetry = tool.get("poetry", {}) if isinstance(tool, dict) else {}
    if isinstance(poetry, dict) and (poetry.get("group") or poetry.get("dev-dependencies")):
        from poetry.core.factory import Factory  # imported late: only poetry projects need it

        package = Factory().create_poetry(workdir).package
        for group in sorted(set(_GROUPS) & package.dependency_group_names()):
            lines += [d.to_pep_508() for d in package.dependency_group(group).dependencies]
            named.append(f"pyproject.toml [tool.poetry.group.{group}]")
    return lines, named


def _test_requirements(workdir: Path) -> list[str]:
    for pattern in _TEST_REQUIREMENTS:
        found = sorted(p for p in workdir.glob(pattern) if p.is_file())
        if found:
            return [found[0].relative_to(workdir).as_posix()]
    return []


def _project(workdir: Path) -> tuple[str | None, str | None, tuple[str, ...]]:
    """(the file declaring an installable project, the test extra it defines, its test
    dependency groups)."""
    pyproject = workdir / "pyproject.toml"
    if pyproject.is_file():
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        declared = data.get("dependency-groups")
        groups = tuple(g for g in _GROUPS if isinstance(declared, dict) and g in declared)
        table = data.get("project")
        if isinstance(table, dict) and table.get("name"):
            extras = table.get("optional-dependencies") or {}
            return "pyproject.toml", next((e for e in _EXTRAS if e in extras), None), groups
        if groups:
            return None, None, groups
    if (workdir / "setup.py").is_file():
        return "setup.py", None, ()
    return None, None, ()


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


def key(workdir: Path, plan: InstallPlan) -> str:
    h = hashlib.sha256(
        f"{RECIPE}\0{sys.version}\0{os.path.realpath(sys.executable)}\0"
        f"{plan.requirements}\0{plan.groups}\0{plan.group_lines}\0{plan.project}\0".encode()
    )
    for rel in plan.hashed:
        hash_tree(h, workdir, rel)
    return h.hexdigest()
