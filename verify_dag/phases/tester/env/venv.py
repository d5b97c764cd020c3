"""The venv of a project that declares its test dependencies without a runner of its own: test
requirements files, the project and its test extra, PEP 735 dependency groups (installed by uv),
pdm's and poetry's test groups (:mod:`~verify_dag.phases.tester.env.plan` reads which), built
by uv (pip where uv refuses), cached by the hash of the declaring files, sealed after its build,
with the project installed per run in a layer over it (:mod:`~verify_dag.phases.tester.env.layer`).

The project itself is not kept in the cached env: its code changes with every commit while the
key only follows the declaring files, so a cached copy would be stale (and for src layouts it
would be what the tests import). Its dependencies stay cached; the project is uninstalled after
the build and installed editable per run and checkout, in a venv of its own that sees the cached
one (made once per run beside the checkout, :mod:`verify_dag.workspace`, and shared by the static
tools, the suite and the exerciser). A marker file is written only after a successful install, so
a half-built env is rebuilt, never reused; a lock file serialises builders of one key.

The last of the env builders (:mod:`~verify_dag.phases.tester.env.registry`): it applies when no
runner the project declares (tox, nox, hatch) has an env that runs its tests.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import re
import shutil
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from verify_dag import processes, workspace
from verify_dag.files import file_lock, write_atomic
from verify_dag.phases.tester.env import layer as testenv_layer
from verify_dag.phases.tester.env import plan as testenv_plan
from verify_dag.phases.tester.env import seal
from verify_dag.phases.tester.env.base import (
    MARKER,
    Env,
    compile_site,
    left,
    pip_env,
    purelib,
    redacted,
    tail,
    uv_bin,
    uv_install,
)
from verify_dag.phases.tester.env.plan import SKIP, InstallPlan
from verify_dag.phases.tester.env.tox import EXTRA_DEPS
from verify_dag.sandbox import Policy

NAME = "venv"
CONFIG_FILES: tuple[str, ...] = ()  # requirements files and pyproject.toml: read by uv and pip
# The build's copy keeps .git: a version derived from git tags (setuptools-scm, hatch-vcs,
# versioneer) is read from it while the project's metadata is generated.
_COPY_SKIP = SKIP - {".git"}
_GROUP_LINES = ".verify-dag-dev-groups.txt"  # pdm's and poetry's test groups, in the build copy


def declared(workdir: Path) -> bool:
    """Whether ``workdir`` declares test dependencies; a declaration that does not parse
    counts (:func:`runtime` says why in the env's error, as the installer would)."""
    try:
        return testenv_plan.read(workdir) is not None
    except (OSError, ValueError, KeyError, TypeError, configparser.Error):
        return True


def tool_env(workdir: Path, source: str, cache: Path, timeout: float) -> Env | None:
    """No linter command line is this builder's to provision."""
    return None


def command_lines(workdir: Path) -> list[tuple[str, str, int]]:
    """Requirements files and dependency groups declare no command lines."""
    return []


@contextlib.contextmanager
def runtime(
    workdir: Path, cache: Path, timeout: float = 900, want: str | None = None
) -> Iterator[Env]:
    """The cached venv of what ``workdir`` declares, layered with the project itself when it
    installs one (``want``: there is one venv per declaration, nothing to choose)."""
    try:
        plan = testenv_plan.read(workdir)
        env = (
            Env()
            if plan is None
            else build(workdir, plan, cache / "envs", time.monotonic() + timeout)
        )
    except (OSError, ValueError, KeyError, TypeError, configparser.Error) as exc:
        env = Env(error=redacted(f"{type(exc).__name__}: {exc}"))
    if env.error is not None or not env.project:
        yield env
        return
    home = workspace.home(workdir)
    if home is not None:
        yield testenv_layer.for_run(env, workdir, home)
        return
    with tempfile.TemporaryDirectory(prefix="verify-dag-test-") as tmp:
        yield testenv_layer.layer(env, workdir, Path(tmp) / "run-env")


def build(workdir: Path, plan: InstallPlan, envs: Path, deadline: float) -> Env:
    """The cached venv of ``plan`` (built under its lock when missing or not as sealed)."""
    key = testenv_plan.key(workdir, plan)
    env_dir = envs / key[:24]
    envs.mkdir(parents=True, exist_ok=True)
    lock = envs / f"{key[:24]}.lock"
    # A finished env is checked under a shared lock, so the phases of a run asking for it at
    # once share one walk of its seal (seal.broken); only a build takes the lock alone.
    with file_lock(lock, deadline, shared=True) as got:
        done = _ready(env_dir) if got else None
        if done is not None and seal.broken(env_dir) is None:
            return _env(env_dir, key, plan.source, reused=True, project=done)
    with file_lock(lock, deadline) as got:
        if not got:
            return Env(
                key=key,
                source=plan.source,
                error="timed out waiting for another run building the same environment",
            )
        done = _ready(env_dir)
        notes: tuple[str, ...] = ()
        if done is not None:
            why = seal.broken(env_dir)
            if why is None:
                return _env(env_dir, key, plan.source, reused=True, project=done)
            notes = (f"the cached env was rebuilt: {why}",)
        shutil.rmtree(env_dir, ignore_errors=True)  # half-built, or not what was sealed
        error, project = _build(workdir, plan, env_dir, deadline)
        if error is not None:
            shutil.rmtree(env_dir, ignore_errors=True)
            return Env(key=key, source=plan.source, error=redacted(error), notes=notes)
        compile_site(env_dir / "bin" / "python", deadline)
        seal.seal(env_dir, frozenset({MARKER}))
        write_atomic(
            env_dir / MARKER,
            json.dumps({"source": plan.source, "project": project}).encode("utf-8"),
        )
    return replace(_env(env_dir, key, plan.source, reused=False, project=project), notes=notes)


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


def _build(
    workdir: Path, plan: InstallPlan, env_dir: Path, deadline: float
) -> tuple[str | None, bool]:
    """(error, whether the project was installed and removed again). The installers run in a
    copy of the checkout: building local packages writes build/ and egg-info next to their
    sources. uv installs (``bench/bench_envbuild.py`` measures it against pip on the same
    declarations); pip is the fallback for what uv refuses (an index only pip's own
    configuration names, a legacy build uv does not run), with uv still installing PEP 735
    groups, which pip learnt only in 25.1."""
    with tempfile.TemporaryDirectory(prefix="verify-dag-env-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(
            workdir, src, symlinks=True, ignore=lambda d, names: _COPY_SKIP & set(names)
        )
        own_pip = testenv_layer.own_pip()
        venv = [sys.executable, "-m", "venv", *(["--without-pip"] if own_pip else [])]
        res = processes.run([*venv, str(env_dir)], timeout=left(deadline), env=pip_env())
        if res.returncode != 0 or res.timed_out:
            return f"python -m venv failed: {tail(res)}", False
        python = env_dir / "bin" / "python"
        if plan.group_lines:
            (src / _GROUP_LINES).write_text("\n".join(plan.group_lines) + "\n", encoding="utf-8")
        wanted = ["pytest", *EXTRA_DEPS]
        for req in plan.requirements:
            wanted += ["-r", req]
        wanted += ["-r", _GROUP_LINES] if plan.group_lines else []
        wanted += [plan.project] if plan.project else []
        groups = [a for g in plan.groups for a in ("--group", f"pyproject.toml:{g}")]
        cache = env_dir.parent.parent  # envs/ sits under verify-dag's cache root
        # What installs from wheels alone goes in first, from uv's shared cache, while the venv
        # is fresh and nothing but uv runs; the build that follows (the project's backend, any
        # sdist) has a private cache and finds those installed. Best effort: a local path or an
        # sdist among them makes uv refuse, and the build then fetches what it needs itself.
        first = [w for w in wanted if w != plan.project] + _static_requirements(src, plan.project)
        uv_install(python, [*first, *groups], cache=cache, deadline=deadline, cwd=src, shared=True)
        res = uv_install(
            python, [*wanted, *groups], cache=cache, deadline=deadline, cwd=src, writable=(src,)
        )
        if res.timed_out:
            return f"installing from {plan.source} timed out", False
        if res.returncode != 0:
            error = _pip_install(python, wanted, src, env_dir, Path(tmp), deadline)
            if error is not None:
                return f"pip install from {plan.source} failed: {error}", False
            if groups:
                res = uv_install(
                    python, groups, cache=cache, deadline=deadline, cwd=src, writable=(src,)
                )
                if res.returncode != 0 or res.timed_out:
                    return f"uv pip install of {plan.source} failed: {tail(res)}", False
        names = _installed_from(python, src)
        if names:
            res = processes.run(
                [uv_bin(), "pip", "uninstall", "--python", str(python), *names],
                cwd=tmp,
                timeout=left(deadline),
                env=pip_env(),
                sandbox=Policy(writable=(env_dir,)),
            )
            if res.returncode != 0:
                return f"removing the project from the cached env failed: {tail(res)}", False
            # Its build requirements, so that each run's editable install can skip build
            # isolation (seconds per run, and no index needed once the env is cached). Best
            # effort: the layer falls back to an isolated build when they are not usable.
            uv_install(python, _build_requires(src), cache=cache, deadline=deadline, cwd=src)
    return None, bool(names)


def _pip_install(
    python: Path, wanted: list[str], src: Path, env_dir: Path, tmp: Path, deadline: float
) -> str | None:
    """pip's install of what uv refused; why it failed too, or None."""
    argv = [*testenv_layer.pip(python), "install", *wanted]
    # Build backends and setup.py files run here: sandboxed, with the index but no
    # credentials, writing only the env being built and the scratch copy.
    build = Policy(network=True, writable=(env_dir, tmp))
    res = processes.run(argv, cwd=src, timeout=left(deadline), env=pip_env(), sandbox=build)
    if res.timed_out:
        return "timed out"
    return tail(res) if res.returncode != 0 else None


def _static_requirements(src: Path, spec: str | None) -> list[str]:
    """The project's own requirements where pyproject.toml states them (PEP 621, not dynamic),
    with those of the extra ``spec`` names (".[test]"); none when the project is not wanted."""
    if spec is None:
        return []
    try:
        project = tomllib.loads((src / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    except (OSError, ValueError, KeyError):
        return []
    dynamic = project.get("dynamic", [])
    out = [] if "dependencies" in dynamic else list(project.get("dependencies", []))
    extra = spec[2:-1] if spec.startswith(".[") else ""
    if extra and "optional-dependencies" not in dynamic:
        out += project.get("optional-dependencies", {}).get(extra, [])
    # Another extra of the project's own ("proj[other]") is the project itself: not a wheel.
    name = str(project.get("name", "")).lower().replace("_", "-")
    return [
        str(r)
        for r in out
        if isinstance(r, str) and not re.match(rf"(?i){re.escape(name)}\s*(\[|$|[<>=!~;])", r)
    ]


def _build_requires(src: Path) -> list[str]:
    pyproject = src / "pyproject.toml"
    table = tomllib.loads(pyproject.read_text(encoding="utf-8")) if pyproject.is_file() else {}
    requires = table.get("build-system", {}).get("requires", ["setuptools>=40.8.0"])
    # setuptools before 70.1 builds wheels (editable ones too) with the separate wheel package.
    extra = ["wheel"] if any(str(r).startswith("setuptools") for r in requires) else []
    return [str(r) for r in requires] + extra


def _installed_from(python: Path, src: Path) -> list[str]:
    """Names of what the installer put in the env from the checkout's root (the project): the
    distributions whose direct_url.json (PEP 610, written by pip and uv alike) points there."""
    site = purelib(python)
    if site is None:
        return []
    where = src.resolve().as_uri().rstrip("/")
    names = []
    for record in sorted(site.glob("*.dist-info/direct_url.json")):
        try:
            url = str(json.loads(record.read_text(encoding="utf-8")).get("url", ""))
        except (OSError, ValueError, AttributeError):
            continue
        if url.rstrip("/") == where:
            names.append(record.parent.name.removesuffix(".dist-info").rsplit("-", 1)[0])
    return names
