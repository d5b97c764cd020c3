"""Phase 3, Job A: the per-format config readers behind ``triage.discover``.

Each ``read_*`` reads one kind of file in the checkout (pyproject.toml, setup.cfg/tox.ini and the
tool ini files, the Makefile, package.json, CI yaml) into a ``Found``: signals that a structured
tool (pytest, or an analyser of the tools registry with a ``discovery``) is configured, and ranked
candidate commands. Nothing is executed.
"""

# Long module: one reader per config format, side by side, each small; they share Found and the
# command-line classification, and apart they would only import each other.

from __future__ import annotations

import configparser
import functools
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify_dag import tools
from verify_dag.models.toolchain import CommandKind
from verify_dag.phases.tester import pytest_command
from verify_dag.phases.tester.env import registry
from verify_dag.phases.triage import invocations
from verify_dag.tools.base import Discovery, module_available

_SHELL_ONLY = re.compile(r"[$`|<>*]|^\w+=")  # needs a shell; commands run without one
_RUNNER_PREFIX = re.compile(r"^(?:uv run|poetry run|pipenv run|hatch run|pdm run)\s+")
# Command shapes recognised in CI scripts and tox envs, by kind (first match wins).
_CLASSIFY: tuple[tuple[CommandKind, re.Pattern[str]], ...] = (
    (
        "test",
        re.compile(
            r"^(?:npm test|npm run test\b|yarn test|pnpm test|cargo test|go test"
            r"|make (?:test|check)\b|python3? -m unittest)"
        ),
    ),
    (
        "typecheck",
        re.compile(
            r"^(?:(?:npx )?tsc\b|pyright\b|npm run type-?check\b"
            r"|make typecheck\b)"
        ),
    ),
    (
        "lint",
        re.compile(
            r"^(?:flake8\b|pylint\b|(?:npx )?eslint\b|golangci-lint\b|cargo clippy"
            r"|go vet|npm run lint\b|make lint\b|shellcheck\b)"
        ),
    ),
    ("build", re.compile(r"^(?:npm run build\b|cargo build|go build|make build\b)")),
)
_MAKE_TARGETS: dict[str, tuple[CommandKind, int]] = {
    "test": ("test", 20),
    "tests": ("test", 21),
    "check": ("test", 25),
    "build": ("build", 20),
    "lint": ("lint", 20),
    "typecheck": ("typecheck", 20),
}
_NPM_SCRIPTS: dict[str, CommandKind] = {
    "test": "test",
    "build": "build",
    "lint": "lint",
    "typecheck": "typecheck",
    "type-check": "typecheck",
}


def discoverable() -> dict[str, Discovery]:
    """The registry's tools triage finds from config, by name, in registry order."""
    return {n: s.discovery for n, s in tools.REGISTRY.items() if s.discovery is not None}


def structured() -> re.Pattern[str]:
    """The tools verify-dag runs itself (pytest and the discoverable analysers), as words."""
    return _words(("pytest", *discoverable()))


@functools.cache
def _words(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(rf"\b({'|'.join(map(re.escape, names))})\b")


@dataclass
class Candidate:
    kind: CommandKind
    argv: tuple[str, ...]
    source: str
    rank: int  # lower is preferred
    body: str = ""  # what a wrapper (make target, npm script) actually runs


@dataclass
class Found:
    signals: dict[str, list[str]] = field(default_factory=dict)  # structured tool -> sources
    candidates: list[Candidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Declared pytest command lines (kind "test"): the tester keeps their arguments.
    pytest: list[Candidate] = field(default_factory=list)
    # The project's own command lines of the tools verify-dag runs itself: their targets and
    # options are what those tools check and how.
    invocations: list[invocations.Line] = field(default_factory=list)
    # The Makefile's recipes and prerequisites, the targets whose recipes were read for
    # declared lines, and the targets CI or tox run with `make`.
    makefile: tuple[str, dict[str, list[str]], dict[str, list[str]]] | None = None
    made: set[str] = field(default_factory=set)
    make_named: list[str] = field(default_factory=list)
    # Analysers the project runs as pytest plugins (pytest-mypy) that pytest-enabler turns off:
    # tool -> where. A table of [tool.pytest-enabler] without addopts passes the plugin nothing,
    # so its check does not run (jaraco/skeleton pauses pytest-mypy so).
    plugin_off: dict[str, str] = field(default_factory=dict)

    def signal(self, tool: str, source: str) -> None:
        sources = self.signals.setdefault(tool, [])
        if source not in sources:
            sources.append(source)

    def scan(self, text: str, source: str) -> None:
        for tool in structured().findall(text):
            self.signal(tool, source)

    def declare(self, text: str, source: str) -> None:
        """Record ``text`` as a declared mypy/stubtest/ruff command line when it is one."""
        line = invocations.read(invocations.unfactor(text), source)
        if line is not None:
            self.invocations.append(line)
            self.signal(line.tool, source)  # stubtest is mypy's, though it does not say so

    def pytest_line(self, text: str, source: str, rank: int) -> None:
        """Record ``text`` as a declared pytest command when it is one."""
        try:
            argv = tuple(shlex.split(text))
        except ValueError:
            return
        if pytest_command.args(argv) is None:
            return
        if _SHELL_ONLY.search(text) or not pytest_command.literal(argv):
            self.notes.append(
                f"test: {text!r} ({source}) needs a shell; its pytest arguments are not used"
            )
            return
        self.pytest.append(Candidate("test", argv, source, rank, text))


def read_pyproject(workdir: Path, found: Found) -> None:
    path = workdir / "pyproject.toml"
    if not path.is_file():
        return
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        found.notes.append(f"pyproject.toml could not be read: {exc}")
        return
    tool = data.get("tool", {})
    tool = tool if isinstance(tool, dict) else {}
    if "pytest" in tool:
        ini = isinstance(tool["pytest"], dict) and "ini_options" in tool["pytest"]
        found.signal("pytest", f"pyproject.toml [tool.pytest{'.ini_options' if ini else ''}]")
    for name in discoverable():
        if name in tool:
            found.signal(name, f"pyproject.toml [tool.{name}]")
    names = _dependency_names(data)
    for name in names:
        if name == "pytest" or name in discoverable():
            found.signal(name, f"pyproject.toml dependencies ({name})")
    enabler = tool.get("pytest-enabler")
    for name, table in enabler.items() if isinstance(enabler, dict) else ():
        plugin = name in discoverable() and f"pytest-{name}" in names
        if plugin and isinstance(table, dict) and not str(table.get("addopts", "")).strip():
            found.plugin_off[name] = f"pyproject.toml [tool.pytest-enabler.{name}]"


def _dependency_names(data: dict[str, Any]) -> set[str]:
    """Lower-case names from optional-dependencies, dependency-groups and Poetry dev groups."""
    reqs: list[Any] = []
    groups = [
        data.get("project", {}).get("optional-dependencies", {}),
        data.get("dependency-groups", {}),
    ]
    for group in groups:
        if isinstance(group, dict):
            reqs.extend(r for v in group.values() if isinstance(v, list) for r in v)
    poetry = data.get("tool", {}).get("poetry", {})
    if isinstance(poetry, dict):
        reqs.extend(poetry.get("dev-dependencies", {}) or {})
        for group in (poetry.get("group", {}) or {}).values():
            if isinstance(group, dict):
                reqs.extend(group.get("dependencies", {}) or {})
    names = (re.match(r"[A-Za-z0-9_.-]+", r) for r in reqs if isinstance(r, str))
    return {m.group(0).lower() for m in names if m}


def read_ini_files(workdir: Path, found: Found) -> None:
    configs = [("pytest.ini", "pytest")]
    configs += [(f, n) for n, d in discoverable().items() for f in d.config_files]
    for name, tool in configs:
        if (workdir / name).is_file():
            found.signal(tool, name)
    for name in ("setup.cfg", "tox.ini"):
        path = workdir / name
        if not path.is_file():
            continue
        cfg = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            cfg.read_string(path.read_text(encoding="utf-8"), source=name)
        except (configparser.Error, UnicodeDecodeError, OSError) as exc:
            found.notes.append(f"{name} could not be read: {str(exc).splitlines()[0]}")
            continue
        for section in cfg.sections():
            if section in ("tool:pytest", "pytest"):
                found.signal("pytest", f"{name} [{section}]")
            elif (ini := _ini_tool(section)) is not None:
                found.signal(ini[0], f"{name} [{ini[1]}]")
            elif section == "flake8":
                argv = ("python", "-m", "flake8") if module_available("flake8") else ("flake8",)
                found.candidates.append(Candidate("lint", argv, f"{name} [flake8]", 5))


def _ini_tool(section: str) -> tuple[str, str] | None:
    """(tool, its section) when ``section`` is a discoverable tool's ([mypy], [mypy-pkg.*])."""
    for name, d in discoverable().items():
        for own in d.ini_sections:
            if section == own or section.startswith(f"{own}-"):
                return name, own
    return None


def read_makefile(workdir: Path, found: Found) -> None:
    path = next(
        (workdir / n for n in ("GNUmakefile", "makefile", "Makefile") if (workdir / n).is_file()),
        None,
    )
    if path is None:
        return
    recipes: dict[str, list[str]] = {}
    prerequisites: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("\t"):
            if current is not None:
                current.append(line.strip())
            continue
        m = re.match(r"^([A-Za-z0-9_.\- ]+?)\s*::?(?!=)(.*)$", line)
        current = None
        if m and not line.lstrip().startswith("#"):
            for target in m.group(1).split():
                current = recipes.setdefault(target, [])
                prerequisites.setdefault(target, []).extend(m.group(2).split(";")[0].split())
    found.makefile = (path.name, recipes, prerequisites)
    declare_make_targets(found, list(_MAKE_TARGETS))
    for target, (kind, rank) in _MAKE_TARGETS.items():
        if target in recipes:
            body = "\n".join(recipes[target])
            found.scan(body, f"{path.name} target {target}")
            if kind == "test":
                for line in recipes[target]:
                    found.pytest_line(line.lstrip("@-+ "), f"{path.name} target {target}", rank)
            found.candidates.append(
                Candidate(kind, ("make", target), f"{path.name} target {target}", rank, body)
            )


def declare_make_targets(found: Found, targets: list[str]) -> None:
    """Read the recipes of ``targets`` and of the targets they depend on (what `make check`
    runs) for the project's own mypy and ruff lines, each target once."""
    if found.makefile is None:
        return
    name, recipes, prerequisites = found.makefile
    todo = [t for t in targets if t in recipes]
    while todo:
        target = todo.pop(0)
        if target in found.made or target not in recipes:
            continue
        found.made.add(target)
        for line in recipes[target]:
            for part in re.split(r"&&|;", line):
                found.declare(part, f"{name} target {target}")
        todo.extend(prerequisites.get(target, []))


def read_package_json(workdir: Path, found: Found) -> None:
    path = workdir / "package.json"
    if not path.is_file():
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        found.notes.append(f"package.json could not be read: {exc}")
        return
    scripts = data.get("scripts") if isinstance(data, dict) else None
    for name, script in scripts.items() if isinstance(scripts, dict) else ():
        kind = _NPM_SCRIPTS.get(name)
        if kind is None or not isinstance(script, str):
            continue
        if name == "test" and "no test specified" in script:
            found.notes.append("package.json scripts.test is npm's placeholder; not a test suite")
            continue
        argv = ("npm", "test") if name == "test" else ("npm", "run", name)
        found.candidates.append(Candidate(kind, argv, f"package.json scripts.{name}", 10, script))
    if scripts and not (workdir / "node_modules").is_dir():
        found.notes.append(
            "package.json: node_modules is absent; npm scripts may fail until "
            "dependencies are installed"
        )


def read_env_builders(workdir: Path, found: Found) -> None:
    """The command lines the project's env declarations run (tox's commands, hatch's scripts),
    as each env builder reads them (tester/env/registry.py)."""
    for builder in registry.BUILDERS:
        for line, source, rank in builder.command_lines(workdir):
            _command_line(line, source, rank, found)


def read_ci(workdir: Path, found: Found) -> None:
    files = [(p, "run") for p in sorted((workdir / ".github" / "workflows").glob("*.y*ml"))]
    files.append((workdir / ".gitlab-ci.yml", "script"))
    for path, key in files:
        if not path.is_file():
            continue
        rel = path.relative_to(workdir).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        for value in _yaml_values(text.splitlines(), key):
            for part in re.split(r"&&|;", value):
                _command_line(part.strip(), f"{rel} {key}", 50, found)


def _command_line(text: str, source: str, rank: int, found: Found) -> None:
    """One shell-ish command line from CI or tox: a signal, a candidate, or nothing."""
    text = _RUNNER_PREFIX.sub("", text)
    if not text or text.startswith("#"):
        return
    found.declare(text, source)
    if text.startswith("make "):  # its recipes are read once every reader has run
        found.make_named.extend(w for w in text.split()[1:] if w[:1] != "-" and "=" not in w)
    if not re.match(
        r"^(?:pip3?|python3? -m pip|uv pip|apt|apt-get|brew|npm (?:ci|install))\b", text
    ):
        found.scan(text, source)
    kind = next((k for k, pat in _CLASSIFY if pat.match(text)), None)
    if kind is None:
        found.pytest_line(text, source, rank)
        return
    if _SHELL_ONLY.search(text):
        return
    try:
        argv = tuple(shlex.split(text))
    except ValueError:
        return
    found.candidates.append(Candidate(kind, argv, source, rank, text))


def _yaml_values(lines: list[str], key: str) -> list[str]:
    """Command strings under ``key:`` in a YAML file, by indentation (no YAML dependency).

    Handles `key: cmd`, `key: |` blocks, `key: [a, b]` and `key:` followed by a `- cmd` list,
    which covers how GitHub `run:` and GitLab `script:` are written in practice.
    """
    pattern = re.compile(rf"^(\s*)(?:-\s+)?{re.escape(key)}:\s*(.*?)\s*$")
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = pattern.match(lines[i])
        i += 1
        if m is None:
            continue
        indent, value = len(m.group(1)), m.group(2)
        block: list[str] = []
        while i < len(lines) and (
            not lines[i].strip()
            or _indent(lines[i]) > indent
            or (not value and _indent(lines[i]) == indent and lines[i].lstrip().startswith("- "))
        ):
            block.append(lines[i])
            i += 1
        if value[:1] in ("|", ">"):
            out.extend(b.strip() for b in block if b.strip())
        elif not value:
            out.extend(
                _unquote(b.strip()[2:])
                for b in block
                if b.strip().startswith("- ") and b.strip()[2:3] not in ("|", ">")
            )
            out.extend(b.strip() for b in block if b.strip() and not b.strip().startswith("-"))
        elif value.startswith("["):
            out.extend(_unquote(v.strip()) for v in value.strip("[]").split(","))
        else:
            out.append(_unquote(value))
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text
