"""Isolated environments for the repository under test, built from what it declares.

Each way a project declares its test envs is an env builder, one module behind one interface
(:mod:`~verify_dag.phases.tester.env.registry`): tox, nox and hatch build theirs with the tool
itself; otherwise :mod:`~verify_dag.phases.tester.env.venv` builds a venv from the declared
dependencies (requirements files, extras, PEP 735 groups, pdm's and poetry's groups), cached by
the sha256 of the declaring files and the interpreter, with the project installed per run in an
editable layer over it. :func:`runtime` asks the builders in their order: the first that declares
an env running tests here builds it. Node suites get their dependencies from
:mod:`~verify_dag.phases.tester.env.npm`.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from verify_dag import declarations, processes, workspace
from verify_dag.models.findings import BuiltEnv
from verify_dag.models.toolchain import Toolchain
from verify_dag.paths import cache_root
from verify_dag.phases.tester.env import npm as testenv_npm
from verify_dag.phases.tester.env import plan as testenv_plan
from verify_dag.phases.tester.env import registry
from verify_dag.phases.tester.env import tools as testenv_tools
from verify_dag.phases.tester.env import venv as testenv_venv
from verify_dag.phases.tester.env import wheelhouse as testenv_wheelhouse
from verify_dag.phases.tester.env.base import PY_LEAKS, Env, pycache_prefix, redacted
from verify_dag.tools import pinned


def provision(
    workdir: Path, toolchain: Toolchain, cache_dir: Path | None = None, timeout: float = 900
) -> Env:
    """The cached env the suite of ``workdir`` needs without a runner of its own (a node suite's
    node_modules, or the venv of the declared dependencies, without the project's layer);
    failures are in ``Env.error``."""
    command = toolchain.test
    root = cache_dir if cache_dir is not None else cache_root()
    try:
        if command is not None and Path(command.argv[0]).name in testenv_npm.RUNNERS:
            return (
                testenv_npm.node(workdir, root / "node", timeout)
                if (workdir / "package.json").is_file()
                else Env()
            )
        plan = testenv_plan.read(workdir)
        if plan is None:
            return Env()
        return testenv_venv.build(workdir, plan, root / "envs", time.monotonic() + timeout)
    except (OSError, ValueError, KeyError, TypeError, configparser.Error) as exc:
        return Env(error=redacted(f"{type(exc).__name__}: {exc}"))


def _python_suite(toolchain: Toolchain) -> bool:
    command = toolchain.test
    return command is None or Path(command.argv[0]).name not in testenv_npm.RUNNERS


def suite_env(env: Env, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the suite runs in: scrubbed, and inside the venv when there is one."""
    out = processes.scrubbed_env(extra)
    if env.python is None:
        return out
    for name in PY_LEAKS:
        out.pop(name, None)
    assert env.bin_dir is not None
    out["VIRTUAL_ENV"] = str(env.bin_dir.parent)
    out["PATH"] = os.pathsep.join([*map(str, env.path_dirs), out.get("PATH", os.defpath)])
    if env.runner is not None:
        out.update(env.runner.variables)
    out.update(env.variables)
    return out


def run_pycache(workdir: Path, scratch: Path, env: Env) -> Path:
    """Where the bytecode of a run's commands in ``env`` goes (PYTHONPYCACHEPREFIX): beside
    the run's checkout (gone with the run; the suite and the derived probes share it), or in
    the scratch directory of a checkout that is not a run's; the env's own modules are read
    from its compiled tree, linked in (env/base.py, pycache_prefix)."""
    home = workspace.home(workdir)
    return pycache_prefix(env, (home if home is not None else scratch) / "pycache")


@contextlib.contextmanager
def runtime(
    workdir: Path,
    toolchain: Toolchain,
    cache_dir: Path | None = None,
    want: BuiltEnv | None = None,
) -> Iterator[Env]:
    """The environment a test of ``workdir`` runs in, for the duration of the block, built by
    the first env builder (:data:`~verify_dag.phases.tester.env.registry.BUILDERS`) that
    declares one running tests here; node suites get theirs from npm. Check ``error`` first.
    ``want``: the env another commit's suite ran in, built the same way here (the same builder,
    the same env when this checkout declares it; the builder's own choice, with a note, when
    not)."""
    root = cache_dir if cache_dir is not None else cache_root()
    if not _python_suite(toolchain):
        yield provision(workdir, toolchain, cache_dir)
        return
    notes: tuple[str, ...] = ()
    for builder in registry.BUILDERS:
        if not builder.declared(workdir):
            continue
        unreadable = declarations.named(toolchain.broken, set(builder.CONFIG_FILES))
        if unreadable:
            # The change broke the file the builder reads: the suite still runs, in the env
            # the rest of the project declares, and the broken file is the static phase's
            # finding.
            notes = (*notes, f"{builder.NAME} not used: {declarations.because(unreadable)}")
            continue
        named = want.name if want is not None and want.builder == builder.NAME else None
        with builder.runtime(workdir, root, want=named) as env:
            if env.error is not None:
                yield replace(env, notes=(*notes, *env.notes))
                return
            if env.python is not None:
                # The suite's own builds of the project (pytest-checkdocs) find its build
                # requirements offline.
                env = testenv_wheelhouse.offline(env, workdir, root)
                yield replace(env, notes=(*notes, *env.notes))
                return
            notes = (*notes, *env.notes)
    yield Env(notes=notes)


@contextlib.contextmanager
def interpreter(
    workdir: Path, toolchain: Toolchain, cache_dir: Path | None = None
) -> Iterator[tuple[Path | None, bool]]:
    """The interpreter of the env the suite runs in, for the static tools of the same checkout
    (mypy resolves the project's imports with it; a ruff or mypy the env installed is the
    version the project pins), for the duration of the block; and whether the project declares
    an env that could not be built (its interpreter is then None: the tester reports why, the
    static tools run on verify-dag's own, and what they find is not kept in the result cache).
    None, False when the project declares nothing to install. Built once per run: the tester
    shares it."""
    if not toolchain.of("lint") and not toolchain.of("typecheck"):
        yield None, False
        return
    root = cache_dir if cache_dir is not None else cache_root()
    with runtime(workdir, toolchain, root) as env:
        project = env.python if env.error is None else None
        degraded = env.error is not None
        pins = pinned.read(workdir)
        if not pins:
            yield project, degraded
            return
        built = testenv_tools.build(list(pins.values()), _cached_python(env), root)
        yield built.python or project, degraded or built.python is None


def _cached_python(env: Env) -> Path | None:
    """The interpreter of the cached env, not of a per-run layer over it (:func:`layer` puts
    its own bin first on the path): a tools venv over it outlives this run."""
    if env.error is not None or env.python is None or not env.path_dirs:
        return None
    python = env.path_dirs[-1] / "python"
    return python if python.exists() else None
