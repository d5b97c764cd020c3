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
"""

from __future__ import annotations

import configparser
import contextlib
import fcntl
import functools
import hashlib
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
from dataclasses import dataclass, replace
from pathlib import Path

from verify_dag import util
from verify_dag.models.toolchain import Toolchain

CACHE_VAR = "VERIFY_DAG_CACHE"
_RECIPE = "verify-dag-env-1"  # part of every key: change it when the way envs are built changes
_MARKER = ".verify-dag-ready"
_TOX_DEPS = ".verify-dag-tox-deps.txt"
# Test requirements first (the first pattern that matches wins), then the runtime ones.
_TEST_REQUIREMENTS = ("requirements-test*.txt", "requirements_test*.txt", "requirements/test*.txt",
                      "test-requirements.txt", "test_requirements.txt", "requirements-dev.txt",
                      "requirements_dev.txt", "requirements/dev*.txt")
_EXTRAS = ("test", "tests", "testing", "dev")
_NODE_RUNNERS = frozenset({"npm", "npx", "yarn", "pnpm", "node"})
_SKIP = frozenset({".git", "node_modules", ".tox", ".nox", ".venv", "__pycache__"})
_INCLUDE = re.compile(r"^(?:-r|-c|--requirement|--constraint)[\s=]*(\S+)")
_SELF = re.compile(r"^(?:(?:-e|--editable)[\s=]*)?(?:file:)?\./?(?:\[[^\]]*\])?$")
_LOCAL = re.compile(r"^(?:(?:-e|--editable)[\s=]*)?(?:file:)?(\.{1,2}/\S*)")
_USERINFO = re.compile(r"(://)[^/@\s]+@")
# Our own interpreter's path setup must not leak into the repository's env.
_PY_LEAKS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PIP_USER")


@dataclass(frozen=True)
class Env:
    python: Path | None = None  # None: nothing to install, the suite runs on our interpreter
    bin_dir: Path | None = None
    key: str = ""
    reused: bool = False
    source: str = ""  # what was installed from: "requirements-test.txt, pyproject.toml [...]"
    error: str | None = None
    project: bool = False  # the project is installed per run (layer), not kept in the cache
    path_dirs: tuple[Path, ...] = ()  # prepended to PATH for the suite
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Plan:
    requirements: tuple[str, ...]  # repo-relative files passed to pip with -r
    tox_lines: tuple[str, ...]  # tox deps, written to a requirements file in the build's copy
    project: str | None  # "." or ".[extra]": the project's own dependencies are wanted
    source: str
    hashed: tuple[str, ...]  # repo-relative files and directories whose bytes make the key


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_VAR) or Path.home() / ".cache" / "verify-dag")


def provision(workdir: Path, toolchain: Toolchain, cache_dir: Path | None = None,
              timeout: float = 900) -> Env:
    """The environment the suite of ``workdir`` runs in; failures are in ``Env.error``."""
    command = toolchain.test
    root = cache_dir if cache_dir is not None else cache_root()
    try:
        if command is not None and Path(command.argv[0]).name in _NODE_RUNNERS:
            return _node(workdir, root / "node", timeout) if (
                workdir / "package.json").is_file() else Env()
        plan = _plan(workdir)
        if plan is None:
            return Env()
        return _python(workdir, plan, root / "envs", time.monotonic() + timeout)
    except (OSError, ValueError, KeyError, TypeError, configparser.Error) as exc:
        return Env(error=clean(f"{type(exc).__name__}: {exc}"))


def suite_env(env: Env, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the suite runs in: scrubbed, and inside the venv when there is one."""
    out = util.scrubbed_env(extra)
    if env.python is None:
        return out
    for name in _PY_LEAKS:
        out.pop(name, None)
    assert env.bin_dir is not None
    out["VIRTUAL_ENV"] = str(env.bin_dir.parent)
    out["PATH"] = os.pathsep.join([*map(str, env.path_dirs), out.get("PATH", os.defpath)])
    return out


@contextlib.contextmanager
def runtime(workdir: Path, toolchain: Toolchain, cache_dir: Path | None = None) -> Iterator[Env]:
    """The environment a test of ``workdir`` runs in, for the duration of the block: the cached
    env, layered with the project itself when it installs one. Check ``error`` first."""
    env = provision(workdir, toolchain, cache_dir)
    if env.error is not None or not env.project:
        yield env
        return
    with tempfile.TemporaryDirectory(prefix="verify-dag-test-") as tmp:
        yield layer(env, workdir, Path(tmp) / "run-env")


def layer(env: Env, workdir: Path, dest: Path, timeout: float = 900) -> Env:
    """A per-run venv over the cached ``env`` with the project installed editable from
    ``workdir``. The cached env's site-packages is added with ``site.addsitedir`` from a .pth
    file, so its own .pth files (editable dependencies, namespace packages) still work."""
    assert env.python is not None and env.bin_dir is not None
    res = util.run([sys.executable, "-m", "venv", "--without-pip", str(dest)],
                   timeout=timeout, env=_pip_env())
    if res.returncode != 0:
        return replace(env, error=clean(f"could not create the run venv: {_tail(res)}"))
    (_purelib(dest) / "_verify_dag_base.pth").write_text(
        f"import site; site.addsitedir({str(_purelib(env.bin_dir.parent))!r})\n", encoding="utf-8")
    python = dest / "bin" / "python"
    # --no-deps: the dependencies are in the cached env already; the worktree is throwaway, so
    # the build files an editable install leaves in it (egg-info, build/) harm nothing.
    argv = [*_pip(python), "install", "--no-deps", "-e", str(workdir)]
    res = util.run([*argv, "--no-build-isolation"], cwd=workdir, timeout=timeout, env=_pip_env())
    if res.returncode != 0 and not res.timed_out:
        res = util.run(argv, cwd=workdir, timeout=timeout, env=_pip_env())
    if res.returncode != 0 or res.timed_out:
        return replace(env, error=clean(f"installing the project into the run venv failed "
                                        f"({env.source}): {_tail(res)}"))
    return replace(env, python=python, bin_dir=python.parent,
                   path_dirs=(python.parent, *env.path_dirs))


def clean(text: str) -> str:
    """Redacted text for findings: secret values and credentials in index URLs removed."""
    return _USERINFO.sub(r"\1[REDACTED]@", util.redact(text))


# -- what the repository declares -------------------------------------------------------------

def _plan(workdir: Path) -> _Plan | None:
    reqs = _test_requirements(workdir)
    tox = None if reqs else _tox(workdir)
    if tox is None and (workdir / "requirements.txt").is_file() and reqs != ["requirements.txt"]:
        reqs.append("requirements.txt")  # the runtime dependencies the tests import
    declared, extra = _project(workdir)
    spec = (f".[{extra}]" if extra else ".") if declared else None
    sources, tox_lines = list(reqs), tuple[str, ...]()
    if tox is not None:
        tox_lines, skip_install, extras = tox
        sources = ["tox.ini [testenv] deps"]
        if declared:
            spec = None if skip_install else f".[{extras}]" if extras else "."
    if not reqs and not tox_lines and spec is None:
        return None
    hashed = {p for p in ("pyproject.toml", "setup.py", "setup.cfg", "tox.ini")
              if (workdir / p).is_file()}
    hashed |= _references(workdir, tox_lines, "")
    for req in reqs:
        hashed |= {req, *_references(workdir, _lines(workdir / req), os.path.dirname(req))}
    every = [ln for r in reqs for ln in _lines(workdir / r)] + list(tox_lines)
    if any(ln and _SELF.match(ln) for ln in every):
        spec = None  # `-e .` in a requirements file: the project comes in from there
    elif spec is not None:
        sources.append(f"{declared} {spec}")
    return _Plan(tuple(reqs), tuple(tox_lines), spec, ", ".join(sources), tuple(sorted(hashed)))


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


def _lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [ln.split(" #")[0].strip() for ln in text.splitlines() if not ln.startswith("#")]


def _references(workdir: Path, lines: list[str] | tuple[str, ...], base: str,
                seen: frozenset[str] = frozenset()) -> set[str]:
    """The files requirement ``lines`` include (-r/-c, relative to their file) and the local
    directories they install (relative to pip's working directory, the checkout's root), as
    repo-relative paths: their bytes decide what the env contains, so they make the key."""
    out: set[str] = set()
    for line in lines:
        if m := _INCLUDE.match(line):
            inc = os.path.normpath(os.path.join(base, m.group(1)))
            path = workdir / inc
            if inc not in seen and path.is_file() and _inside(workdir, path):
                out |= {inc, *_references(workdir, _lines(path), os.path.dirname(inc),
                                          seen | {inc})}
        elif ((m := _LOCAL.match(line)) and (target := workdir / m.group(1).split("[")[0]).is_dir()
              and _inside(workdir, target) and target.resolve() != workdir.resolve()):
            out.add(target.resolve().relative_to(workdir.resolve()).as_posix())
    return out


def _inside(workdir: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(workdir.resolve())


def _key(workdir: Path, plan: _Plan) -> str:
    h = hashlib.sha256(f"{_RECIPE}\0{sys.version}\0{os.path.realpath(sys.executable)}\0"
                       f"{plan.requirements}\0{plan.tox_lines}\0{plan.project}\0".encode())
    for rel in plan.hashed:
        for path in _files(workdir / rel):
            h.update(path.relative_to(workdir).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            yield Path(dirpath) / name


# -- building ---------------------------------------------------------------------------------

def _python(workdir: Path, plan: _Plan, envs: Path, deadline: float) -> Env:
    key = _key(workdir, plan)
    env_dir = envs / key[:24]
    envs.mkdir(parents=True, exist_ok=True)
    with _locked(envs / f"{key[:24]}.lock", deadline) as got:
        if not got:
            return Env(key=key, source=plan.source,
                       error="timed out waiting for another run building the same environment")
        done = _ready(env_dir)
        if done is not None:
            return _env(env_dir, key, plan.source, reused=True, project=done)
        shutil.rmtree(env_dir, ignore_errors=True)  # a half-built env from a run that died
        error, project = _build(workdir, plan, env_dir, deadline)
        if error is not None:
            shutil.rmtree(env_dir, ignore_errors=True)
            return Env(key=key, source=plan.source, error=clean(error))
        tmp = env_dir / f"{_MARKER}.tmp"
        tmp.write_text(json.dumps({"source": plan.source, "project": project}), encoding="utf-8")
        os.replace(tmp, env_dir / _MARKER)
    return _env(env_dir, key, plan.source, reused=False, project=project)


def _env(env_dir: Path, key: str, source: str, *, reused: bool, project: bool) -> Env:
    bin_dir = env_dir / "bin"
    return Env(python=bin_dir / "python", bin_dir=bin_dir, key=key, reused=reused, source=source,
               project=project, path_dirs=(bin_dir,))


def _ready(env_dir: Path) -> bool | None:
    """Whether the finished env at ``env_dir`` needs the project layered; None if not finished."""
    try:
        marker = json.loads((env_dir / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return bool(marker.get("project")) if (env_dir / "bin" / "python").exists() else None


def _build(workdir: Path, plan: _Plan, env_dir: Path, deadline: float) -> tuple[str | None, bool]:
    """(error, whether the project was installed and removed again). pip runs in a copy of the
    checkout: building local packages writes build/ and egg-info next to their sources."""
    with tempfile.TemporaryDirectory(prefix="verify-dag-env-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(workdir, src, symlinks=True, ignore=lambda d, names: _SKIP & set(names))
        venv = [sys.executable, "-m", "venv", *(["--without-pip"] if _own_pip() else [])]
        res = util.run([*venv, str(env_dir)], timeout=_left(deadline), env=_pip_env())
        if res.returncode != 0 or res.timed_out:
            return f"python -m venv failed: {_tail(res)}", False
        pip = _pip(env_dir / "bin" / "python")
        report = Path(tmp) / "report.json"
        argv = [*pip, "install", "--report", str(report), "pytest", "coverage"]
        if plan.tox_lines:
            (src / _TOX_DEPS).write_text("\n".join(plan.tox_lines) + "\n", encoding="utf-8")
        for req in (*plan.requirements, *([_TOX_DEPS] if plan.tox_lines else [])):
            argv += ["-r", req]
        argv += [plan.project] if plan.project else []
        res = util.run(argv, cwd=src, timeout=_left(deadline), env=_pip_env())
        if res.timed_out:
            return f"installing from {plan.source} timed out", False
        if res.returncode != 0:
            return f"pip install from {plan.source} failed: {_tail(res)}", False
        names = _installed_from(report, src)
        if names:
            res = util.run([*pip, "uninstall", "-y", *names], cwd=tmp,
                           timeout=_left(deadline), env=_pip_env())
            if res.returncode != 0:
                return f"removing the project from the cached env failed: {_tail(res)}", False
            # Its build requirements, so that each run's editable install can skip build
            # isolation (seconds per run, and no index needed once the env is cached). Best
            # effort: layer() falls back to an isolated build when they are not usable.
            util.run([*pip, "install", *_build_requires(src)], cwd=tmp,
                     timeout=_left(deadline), env=_pip_env())
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
    return [item["metadata"]["name"] for item in data.get("install", ())
            if item.get("download_info", {}).get("url") == src.resolve().as_uri()]


def _node(workdir: Path, cache: Path, timeout: float) -> Env:
    """npm ci (npm install without a lockfile). node_modules is cached by the lockfile's hash and
    linked into the worktree only when that is safe: no workspaces, no local file: packages and
    no install scripts of the project's own, which would have to run in the worktree itself."""
    if shutil.which("npm") is None:
        return Env(notes=("npm is not on PATH: node dependencies were not installed",))
    lock = workdir / "package-lock.json"
    pkg = json.loads((workdir / "package.json").read_text(encoding="utf-8"))
    specs = [str(v) for k in ("dependencies", "devDependencies") for v in pkg.get(k, {}).values()]
    hooks = set(pkg.get("scripts", {})) & {"preinstall", "install", "postinstall", "prepare"}
    local = any(v.startswith(("file:", "link:", "workspace:")) for v in specs)
    if not lock.is_file() or "workspaces" in pkg or hooks or local:
        verb = "ci" if lock.is_file() else "install"
        res = util.run(["npm", verb, "--no-audit", "--no-fund"], cwd=workdir, timeout=timeout,
                       env=_pip_env())
        error = None if res.returncode == 0 else clean(f"npm {verb} failed: {_tail(res)}")
        return Env(source=f"package.json (npm {verb})", error=error,
                   notes=(f"npm {verb} ran in the worktree: node_modules not cached",))
    key = hashlib.sha256(_RECIPE.encode() + (workdir / "package.json").read_bytes()
                         + lock.read_bytes()).hexdigest()
    target = cache / key[:24]
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f"{key[:24]}.lock", time.monotonic() + timeout) as got:
        reused = (target / _MARKER).is_file()
        if got and not reused:
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            shutil.copy2(workdir / "package.json", target)
            shutil.copy2(lock, target)
            res = util.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=target, timeout=timeout,
                           env=_pip_env())
            if res.returncode != 0:
                return Env(key=key, source="package-lock.json",
                           error=clean(f"npm ci failed: {_tail(res)}"))
            (target / "node_modules").mkdir(exist_ok=True)  # npm ci makes none without deps
            (target / _MARKER).write_text("ok", encoding="utf-8")
    if not (target / _MARKER).is_file():
        return Env(key=key, source="package-lock.json", error="timed out waiting for npm ci")
    if not (workdir / "node_modules").exists():
        (workdir / "node_modules").symlink_to(target / "node_modules", target_is_directory=True)
    return Env(key=key, reused=reused, source="package-lock.json (npm ci, cached)")


@contextlib.contextmanager
def _locked(path: Path, deadline: float) -> Iterator[bool]:
    with open(path, "a+b") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.2)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pip_env() -> dict[str, str]:
    # Proxies, index URLs and pip's own settings stay (they are what lets pip reach an index);
    # secret-looking names go, as for any repository code: setup.py runs during the build.
    env = util.scrubbed_env({"PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                             "PYTHONDONTWRITEBYTECODE": "1"})
    for name in _PY_LEAKS:
        env.pop(name, None)
    return env


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
    return Path(sysconfig.get_path("purelib", "venv", vars={"base": str(venv),
                                                             "platbase": str(venv)}))


def _left(deadline: float) -> float:
    return max(1.0, deadline - time.monotonic())


def _tail(res: util.Result, lines: int = 15) -> str:
    text = "\n".join(t for t in (res.stdout.strip(), res.stderr.strip()) if t)
    return "\n".join(text.splitlines()[-lines:])
