"""Isolated environments for the repository under test, built from what it declares.

A suite that needs its own dependencies gets a venv made with our interpreter and cached under
``$VERIFY_DAG_CACHE/envs`` (default ``~/.cache/verify-dag/envs``), keyed by the sha256 of the
declaring files, of any local directories they install, and of the Python version. A marker file
is written only after a successful install, so a half-built env is rebuilt, never reused; a lock
file serialises builders of one key. pytest and coverage are always installed in it.

The project itself is NOT kept in the cached env: its code changes with every commit while the
key only follows the declaring files, so a cached copy would be stale (and for src layouts it
would be what the tests import). Its dependencies stay cached; the project is uninstalled after
the build, and :func:`layer` installs it editable from the throwaway worktree into a per-run venv
that sees the cached one. Editable keeps tracebacks and coverage on checkout paths; the per-run
venv keeps concurrent runs of different commits from sharing one install.

What the repository declares is read by :mod:`~verify_dag.phases.tester.env.plan`; node suites get
their dependencies from :mod:`~verify_dag.phases.tester.env.npm`.
"""

from __future__ import annotations

import configparser
import contextlib
import functools
import importlib.metadata
import json
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import time
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from verify_dag import util
from verify_dag.files import file_lock, write_atomic
from verify_dag.models.toolchain import Toolchain
from verify_dag.paths import cache_root
from verify_dag.phases.tester.env import nox as testenv_nox
from verify_dag.phases.tester.env import npm as testenv_npm
from verify_dag.phases.tester.env import plan as testenv_plan
from verify_dag.phases.tester.env import tools as testenv_tools
from verify_dag.phases.tester.env import tox as testenv_tox
from verify_dag.phases.tester.env.base import (
    MARKER,
    PY_LEAKS,
    Env,
    clean,
    left,
    pip_env,
    tail,
    uv_install,
)
from verify_dag.phases.tester.env.plan import SKIP, Plan
from verify_dag.sandbox import Policy
from verify_dag.tools import pinned

# The build's copy keeps .git: a version derived from git tags (setuptools-scm, hatch-vcs,
# versioneer) is read from it while the project's metadata is generated.
_COPY_SKIP = SKIP - {".git"}
_GROUP_LINES = ".verify-dag-dev-groups.txt"  # pdm's and poetry's test groups, in the build copy


def provision(
    workdir: Path, toolchain: Toolchain, cache_dir: Path | None = None, timeout: float = 900
) -> Env:
    """The environment the suite of ``workdir`` runs in; failures are in ``Env.error``."""
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
        return _python(workdir, plan, root / "envs", time.monotonic() + timeout)
    except (OSError, ValueError, KeyError, TypeError, configparser.Error) as exc:
        return Env(error=clean(f"{type(exc).__name__}: {exc}"))


def _python_suite(toolchain: Toolchain) -> bool:
    command = toolchain.test
    return command is None or Path(command.argv[0]).name not in testenv_npm.RUNNERS


def suite_env(env: Env, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the suite runs in: scrubbed, and inside the venv when there is one."""
    out = util.scrubbed_env(extra)
    if env.python is None:
        return out
    for name in PY_LEAKS:
        out.pop(name, None)
    assert env.bin_dir is not None
    out["VIRTUAL_ENV"] = str(env.bin_dir.parent)
    out["PATH"] = os.pathsep.join([*map(str, env.path_dirs), out.get("PATH", os.defpath)])
    if env.runner is not None:
        out.update(env.runner.variables)
    return out


@contextlib.contextmanager
def runtime(workdir: Path, toolchain: Toolchain, cache_dir: Path | None = None) -> Iterator[Env]:
    """The environment a test of ``workdir`` runs in, for the duration of the block: the cached
    env, layered with the project itself when it installs one. Check ``error`` first."""
    root = cache_dir if cache_dir is not None else cache_root()
    notes: tuple[str, ...] = ()
    # The project's tox environments or nox sessions are how its maintainers run the suite:
    # tox or nox builds the env. Only when they declare none that runs tests does the rest apply.
    for runner in (testenv_tox, testenv_nox) if _python_suite(toolchain) else ():
        if not runner.declared(workdir):
            continue
        with runner.runtime(workdir, root) as env:
            if env.python is not None or env.error is not None:
                yield env
                return
            notes = env.notes
        break
    env = provision(workdir, toolchain, cache_dir)
    env = replace(env, notes=(*notes, *env.notes))
    if env.error is not None or not env.project:
        yield env
        return
    with tempfile.TemporaryDirectory(prefix="verify-dag-test-") as tmp:
        yield layer(env, workdir, Path(tmp) / "run-env")


@contextlib.contextmanager
def interpreter(
    workdir: Path, toolchain: Toolchain, cache_dir: Path | None = None
) -> Iterator[Path | None]:
    """The interpreter of the env the suite runs in, for the static tools of the same checkout
    (mypy resolves the project's imports with it; a ruff or mypy the env installed is the
    version the project pins), for the duration of the block. None when the project declares
    nothing to install or its env cannot be built: the tester reports why, the static tools
    then run on verify-dag's own. Built once: the tester reuses the cached env."""
    if not toolchain.of("lint") and not toolchain.of("typecheck"):
        yield None
        return
    root = cache_dir if cache_dir is not None else cache_root()
    with runtime(workdir, toolchain, root) as env:
        project = env.python if env.error is None else None
        pins = pinned.read(workdir)
        if not pins:
            yield project
            return
        built = testenv_tools.build(list(pins.values()), _cached_python(env), root)
        yield built.python or project


def _cached_python(env: Env) -> Path | None:
    """The interpreter of the cached env, not of a per-run layer over it (:func:`layer` puts
    its own bin first on the path): a tools venv over it outlives this run."""
    if env.error is not None or env.python is None or not env.path_dirs:
        return None
    python = env.path_dirs[-1] / "python"
    return python if python.exists() else None


def layer(env: Env, workdir: Path, dest: Path, timeout: float = 900) -> Env:
    """A per-run venv over the cached ``env`` with the project installed editable from
    ``workdir``. The cached env's site-packages is added with ``site.addsitedir`` from a .pth
    file, so its own .pth files (editable dependencies, namespace packages) still work."""
    assert env.python is not None and env.bin_dir is not None
    res = util.run(
        [sys.executable, "-m", "venv", "--without-pip", str(dest)], timeout=timeout, env=pip_env()
    )
    if res.returncode != 0:
        return replace(env, error=clean(f"could not create the run venv: {tail(res)}"))
    (_purelib(dest) / "_verify_dag_base.pth").write_text(
        f"import site; site.addsitedir({str(_purelib(env.bin_dir.parent))!r})\n", encoding="utf-8"
    )
    python = dest / "bin" / "python"
    # --no-deps: the dependencies are in the cached env already; the worktree is throwaway, so
    # the build files an editable install leaves in it (egg-info, build/) harm nothing.
    argv = [*_pip(python), "install", "--no-deps", "-e", str(workdir)]
    # The project's build backend runs here: sandboxed, with the index but no credentials.
    build = Policy(network=True, writable=(dest,))
    res = util.run(
        [*argv, "--no-build-isolation"], cwd=workdir, timeout=timeout, env=pip_env(), sandbox=build
    )
    if res.returncode != 0 and not res.timed_out:
        res = util.run(argv, cwd=workdir, timeout=timeout, env=pip_env(), sandbox=build)
    if res.returncode != 0 or res.timed_out:
        return replace(
            env,
            error=clean(
                f"installing the project into the run venv failed ({env.source}): {tail(res)}"
            ),
        )
    return replace(
        env, python=python, bin_dir=python.parent, path_dirs=(python.parent, *env.path_dirs)
    )


# -- building ---------------------------------------------------------------------------------


def _python(workdir: Path, plan: Plan, envs: Path, deadline: float) -> Env:
    key = testenv_plan.key(workdir, plan)
    env_dir = envs / key[:24]
    envs.mkdir(parents=True, exist_ok=True)
    with file_lock(envs / f"{key[:24]}.lock", deadline) as got:
        if not got:
            return Env(
                key=key,
                source=plan.source,
                error="timed out waiting for another run building the same environment",
            )
        done = _ready(env_dir)
        if done is not None:
            return _env(env_dir, key, plan.source, reused=True, project=done)
        shutil.rmtree(env_dir, ignore_errors=True)  # a half-built env from a run that died
        error, project = _build(workdir, plan, env_dir, deadline)
        if error is not None:
            shutil.rmtree(env_dir, ignore_errors=True)
            return Env(key=key, source=plan.source, error=clean(error))
        write_atomic(
            env_dir / MARKER,
            json.dumps({"source": plan.source, "project": project}).encode("utf-8"),
        )
    return _env(env_dir, key, plan.source, reused=False, project=project)


def _env(env_dir: Path, key: str, source: str, *, reused: bool, project: bool) -> Env:
    bin_dir = env_dir / "bin"
    return Env(
        python=bin_dir / "python",
        bin_dir=bin_dir,
        key=key,
        reused=reused,
        source=source,
        project=project,
        path_dirs=(bin_dir,),
    )


def _ready(env_dir: Path) -> bool | None:
    """Whether the finished env at ``env_dir`` needs the project layered; None if not finished."""
    try:
        marker = json.loads((env_dir / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return bool(marker.get("project")) if (env_dir / "bin" / "python").exists() else None


def _build(workdir: Path, plan: Plan, env_dir: Path, deadline: float) -> tuple[str | None, bool]:
    """(error, whether the project was installed and removed again). pip runs in a copy of the
    checkout: building local packages writes build/ and egg-info next to their sources."""
    with tempfile.TemporaryDirectory(prefix="verify-dag-env-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(
            workdir, src, symlinks=True, ignore=lambda d, names: _COPY_SKIP & set(names)
        )
        venv = [sys.executable, "-m", "venv", *(["--without-pip"] if _own_pip() else [])]
        res = util.run([*venv, str(env_dir)], timeout=left(deadline), env=pip_env())
        if res.returncode != 0 or res.timed_out:
            return f"python -m venv failed: {tail(res)}", False
        pip = _pip(env_dir / "bin" / "python")
        report = Path(tmp) / "report.json"
        argv = [*pip, "install", "--report", str(report), "pytest", *testenv_tox.EXTRA_DEPS]
        for req in plan.requirements:
            argv += ["-r", req]
        if plan.group_lines:
            (src / _GROUP_LINES).write_text("\n".join(plan.group_lines) + "\n", encoding="utf-8")
            argv += ["-r", _GROUP_LINES]
        argv += [plan.project] if plan.project else []
        # Build backends and setup.py files run here: sandboxed, with the index but no
        # credentials, writing only the env being built and the scratch copy.
        build = Policy(network=True, writable=(env_dir, Path(tmp)))
        res = util.run(argv, cwd=src, timeout=left(deadline), env=pip_env(), sandbox=build)
        if res.timed_out:
            return f"installing from {plan.source} timed out", False
        if res.returncode != 0:
            return f"pip install from {plan.source} failed: {tail(res)}", False
        if plan.groups:
            # PEP 735 groups (include-group too) by uv, which implements them; pip learnt
            # --group only in 25.1.
            groups = [a for g in plan.groups for a in ("--group", f"pyproject.toml:{g}")]
            res = uv_install(
                env_dir / "bin" / "python",
                groups,
                cache=env_dir.parent.parent,  # envs/ sits under verify-dag's cache root
                deadline=deadline,
                cwd=src,
                writable=(Path(tmp),),
            )
            if res.returncode != 0 or res.timed_out:
                return f"uv pip install of {plan.source} failed: {tail(res)}", False
        names = _installed_from(report, src)
        if names:
            res = util.run(
                [*pip, "uninstall", "-y", *names],
                cwd=tmp,
                timeout=left(deadline),
                env=pip_env(),
                sandbox=build,
            )
            if res.returncode != 0:
                return f"removing the project from the cached env failed: {tail(res)}", False
            # Its build requirements, so that each run's editable install can skip build
            # isolation (seconds per run, and no index needed once the env is cached). Best
            # effort: layer() falls back to an isolated build when they are not usable.
            util.run(
                [*pip, "install", *_build_requires(src)],
                cwd=tmp,
                timeout=left(deadline),
                env=pip_env(),
                sandbox=build,
            )
    return None, bool(names)


def _build_requires(src: Path) -> list[str]:
    pyproject = src / "pyproject.toml"
    table = tomllib.loads(pyproject.read_text(encoding="utf-8")) if pyproject.is_file() else {}
    requires = table.get("build-system", {}).get("requires", ["setuptools>=40.8.0"])
    # setuptools before 70.1 builds wheels (editable ones too) with the separate wheel package.
    extra = ["wheel"] if any(str(r).startswith("setuptools") for r in requires) else []
    return [str(r) for r in requires] + extra


def _installed_from(report: Path, src: Path) -> list[str]:
    """Names of what pip installed from the checkout's root (the project), per its --report."""
    data = json.loads(report.read_text(encoding="utf-8"))
    return [
        item["metadata"]["name"]
        for item in data.get("install", ())
        if item.get("download_info", {}).get("url") == src.resolve().as_uri()
    ]


@functools.cache
def _own_pip() -> bool:
    try:
        version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2]) >= (22, 3)


def _pip(python: Path) -> list[str]:
    """pip for the env of ``python``. Our own pip driving it (--python, pip >= 22.3) spares
    every venv the seconds ensurepip takes to install pip into it; else the env's own pip."""
    if _own_pip():
        return [sys.executable, "-m", "pip", "--python", str(python)]
    return [str(python), "-m", "pip"]


def _purelib(venv: Path) -> Path:
    return Path(
        sysconfig.get_path("purelib", "venv", vars={"base": str(venv), "platbase": str(venv)})
    )
