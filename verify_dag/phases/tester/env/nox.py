"""Test environments of nox projects, built by nox itself.

A noxfile is Python: what a session installs is whatever its code does, so it is not read, it is
run. ``nox --list --json`` names the sessions and their interpreters; ``nox -s S --install-only``
runs the chosen session with every ``session.run`` skipped, which leaves its venv holding exactly
what the session installs (the project included, built from the checkout). The lines those
skipped ``session.run`` calls would have run are recorded as nox resolved them (posargs, paths,
``env=``), and the first that runs pytest is the suite's line, as a tox env's ``commands`` are.
The suite then runs on that venv's interpreter with that line and the tester's own options;
coverage and pytest-timeout are added to the venv by uv, as for every env the tester measures.

nox's venvs live under verify-dag's cache, one directory per declaration and interpreter, built
once per checkout and held shared while a run uses them (``--reuse-venv yes``: the session's
installs still run, so the checkout's own code is what gets installed).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from verify_dag import processes
from verify_dag.phases.tester import pytest_command
from verify_dag.phases.tester.env.base import (
    Env,
    cache_dir,
    checkout_id,
    compile_site,
    left,
    redacted,
    shared,
    tail,
    uv_bin,
    uv_install,
)
from verify_dag.phases.tester.env.tox import EXTRA_DEPS
from verify_dag.phases.tester.env.toxchoice import tox_env
from verify_dag.sandbox import Policy

# nox itself, with ``Session.run`` (the session's public API) wrapped: under --install-only
# nox skips the call, and the wrapper first writes down the line and the variables it was
# given, one JSON object per call, to the file named by _LINES_VAR. Run with -c: run as a file,
# its directory would come first on sys.path, and this module is named nox too.
_LINES_VAR = "VERIFY_DAG_NOX_LINES"
_RECORDER = f"""
import json, os, sys
import nox.sessions
from nox.__main__ import main

_run = nox.sessions.Session.run

def run(self, *args, **kwargs):
    if self._runner.global_config.install_only and args and not callable(args[0]):
        env = kwargs.get("env") or {{}}
        line = {{
            "session": self.name,
            "args": [os.fspath(a) for a in args],
            "env": {{
                k: v for k, v in {{**self.env, **env}}.items() if isinstance(v, str)
            }},
        }}
        with open(os.environ["{_LINES_VAR}"], "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\\n")
    return _run(self, *args, **kwargs)

nox.sessions.Session.run = run
sys.argv[0] = "nox"
sys.exit(main())
"""
_TEST_NAME = re.compile(r"^(?:tests?|pytest|unit|unittests?|test[-_].*|tests[-_].*)$")
NAME = "nox"
# The files nox reads its configuration from, whose own syntax errors it stops on.
CONFIG_FILES = ("noxfile.py",)
_DECLARING = ("noxfile.py", "pyproject.toml", "setup.cfg", "setup.py")


def declared(workdir: Path) -> bool:
    return (workdir / "noxfile.py").is_file()


def tool_env(workdir: Path, source: str, cache: Path, timeout: float) -> Env | None:
    """No linter command line is this builder's to provision."""
    return None


def command_lines(workdir: Path) -> list[tuple[str, str, int]]:
    """A noxfile is Python: the lines its sessions run are not read, they are run."""
    return []


def _nox() -> list[str]:
    return [sys.executable, "-m", "nox"]


def _env(envdir: Path) -> dict[str, str]:
    env = tox_env(envdir)  # the same installer settings: a private uv cache, no downloaded Python
    # nox finds uv (its uv backend) on PATH: the one installed beside verify-dag.
    env["PATH"] = os.pathsep.join([str(Path(uv_bin()).parent), env.get("PATH", "")])
    return env


def _dir(workdir: Path, cache: Path, *, base: bool = False) -> Path:
    """nox's work directory for this declaration and interpreter (``base``: the merge base's)."""
    return cache_dir(workdir, cache, "nox", _DECLARING, base=base)


def _runs_tests(workdir: Path) -> set[str]:
    """Names of the noxfile's session functions whose code mentions pytest or unittest."""
    try:
        tree = ast.parse((workdir / "noxfile.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            text = ast.dump(node)
            if "pytest" in text or "unittest" in text:
                out.add(node.name)
    return out


def choose(
    sessions: list[dict[str, object]], testing: set[str], want: str | None = None
) -> str | None:
    """The session to build: session ``want`` when nox lists it (the one another commit's
    suite ran in); else a test session (by its code, else by its name) on this interpreter, or
    one with no interpreter of its own."""
    if want is not None and any(s.get("session") == want for s in sessions):
        return want
    ours = f"{sys.version_info.major}.{sys.version_info.minor}"
    tests = [s for s in sessions if s.get("name") in testing] or [
        s for s in sessions if _TEST_NAME.match(str(s.get("name", "")))
    ]
    for session in tests:
        if session.get("python") in (None, ours, f"python{ours}"):
            return str(session.get("session"))
    return None


@contextlib.contextmanager
def runtime(
    workdir: Path, cache: Path, timeout: float = 900, want: str | None = None
) -> Iterator[Env]:
    """The chosen nox session's venv, built by nox for this checkout and held shared for the
    block (as tox's: :func:`~verify_dag.phases.tester.env.base.shared`); an Env with neither
    python nor error when the noxfile has no test session for this interpreter."""
    deadline = time.monotonic() + timeout
    envdir = _dir(workdir, cache, base=want is not None)  # want: the head's session, at the base
    envdir.parent.mkdir(parents=True, exist_ok=True)

    def build_env() -> Env:
        envdir.mkdir(exist_ok=True)
        policy = Policy(network=True, writable=(envdir,))
        res = processes.run(
            [*_nox(), "--list", "--json", "--envdir", str(envdir)],
            cwd=workdir,
            timeout=left(deadline),
            env=_env(envdir),
            sandbox=policy,
        )
        try:
            sessions = json.loads(res.stdout) if res.returncode == 0 else None
        except ValueError:
            sessions = None
        if not isinstance(sessions, list):
            return Env(source="nox", error=redacted(f"nox --list failed: {tail(res)}"))
        name = choose(sessions, _runs_tests(workdir), want)
        if name is None:
            return Env(source="nox", notes=("the noxfile has no test session for this Python",))
        env = _build(workdir, cache, envdir, name, policy, deadline)
        if want is not None and name != want:
            said = f"the noxfile has no session {want!r} here: built {name!r}, its own choice"
            env = replace(env, notes=(*env.notes, said))
        return env

    held = checkout_id(workdir) + (f"\0{want}" if want else "")
    with shared(envdir, held, build_env, deadline, workdir) as env:
        yield env


def _build(
    workdir: Path, cache: Path, envdir: Path, name: str, policy: Policy, deadline: float
) -> Env:
    source = f"nox session {name}"
    lines = envdir / f".lines-{os.getpid()}.jsonl"
    lines.unlink(missing_ok=True)
    res = processes.run(
        [
            sys.executable,
            "-c",
            _RECORDER,
            "-s",
            name,
            "--install-only",
            "--reuse-venv",
            "yes",
            "--envdir",
            str(envdir),
            "--default-venv-backend",
            "uv",
        ],
        cwd=workdir,
        timeout=left(deadline),
        env={**_env(envdir), _LINES_VAR: str(lines)},
        sandbox=policy,
    )
    commands, variables = _pytest_lines(lines, name, workdir)
    if res.returncode != 0 or res.timed_out:
        return Env(
            source=source, error=redacted(f"nox -s {name} --install-only failed: {tail(res)}")
        )
    # The session's own venv, where nox names it: a session may notify others (a coverage
    # report), whose venvs are made beside it in the same run.
    from nox.sessions import _normalize_path  # imported late: nox's, only nox projects need it

    venv = Path(_normalize_path(str(envdir), name))
    if not (venv / "bin" / "python").exists():
        return Env(source=source, error=f"nox -s {name} --install-only made no venv at {venv}")
    bin_dir = venv / "bin"
    res = uv_install(
        bin_dir / "python", ["pytest", *EXTRA_DEPS], cache=cache, deadline=deadline, cwd=workdir
    )
    if res.returncode != 0 or res.timed_out:
        return Env(source=source, error=redacted(f"adding coverage to the nox venv: {tail(res)}"))
    compile_site(bin_dir / "python", deadline)
    return Env(
        python=bin_dir / "python",
        bin_dir=bin_dir,
        key=envdir.name,
        source=source,
        builder=NAME,
        name=name,
        path_dirs=(bin_dir,),
        commands=commands,
        variables=variables,
    )


def _pytest_lines(
    lines: Path, name: str, workdir: Path
) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, str], ...]]:
    """The pytest lines session ``name`` would have run (and the variables of the first), from
    the recorder's file, which goes; paths into the checkout made relative to it, where nox runs
    its commands, so the line reads as written and holds on a copy of the checkout."""
    try:
        text = lines.read_text(encoding="utf-8")
    except OSError:
        return (), ()
    finally:
        lines.unlink(missing_ok=True)
    root = workdir.resolve()
    commands: list[tuple[str, ...]] = []
    variables: tuple[tuple[str, str], ...] = ()
    for raw in text.splitlines():
        try:
            call = json.loads(raw)
            argv = tuple(_relative(str(a), root) for a in call["args"])
            env = call.get("env") or {}
        except (ValueError, KeyError, TypeError):
            continue
        if call.get("session") != name or pytest_command.args(argv) is None:
            continue
        if not commands:
            variables = tuple((str(k), str(v)) for k, v in env.items())
        commands.append(argv)
    return tuple(commands), variables


def _relative(arg: str, root: Path) -> str:
    path = Path(arg)
    if not path.is_absolute() or not path.is_relative_to(root):
        return arg
    return path.relative_to(root).as_posix() or "."
