"""Phase 3, Job A: discover the project's test, build, lint and typecheck commands.

A pure function of the checkout: config files are read, nothing of the repository is executed and
nothing is fetched. Python projects get the structured tools verify-dag ships with (pytest, and the
analysers of the tools registry, run on our own interpreter); other ecosystems get their
conventional commands, found in package.json, Makefile, Cargo.toml, go.mod and CI config (the
readers are in :mod:`~verify_dag.phases.triage.sources`).
Each kind has a fixed preference order so the same checkout always yields the same toolchain.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from verify_dag import declarations
from verify_dag.models.toolchain import Command, CommandKind, EngineerContext, Toolchain
from verify_dag.phases.triage import invocations
from verify_dag.phases.triage.sources import (
    Candidate,
    Found,
    declare_make_targets,
    discoverable,
    read_ci,
    read_env_builders,
    read_ini_files,
    read_makefile,
    read_package_json,
    read_pyproject,
    structured,
)
from verify_dag.tools.base import command_exists, python_tool_argv

_SINGLE: tuple[CommandKind, ...] = ("test", "build")  # one of each; lint/typecheck may be many
_SKIP_DIRS = frozenset({"node_modules", "venv", "__pycache__", "build", "dist", "target", "site"})


def discover(workdir: Path, engineer: EngineerContext | None = None) -> Toolchain:
    """TOOLCHAIN for the checkout at ``workdir``.

    An engineer skill's commands come first (rank 0): Job A validates them (each is
    checked to exist like any other) and discover only what they leave out.
    """
    found = Found()
    if engineer is not None and engineer.skill_dir:
        source = f"engineer skill ({engineer.skill_dir})"
        declared: tuple[tuple[CommandKind, tuple[str, ...]], ...] = (
            ("test", engineer.test_commands),
            ("build", engineer.build_commands),
            ("lint", engineer.lint_commands),
        )
        for kind, lines in declared:
            for line in lines:
                try:
                    argv = tuple(shlex.split(line))
                except ValueError:
                    found.notes.append(f"{kind}: cannot parse {line!r} from {source}")
                    continue
                if argv:
                    found.candidates.append(Candidate(kind, argv, source, 0, body=line))
                    found.scan(line, source)
                    found.declare(line, source)
                    if kind == "test":
                        found.pytest_line(line, source, 0)
    read_pyproject(workdir, found)
    read_ini_files(workdir, found)
    read_env_builders(workdir, found)
    read_makefile(workdir, found)
    read_package_json(workdir, found)
    if (workdir / "Cargo.toml").is_file():
        found.candidates += [
            Candidate("test", ("cargo", "test"), "Cargo.toml", 30),
            Candidate("build", ("cargo", "build"), "Cargo.toml", 30),
            # short: one `path:line:col: level: message` line per diagnostic, on stderr.
            Candidate("lint", ("cargo", "clippy", "--message-format=short"), "Cargo.toml", 30),
        ]
    if (workdir / "go.mod").is_file():
        found.candidates += [
            Candidate("test", ("go", "test", "./..."), "go.mod", 30),
            Candidate("build", ("go", "build", "./..."), "go.mod", 30),
            Candidate("lint", ("go", "vet", "./..."), "go.mod", 30),
        ]
    read_ci(workdir, found)
    declare_make_targets(found, found.make_named)
    for hook in invocations.read_precommit(workdir):
        found.invocations.append(hook)
        found.signal(hook.tool, hook.source)
    _drop_plugins_turned_off(found)
    return _assemble(workdir, found)


def _drop_plugins_turned_off(found: Found) -> None:
    """An analyser whose only way to run is a pytest plugin the project turned off is not run:
    its configuration file alone (mypy.ini) is no sign that the maintainers run it."""
    for name, where in found.plugin_off.items():
        d = discoverable()[name]
        if name not in found.signals or d.default_source is not None:
            continue
        if any(x.tool == name for x in found.invocations):
            continue  # a command line of the project runs it all the same
        sources = _join(found.signals.pop(name))
        found.notes.append(
            f"{d.kind}: {name} is configured ({sources}) but runs only as pytest-{name}, "
            f"which {where} turns off; not run"
        )


def _assemble(workdir: Path, found: Found) -> Toolchain:
    commands = _python_commands(workdir, found)
    covered = {c.tool for c in commands}
    by_kind: dict[CommandKind, list[Candidate]] = {}
    for cand in sorted(found.candidates, key=lambda c: c.rank):
        by_kind.setdefault(cand.kind, []).append(cand)
    for kind in ("test", "build", "lint", "typecheck"):
        seen: set[tuple[str, ...]] = set()
        for cand in by_kind.get(kind, []):
            if _signature(cand.argv) in seen:
                continue
            seen.add(_signature(cand.argv))
            label = f"{' '.join(cand.argv)} ({cand.source})"
            taken = [c for c in commands if c.kind == kind]
            if kind in _SINGLE and taken:
                found.notes.append(f"{kind}: also found {label}; using {taken[0].display()}")
            elif kind not in _SINGLE and _runs_only(cand.body, covered):
                found.notes.append(f"{kind}: {label} runs tools already run directly")
            else:
                commands.append(
                    Command(
                        kind=kind,
                        argv=cand.argv,
                        source=cand.source,
                        exists=command_exists(cand.argv),
                    )
                )
    for c in commands:
        if not c.exists:
            found.notes.append(
                f"{c.kind}: {c.display()} ({c.source}) is not runnable here: "
                f"{c.argv[0]} was not found"
            )
    if not any(c.kind == "test" for c in commands):
        found.notes.append("test: no test command discovered")
    return Toolchain(
        commands=tuple(commands), notes=tuple(found.notes), broken=declarations.broken(workdir)
    )


def _python_commands(workdir: Path, found: Found) -> list[Command]:
    has_py, has_tests = _walk_python(workdir)
    project = has_py or any((workdir / n).is_file() for n in ("pyproject.toml", "setup.py"))
    sig = found.signals
    out: list[Command] = []
    if has_tests and project:
        found.signal("pytest", "tests directory")
    if project and "pytest" in sig:
        out.append(_pytest(found))
    for name, d in discoverable().items():
        if name in sig or (has_py and d.default_source is not None):
            argv, source = d.argv, _join(sig[name]) if name in sig else str(d.default_source)
            # As the project runs it, where it says how: its targets and check options.
            own = invocations.merge(name, [x for x in found.invocations if x.tool == name])
            if own is not None and own[0] != d.argv:
                argv, source = own
            out.append(
                Command(
                    kind=d.kind,
                    argv=argv,
                    source=source,
                    exists=python_tool_argv(d.module) is not None,
                    tool=name,
                )
            )
    return out


def _pytest(found: Found) -> Command:
    """pytest, as the highest-ranked declaration runs it (the tester keeps its arguments), or
    bare when the project only configures it."""
    exists = python_tool_argv("pytest") is not None
    if not found.pytest:
        return Command(
            kind="test",
            argv=("pytest",),
            source=_join(found.signals["pytest"]),
            exists=exists,
            tool="pytest",
        )
    chosen = min(found.pytest, key=lambda c: c.rank)  # the first of equals: file order
    command = Command(
        kind="test", argv=chosen.argv, source=chosen.source, exists=exists, tool="pytest"
    )
    # An engineer skill's line is a candidate too: it is this command now, not an alternative.
    found.candidates = [c for c in found.candidates if c is not chosen]
    for other in found.pytest:
        if (
            other is not chosen
            and other.argv != chosen.argv
            and all(other is not c for c in found.candidates)
        ):
            found.notes.append(
                f"test: also found {' '.join(other.argv)} ({other.source}); "
                f"using {command.display()}"
            )
    return command


def _signature(argv: tuple[str, ...]) -> tuple[str, ...]:
    """What makes two commands the same check: `cargo clippy -- -D warnings` is still clippy."""
    if argv[:2] in (("npm", "run"), ("yarn", "run"), ("pnpm", "run")):
        return argv[:3]
    if argv[0] in ("cargo", "go", "make", "npm", "npx", "yarn", "pnpm"):
        return argv[:2]
    return argv[:1]


def _join(sources: list[str]) -> str:
    return "; ".join(sources[:3])


def _runs_only(body: str, covered: set[str | None]) -> bool:
    """Whether a wrapper's script only invokes structured tools that already run directly."""
    parts = [p.strip() for p in re.split(r"&&|;|\n", body) if p.strip()]
    parts = [p for p in parts if not re.match(r"^@?echo\b", p)]
    return bool(parts) and all(any(t in covered for t in structured().findall(p)) for p in parts)


def _walk_python(workdir: Path, budget: int = 20000) -> tuple[bool, bool]:
    """(has Python files, has Python tests), from a bounded walk that skips vendored trees."""
    has_py = has_tests = False
    for root, dirs, files in os.walk(workdir):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        in_tests = bool({"tests", "test"} & set(Path(root).relative_to(workdir).parts))
        for name in files:
            budget -= 1
            if name.endswith((".py", ".pyi")):
                has_py = True
                has_tests = (
                    has_tests
                    or in_tests
                    or name.startswith("test_")
                    or name.endswith("_test.py")
                    or name == "conftest.py"
                )
        if (has_py and has_tests) or budget <= 0:
            break
    return has_py, has_tests
