"""Test environments of tox projects, built and entered by tox itself (tox 4, with tox-uv).

A project that declares tox environments has said how its tests run: which deps (factor
conditions and all), which extras or dependency groups, how the package is built and installed,
which ``set_env``, ``pass_env``, ``change_dir`` and ``commands_pre``. Reading tox.ini by hand got
each of those wrong in its own way, so tox does it: ``tox config`` says which environments exist
and what they run, ``tox run --notest`` builds the chosen one (the package included, built from
the checkout, so a version derived from git tags builds), and the suite then runs through
``tox run --skip-env-install`` (nothing is installed at run time: the env stays what its build
sealed, and is read-only to the run) with only ``commands`` overridden by the tester's pytest line.
tox runs ``commands_pre`` and applies ``set_env`` exactly as for the project's maintainers.

tox's work directory lives under verify-dag's cache, one per declaration (the bytes of the files
tox reads) and interpreter, so an unchanged project reuses its env (tox itself decides when the
deps changed). ``tox config``'s answer is kept there too. The env is built once per checkout and
held shared by the phases that use it (static analysis and the suite side by side); a run of
another checkout waits for them before tox installs its package.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import re
import shlex
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from verify_dag import credentials, processes
from verify_dag.files import file_lock, write_atomic
from verify_dag.phases.tester.env.base import (
    Env,
    Runner,
    cache_dir,
    checkout_id,
    compile_site,
    env_from_json,
    env_json,
    holds,
    left,
    portable_id,
    redacted,
    refers_to,
    shared,
    tail,
    uv_install,
)
from verify_dag.phases.tester.env.toxchoice import (
    Choice,
    ToxEnv,
    chosen,
    tox_argv,
    tox_env,
)
from verify_dag.phases.tester.env.toxlines import command_lines as command_lines
from verify_dag.sandbox import Policy
from verify_dag.tools import fetched

# What the tester adds to the project's own deps: coverage for its single measured run, and
# pytest-timeout for the per-test time limit. Added through tox's own override (`deps+=`), the
# same at build and at run, so tox never sees the deps change between the two.
EXTRA_DEPS = ("coverage[toml]", "pytest-timeout")
NAME = "tox"
# The files tox reads its configuration from, whose own syntax errors it stops on.
CONFIG_FILES = ("tox.ini", "tox.toml")
_DECLARING = ("tox.ini", "tox.toml", "pyproject.toml", "setup.cfg", "setup.py")


def declared(workdir: Path) -> bool:
    """Whether ``workdir`` declares tox environments (tox.ini, tox.toml, ``[tool.tox]`` in
    pyproject.toml, ``[tox:tox]`` in setup.cfg): where tox itself would find a configuration."""
    if (workdir / "tox.toml").is_file():
        return True
    ini = workdir / "tox.ini"
    if ini.is_file():
        cfg = _ini(ini)
        return cfg is None or any(s == "tox" or s.startswith("testenv") for s in cfg.sections())
    pyproject = workdir / "pyproject.toml"
    if pyproject.is_file():
        try:
            table = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            table = {}
        if isinstance(table.get("tool", {}).get("tox"), dict):
            return True
    setup_cfg = workdir / "setup.cfg"
    if setup_cfg.is_file():
        cfg = _ini(setup_cfg)
        return cfg is not None and cfg.has_section("tox:tox")
    return False


def _ini(path: Path) -> configparser.ConfigParser | None:
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    return cfg


def work_dir(workdir: Path, cache: Path, *, base: bool = False) -> Path:
    """tox's work directory for this declaration and interpreter (``base``: the merge base's)."""
    return cache_dir(workdir, cache, "tox", _DECLARING, base=base)


@contextlib.contextmanager
def runtime(
    workdir: Path, cache: Path, timeout: float = 900, want: str | None = None
) -> Iterator[Env]:
    """The chosen tox environment of ``workdir`` (env ``want`` when tox lists it), built by tox
    for this checkout and held shared for the block
    (:func:`~verify_dag.phases.tester.env.base.shared`: the static tools and the suite of one
    run use one build). An error is in ``Env.error``; an Env with neither python nor error
    means tox declares nothing that runs tests (the caller falls back to what else the
    project declares)."""
    deadline = time.monotonic() + timeout
    # ``want`` names the env of the verified commit, asked for at its merge base.
    tox_dir = work_dir(workdir, cache, base=want is not None)
    tox_dir.parent.mkdir(parents=True, exist_ok=True)

    def build_env() -> Env:
        tox_dir.mkdir(exist_ok=True)
        choice = chosen(workdir, tox_dir, deadline, want)
        if choice.env is None:
            return Env(source="tox", error=choice.error, notes=choice.notes)
        return build(workdir, cache, tox_dir, choice, deadline)

    held = checkout_id(workdir) + (f"\0{want}" if want else "")
    with shared(tox_dir, held, build_env, deadline, workdir) as env:
        yield env


_SECTION = re.compile(r"\[testenv:([^\]\s]+)\]")


def declaring_env(source: str) -> str | None:
    """The tox env a discovered command came from ("tox.ini [testenv:typing] commands")."""
    m = _SECTION.search(source) if source.startswith(("tox.ini", "setup.cfg")) else None
    return m.group(1) if m else None


def tool_env(workdir: Path, source: str, cache: Path, timeout: float) -> Env | None:
    """The tox env whose commands run a linter's line of ``source``, built by tox."""
    name = declaring_env(source)
    if name is None:
        return None
    return replace(provision(workdir, name, cache, timeout), builder=NAME, name=name)


def provision(workdir: Path, name: str, cache: Path, timeout: float = 900) -> Env:
    """tox env ``name`` of ``workdir``, built by tox from its declaration (deps, dependency
    groups, extras), for a tool one of its commands runs: the tool at the version the project
    declares, on that env's PATH. Built under the lock, used after it read-only."""
    deadline = time.monotonic() + timeout
    # A work directory of its own: the static phase builds these while it holds the test env's.
    tox_dir = work_dir(workdir, cache).with_name(work_dir(workdir, cache).name + "-tools")
    tox_dir.parent.mkdir(parents=True, exist_ok=True)
    want = f"{checkout_id(workdir)}\0{name}"
    portable = portable_id(want, workdir)
    with file_lock(tox_dir.with_suffix(".lock"), deadline) as got:
        if not got:
            return Env(source="tox", error="timed out waiting for another run using the tox env")
        tox_dir.mkdir(exist_ok=True)
        marker = tox_dir / f"verify-dag-{name}.json"
        try:
            kept = json.loads(marker.read_text(encoding="utf-8"))
            if holds(kept, want, portable):
                # This checkout built it already, or this commit did in a checkout the env
                # does not point at: tox would only build the same again.
                return env_from_json(kept["env"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        env = build(workdir, cache, tox_dir, Choice(ToxEnv(name, "", "")), deadline, extra=())
        if env.error is None and env.bin_dir is not None:
            # A wrapper that downloads its tool on first run (pyright) does it now, with the
            # index, not in each sandboxed run without one.
            why = fetched.warm(env.bin_dir, cache, left(deadline))
            if why is not None:
                return Env(source=env.source, error=redacted(why))
        if env.error is None:
            bound = refers_to(env, workdir)
            record = {"want": want, "portable": portable, "bound": bound, "env": env_json(env)}
            write_atomic(marker, json.dumps(record).encode("utf-8"))
        return env


def build(
    workdir: Path,
    cache: Path,
    tox_dir: Path,
    choice: Choice,
    deadline: float,
    extra: tuple[str, ...] = EXTRA_DEPS,
) -> Env:
    """``tox run --notest``: the env's deps and the package, built and installed by tox."""
    assert choice.env is not None
    name = choice.env.name
    base = [*tox_argv(), "run", "-e", name, "--workdir", str(tox_dir)]
    # --override names an env's section as the config format does: TOML `env.NAME`, ini
    # `testenv:NAME` (an override naming the other is silently ignored).
    toml = _toml_prefix(workdir)
    section = f"{toml}env.{name}" if toml is not None else f"testenv:{name}"
    for dep in extra:
        base += ["-x", f"{section}.deps+={dep}"]
    if extra:
        # tox-uv's lock runner syncs the env to uv.lock exactly on every run, deps and all
        # overrides ignored: --inexact keeps what the tester adds (below) through each sync.
        base += ["-x", f"{section}.uv_sync_flags+=--inexact"]
    source = f"tox env {name}"
    notes = choice.notes
    variables = tox_env(tox_dir)
    if choice.env.installs_with_pip:
        # The env installs with its own pip command: tox's own runner (virtualenv, with pip)
        # builds it, as for a maintainer without tox-uv; uv's venvs have no pip.
        variables["TOX_DISABLED_EXTERNAL_PLUGINS"] = "tox-uv"
        notes = (*notes, f"tox env {name} declares a pip install_command: built without tox-uv")
    ours = f"py{sys.version_info.major}{sys.version_info.minor}"
    # The packaging envs' base section: [pkgenv] in ini configs, env_pkg_base in TOML.
    pkg_section = f"{toml}env_pkg_base" if toml is not None else "pkgenv"
    on_ours = tox_dir / _PKG_ON_OURS
    if on_ours.is_file():
        # An earlier build here found the package env's interpreter missing (below): not
        # tried again on every run (1.2 s of a failed tox run on platformdirs).
        base += ["-x", f"{pkg_section}.base_python={ours}"]
        notes = (*notes, on_ours.read_text(encoding="utf-8").strip())
    res = _notest(base, workdir, variables, tox_dir, deadline)
    pkg = _missing_pkg_python(res.stdout + res.stderr, name)
    if res.returncode != 0 and pkg and not on_ours.is_file():
        # The package env asks for an interpreter this host lacks (a default_base_python of a
        # newer Python): the package is built on this one instead, as a maintainer without
        # that Python would; the test env itself is unchanged.
        base += ["-x", f"{pkg_section}.base_python={ours}"]
        said = f"tox's package env {pkg} built on this Python ({ours})"
        notes = (*notes, said)
        res = _notest(base, workdir, variables, tox_dir, deadline)
        if res.returncode == 0:
            write_atomic(on_ours, said.encode("utf-8"))
    if res.timed_out:
        return Env(source=source, error=f"tox run -e {name} --notest timed out")
    if res.returncode != 0:
        return Env(
            source=source, error=redacted(f"tox run -e {name} --notest failed: {tail(res, 25)}")
        )
    bin_dir = tox_dir / name / "bin"
    if extra:
        # Installed again beside the env's own: a lock runner's env never took `deps`.
        res = uv_install(bin_dir / "python", extra, cache=cache, deadline=deadline, cwd=workdir)
        if res.returncode != 0 or res.timed_out:
            return Env(source=source, error=redacted(f"adding {' '.join(extra)}: {tail(res)}"))
        compile_site(bin_dir / "python", deadline)
    return Env(
        python=bin_dir / "python",
        bin_dir=bin_dir,
        key=tox_dir.name,
        source=source,
        builder=NAME,
        name=name,
        path_dirs=(bin_dir,),
        notes=notes,
        writable=(tox_dir,),  # as Runner.writable says
        runner=Runner(
            section=section,
            commands=_argvs(choice.env.commands),
            tox=tuple(base),
            name=name,
            work_dir=tox_dir,
            no_install=(
                ("--skip-env-install",)
                if choice.env.installs_with_pip
                else ("--skip-env-install", "--skip-uv-sync")
            ),
            # Runs through tox have no network and install nothing (--skip-env-install): the
            # env, tox-uv's lock runner's too, is what its build sealed.
            variables=(
                *((k, v) for k, v in variables.items() if k.startswith(("UV_", "TOX_", "NO_"))),
                ("UV_OFFLINE", "1"),
                # tox-uv asks uv for the env's packages on every run, and uv locks its cache to
                # answer: a throwaway one in the run's private /tmp, the env's own read-only.
                ("UV_CACHE_DIR", "/tmp/verify-dag-uv-run"),
                *credentials.declared(choice.env.pass_env).items(),
            ),
        ),
    )


_PKG_ON_OURS = "verify-dag-package-env-on-this-python.txt"
# tox's words when a package env's interpreter is missing, and uv's when tox-uv makes the venv.
_PKG_SKIPPED = re.compile(r"could not find python interpreter .* for package environment (\S+)")
_VENV_FAILED = re.compile(r"^(\S+): exit \d+ .* venv ", re.MULTILINE)


def _missing_pkg_python(output: str, name: str) -> str | None:
    """The package env whose interpreter this host lacks, when that is why the build failed."""
    if m := _PKG_SKIPPED.search(output):
        return m.group(1)
    # uv's own words vary (no such interpreter, one it could not query): the package env's
    # venv step failing is what counts.
    m = _VENV_FAILED.search(output)
    return m.group(1) if m and m.group(1) != name else None


def _toml_prefix(workdir: Path) -> str | None:
    """How tox's --override names this configuration's TOML tables: "" for tox.toml,
    "tool.tox." for pyproject's native [tool.tox]; None for an ini configuration."""
    if (workdir / "tox.ini").is_file():
        return None
    if (workdir / "setup.cfg").is_file():
        cfg = _ini(workdir / "setup.cfg")
        if cfg is not None and cfg.has_section("tox:tox"):
            return None
    try:
        table = tomllib.loads((workdir / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        table = {}
    tox = table.get("tool", {}).get("tox")
    if isinstance(tox, dict):
        return None if "legacy_tox_ini" in tox else "tool.tox."
    return "" if (workdir / "tox.toml").is_file() else None


def _notest(
    base: list[str], workdir: Path, variables: dict[str, str], tox_dir: Path, deadline: float
) -> processes.Result:
    return processes.run(
        [*base, "--notest"],
        cwd=workdir,
        timeout=left(deadline),
        env=variables,
        # The package's build backend and tox's installers run here: the index, no credentials,
        # uv's cache a private one in the work directory.
        sandbox=Policy(network=True, writable=(tox_dir,)),
    )


def _argvs(commands: str) -> tuple[tuple[str, ...], ...]:
    """``tox config``'s ``commands`` value, one command per line, as argument vectors."""
    out = []
    for line in commands.splitlines():
        try:
            argv = shlex.split(line.strip())
        except ValueError:
            continue
        if argv[:1] == ["-"]:
            argv = argv[1:]  # tox's "ignore the exit code" prefix
        if argv:
            out.append(tuple(argv))
    return tuple(out)
