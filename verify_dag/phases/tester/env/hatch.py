"""Test environments of hatch projects, built by hatch itself.

A project that declares hatch environments (``[tool.hatch.envs.*]`` in pyproject.toml, or
hatch.toml) runs its tests through hatch: ``hatch test`` (the ``hatch-test`` env and its matrix)
or a script of an env (``hatch run test``). What an env holds (dependencies, features, matrix
variables, the project in dev mode, its installer) is hatch's to resolve: ``hatch env show
--json`` names the envs (a matrix expanded: ``hatch-test.py3.11``) with their scripts and
variables, ``hatch env create NAME`` builds the chosen one and ``hatch env find NAME`` says where.
The suite then runs on that env's interpreter with its ``env-vars``, and the pytest line hatch
would run: ``hatch test``'s (its ``extra-args``, ``-p no:randomly`` unless it randomizes, its
``default-args`` or ``tests``) or the env's first script that runs a suite (a unittest line runs
as declared, its result unittest's own summary). coverage and
pytest-timeout are added by uv, as for every env the tester measures.

hatch's data and envs live under verify-dag's cache, one directory per declaration and
interpreter, with a configuration of its own (never the user's), built once per checkout and held
shared while a run uses them (:func:`~verify_dag.phases.tester.env.base.shared`, sealed).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from verify_dag import processes
from verify_dag.files import file_lock
from verify_dag.phases.tester.env.base import (
    MARKER,
    Env,
    cache_dir,
    checkout_id,
    compile_site,
    left,
    pip_env,
    redacted,
    shared,
    tail,
    uv_bin,
    uv_install,
)
from verify_dag.phases.tester.env.toxchoice import tox_env
from verify_dag.sandbox import Policy

NAME = "hatch"
# The file hatch reads its configuration from besides pyproject.toml.
CONFIG_FILES = ("hatch.toml",)
_DECLARING = ("pyproject.toml", "hatch.toml", "setup.py", "setup.cfg")
_TEST_ENV = "hatch-test"  # `hatch test`'s env
# A script line that runs a suite (one that runs no pytest runs as declared).
_RUNS_TESTS = re.compile(r"(?:^|[\s/])(?:pytest|py\.test)\b|-m\s+(?:pytest|unittest)\b")
_ARGS = re.compile(r"\{args(?::([^{}]*))?\}")
_EXTRA = ("pytest", "coverage[toml]", "pytest-timeout")


def declared(workdir: Path) -> bool:
    """Whether ``workdir`` declares hatch environments of its own."""
    return bool(_envs_table(workdir))


def _envs_table(workdir: Path) -> dict[str, Any]:
    """The declared ``envs`` table (hatch.toml's, else pyproject's ``[tool.hatch.envs]``)."""
    for name, path in (("hatch.toml", ("envs",)), ("pyproject.toml", ("tool", "hatch", "envs"))):
        try:
            table: Any = tomllib.loads((workdir / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for key in path:
            table = table.get(key, {}) if isinstance(table, dict) else {}
        if isinstance(table, dict) and table:
            return table
    return {}


def tool_env(workdir: Path, source: str, cache: Path, timeout: float) -> Env | None:
    """No linter command line is this builder's to provision."""
    return None


def command_lines(workdir: Path) -> list[tuple[str, str, int]]:
    """(line, source, rank) of every script of the declared envs: the command lines the project
    runs through ``hatch run``, with ``{args:DEFAULT}`` as its default."""
    out = []
    for env, body in _envs_table(workdir).items():
        scripts = body.get("scripts", {}) if isinstance(body, dict) else {}
        for name, lines in scripts.items() if isinstance(scripts, dict) else ():
            for line in [lines] if isinstance(lines, str) else lines:
                if isinstance(line, str):
                    text = _ARGS.sub(lambda m: m.group(1) or "", line).strip()
                    out.append((text, f"hatch env {env} scripts.{name}", 45))
    return out


def _plugins(workdir: Path) -> list[str]:
    """The env plugins the project requires of hatch (``[tool.hatch.env] requires``)."""
    for name, path in (("hatch.toml", ("env",)), ("pyproject.toml", ("tool", "hatch", "env"))):
        try:
            table: Any = tomllib.loads((workdir / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for key in path:
            table = table.get(key, {}) if isinstance(table, dict) else {}
        requires = table.get("requires", []) if isinstance(table, dict) else []
        if requires:
            return [str(r) for r in requires]
    return []


def _hatch(workdir: Path, cache: Path, deadline: float) -> tuple[list[str], str | None]:
    """How hatch is started for ``workdir`` (or why it cannot be). hatch installs the env
    plugins a project requires into its own environment before anything else: that is never
    verify-dag's, so a project that requires some gets a hatch of its own, in a venv under the
    cache per plugin set, its plugins installed as wheels from the index (no package code
    runs)."""
    plugins = _plugins(workdir)
    if not plugins:
        return [sys.executable, "-m", "hatch"], None
    version = importlib.metadata.version("hatch")
    key = hashlib.sha256(f"{sys.version}\0{version}\0{sorted(plugins)}".encode()).hexdigest()
    tool = cache / "hatch" / f"tool-{key[:24]}"
    python = tool / "bin" / "python"
    with file_lock(tool.with_suffix(".lock"), deadline) as got:
        if not got:
            return [], "timed out waiting for another run making hatch's plugin venv"
        if not (tool / MARKER).exists():
            shutil.rmtree(tool, ignore_errors=True)
            made = processes.run(
                [sys.executable, "-m", "venv", "--without-pip", str(tool)],
                timeout=left(deadline),
                env=pip_env(),
                sandbox=Policy(writable=(tool.parent,)),
            )
            wanted = [f"hatch=={version}", *plugins]
            res = uv_install(python, wanted, cache=cache, deadline=deadline, shared=True)
            if made.returncode != 0 or res.returncode != 0 or res.timed_out:
                why = tail(res) if made.returncode == 0 else tail(made)
                return [], redacted(f"installing hatch with {', '.join(plugins)} failed: {why}")
            (tool / MARKER).touch()
    return [str(python), "-m", "hatch"], None


def _env(hatch_dir: Path) -> dict[str, str]:
    """hatch's environment: tox's installer settings (a private uv cache, no downloaded Python),
    hatch's data, cache and configuration in its work directory, never the user's, and this
    interpreter's directory first on PATH (the Python hatch finds for an env)."""
    env = tox_env(hatch_dir)
    config = hatch_dir / "config.toml"
    if not config.exists():
        config.write_text("", encoding="utf-8")
    env.update(
        {
            "HATCH_DATA_DIR": str(hatch_dir / "data"),
            "HATCH_CACHE_DIR": str(hatch_dir / "cache"),
            "HATCH_CONFIG": str(config),
            "HATCH_INTERACTIVE": "false",
            "HATCH_ENV_TYPE_VIRTUAL_UV_PATH": uv_bin(),
        }
    )
    dirs = [str(Path(sys.executable).parent), str(Path(uv_bin()).parent)]
    env["PATH"] = os.pathsep.join([*dirs, env.get("PATH", os.defpath)])
    return env


def _dir(workdir: Path, cache: Path, *, base: bool = False) -> Path:
    return cache_dir(workdir, cache, "hatch", _DECLARING, base=base)


def choose(envs: dict[str, dict[str, Any]], test_declared: bool, want: str | None) -> str | None:
    """The env the suite runs in: ``want`` when hatch lists it; else ``hatch test``'s env for
    this Python when the project configures ``hatch-test``; else the first env on this Python
    whose scripts run a suite (pytest, unittest)."""
    if want is not None and want in envs:
        return want
    ours = f"{sys.version_info.major}.{sys.version_info.minor}"

    def fits(body: dict[str, Any]) -> bool:
        return str(body.get("python", ours)) in (ours, f"python{ours}")

    if test_declared:
        for name, body in envs.items():
            if (name == _TEST_ENV or name.startswith(f"{_TEST_ENV}.")) and fits(body):
                return name
    for name, body in envs.items():
        if name.startswith("hatch-") or not fits(body):
            continue  # hatch's own envs (build, static analysis, uv) run no suite
        if any(_RUNS_TESTS.search(line) for line in _script_lines(body)):
            return name
    return None


def _script_lines(body: dict[str, Any]) -> list[str]:
    scripts = body.get("scripts", {})
    return [line for lines in scripts.values() for line in lines] if scripts else []


def test_line(name: str, body: dict[str, Any]) -> tuple[str, ...] | None:
    """The command hatch runs the suite of env ``name`` with (``hatch test``'s for its env,
    else the first script line that runs a suite), ``{args}`` given no arguments."""
    if name == _TEST_ENV or name.startswith(f"{_TEST_ENV}."):
        args = [str(a) for a in body.get("extra-args", [])]
        args += [] if body.get("randomize") else ["-p", "no:randomly"]
        return ("pytest", *args, *[str(a) for a in body.get("default-args", ["tests"])])
    for line in _script_lines(body):
        if _RUNS_TESTS.search(line):
            try:
                return tuple(shlex.split(_ARGS.sub(lambda m: m.group(1) or "", line)))
            except ValueError:
                return None
    return None


@contextlib.contextmanager
def runtime(
    workdir: Path, cache: Path, timeout: float = 900, want: str | None = None
) -> Iterator[Env]:
    """The chosen hatch env, built by hatch for this checkout and held shared for the block; an
    Env with neither python nor error when hatch declares no env that runs tests here."""
    deadline = time.monotonic() + timeout
    hatch_dir = _dir(workdir, cache, base=want is not None)  # want: the head's env, at the base
    hatch_dir.parent.mkdir(parents=True, exist_ok=True)

    def build_env() -> Env:
        hatch_dir.mkdir(exist_ok=True)
        hatch, why = _hatch(workdir, cache, deadline)
        if why is not None:
            return Env(source="hatch", error=why)
        # A hatch of the project's own (its plugins) is read where it lies in the cache.
        own = () if hatch[0] == sys.executable else (Path(hatch[0]).parent.parent,)
        policy = Policy(network=True, writable=(hatch_dir,), readonly=own)
        res = processes.run(
            [*hatch, "env", "show", "--json"],
            cwd=workdir,
            timeout=left(deadline),
            env=_env(hatch_dir),
            sandbox=policy,
        )
        try:
            envs = json.loads(res.stdout) if res.returncode == 0 else None
        except ValueError:
            envs = None
        if not isinstance(envs, dict):
            return Env(source="hatch", error=redacted(f"hatch env show failed: {tail(res)}"))
        name = choose(envs, _TEST_ENV in _envs_table(workdir), want)
        if name is None:
            return Env(source="hatch", notes=("hatch declares no env that runs tests here",))
        env = _build(workdir, cache, hatch_dir, hatch, (name, envs[name]), policy, deadline)
        if want is not None and name != want:
            said = f"hatch declares no env {want!r} here: built {name!r}, its own choice"
            env = replace(env, notes=(*env.notes, said))
        return env

    held = checkout_id(workdir) + (f"\0{want}" if want else "")
    with shared(hatch_dir, held, build_env, deadline, workdir) as env:
        yield env


def _build(
    workdir: Path,
    cache: Path,
    hatch_dir: Path,
    hatch: list[str],
    chosen: tuple[str, dict[str, Any]],
    policy: Policy,
    deadline: float,
) -> Env:
    name, body = chosen
    source = f"hatch env {name}"
    env = _env(hatch_dir)
    res = processes.run(
        [*hatch, "env", "create", name],
        cwd=workdir,
        timeout=left(deadline),
        env=env,
        sandbox=policy,
    )
    if res.returncode != 0 or res.timed_out:
        return Env(source=source, error=redacted(f"hatch env create {name} failed: {tail(res)}"))
    found = processes.run(
        [*hatch, "env", "find", name],
        cwd=workdir,
        timeout=left(deadline),
        env=env,
        sandbox=policy,
    )
    venv = Path(found.stdout.strip().splitlines()[-1]) if found.stdout.strip() else None
    if found.returncode != 0 or venv is None or not (venv / "bin" / "python").exists():
        return Env(source=source, error=redacted(f"hatch env find {name} failed: {tail(found)}"))
    bin_dir = venv / "bin"
    res = uv_install(bin_dir / "python", _EXTRA, cache=cache, deadline=deadline, cwd=workdir)
    if res.returncode != 0 or res.timed_out:
        return Env(source=source, error=redacted(f"adding coverage to the hatch env: {tail(res)}"))
    compile_site(bin_dir / "python", deadline)
    line = test_line(name, body)
    variables = body.get("env-vars", {})
    return Env(
        python=bin_dir / "python",
        bin_dir=bin_dir,
        key=hatch_dir.name,
        source=source,
        builder=NAME,
        name=name,
        path_dirs=(bin_dir,),
        commands=(line,) if line else (),
        variables=tuple((str(k), str(v)) for k, v in variables.items()),
    )
