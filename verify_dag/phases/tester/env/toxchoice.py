"""How tox is started, and which tox environment runs the suite: tox's own answer (``tox
config``), asked once per declaration, interpreter and tox version and kept in tox's work
directory.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from verify_dag import processes
from verify_dag.files import write_atomic
from verify_dag.phases.tester.env.base import left, pip_env, private_uv, tail
from verify_dag.sandbox import Policy

# A test environment runs one of these (the ones a lint or docs environment does not).
_RUNS_TESTS = re.compile(r"(?:^|[\s/])(?:pytest|py\.test|unittest|trial|stestr)\b|-m\s+pytest")
_PY_FACTOR = re.compile(r"^(?:py|python)?(\d)\.?(\d+)$|^py(\d)(\d+)$")
_LOG_LINE = re.compile(r"^\S+: [\w-]+> ")
_PIP = re.compile(r"(?:^|[\s/])(?:-\w*m\s+)?pip3?\s+install\b")
_UV_PIP = re.compile(r"(?:^|[\s/])uv\s+pip\s")  # tox-uv's own default install_command


def tox_argv() -> list[str]:
    return [sys.executable, "-m", "tox"]


def tox_env(work_dir: Path) -> dict[str, str]:
    """The environment tox (or nox) runs in: pip's (scrubbed, index settings kept), uv's
    private cache in its work directory (the declared builds and plugins run code of the
    repository's: never with the shared cache writable), never a downloaded interpreter."""
    env = pip_env()
    env.update(
        {
            "UV_CACHE_DIR": str(private_uv(work_dir)),
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_NO_PROGRESS": "1",
            "NO_COLOR": "1",
            "TOX_COLORED": "no",
        }
    )
    return env


@dataclass(frozen=True)
class ToxEnv:
    """One tox environment of the project, as ``tox config`` resolved it."""

    name: str
    commands: str
    base_python: str
    # The env's pass_env as tox resolved it: names and fnmatch patterns of the caller's
    # variables tox hands to its commands (only those that name no secret reach them).
    pass_env: tuple[str, ...] = ()
    install_command: str = ""

    @property
    def installs_with_pip(self) -> bool:
        """Whether the env declares its own pip install command (``python -Im pip install
        ...``): tox-uv's venvs have no pip, and tox-uv hands it uv's options, so such an env
        is built the way tox builds it without tox-uv (virtualenv and pip)."""
        command = self.install_command
        return bool(_PIP.search(command)) and not _UV_PIP.search(command)


@dataclass(frozen=True)
class Choice:
    env: ToxEnv | None
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


_CHOICE = "verify-dag-choice.json"
# 3: every env tox listed, with install_command; a record of another format is asked again.
_FORMAT = 3


def chosen(workdir: Path, tox_dir: Path, deadline: float, want: str | None = None) -> Choice:
    """:func:`choose` among the envs tox lists, asked of tox once per declaration, interpreter
    and tox version: the work directory is keyed by the first two, and ``tox config`` costs a
    tox start (0.6 s)."""
    marker = tox_dir / _CHOICE
    version = _tox_version()
    try:
        kept = json.loads(marker.read_text(encoding="utf-8"))
        if kept.get("tox") == version and kept.get("format") == _FORMAT:
            envs = [ToxEnv(**{**e, "pass_env": tuple(e["pass_env"])}) for e in kept.get("envs", ())]
            return choose(envs, want)
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        pass
    envs, error = listed(workdir, tox_dir, deadline)
    if error is not None:
        return Choice(None, error=error)
    record = {"format": _FORMAT, "tox": version, "envs": [asdict(e) for e in envs]}
    write_atomic(marker, json.dumps(record).encode("utf-8"))
    return choose(envs, want)


def _tox_version() -> str:
    """tox's and its plugin's versions: what ``tox config`` answered with."""
    found = []
    for name in ("tox", "tox-uv"):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} none")
    return ", ".join(found)


def listed(workdir: Path, tox_dir: Path, deadline: float) -> tuple[list[ToxEnv], str | None]:
    """tox's default environments as ``tox config`` resolves them; or why tox could not say."""
    res = processes.run(
        [
            *tox_argv(),
            "config",
            "--workdir",
            str(tox_dir),
            "-k",
            "commands",
            "base_python",
            "pass_env",
            "install_command",
        ],
        cwd=workdir,
        timeout=left(deadline),
        env=tox_env(tox_dir),
        # tox provisions itself (a newer tox, declared plugins) from the index if [tox] requires.
        sandbox=Policy(network=True, writable=(tox_dir,)),
    )
    # tox config exits non-zero when some env cannot be evaluated (an interpreter this host
    # lacks: "# Exception: Skip(...)"), and still prints every env it could.
    envs = parse_config(res.stdout)
    if res.timed_out or (res.returncode != 0 and not envs):
        return [], f"tox config failed: {tail(res)}"
    return envs, None


def choose(envs: list[ToxEnv], want: str | None = None) -> Choice:
    """The tox environment the suite runs in: env ``want`` when tox lists it (the env another
    commit's suite ran in, so that both are built alike); else among tox's default
    environments, the first that runs tests on this interpreter; else the first test
    environment with its Python factor replaced by this interpreter's (``py312-cov`` becomes
    ``py311-cov``), as a maintainer on this Python would run it."""
    named = next((e for e in envs if want is not None and e.name == want), None)
    if named is not None and "# Exception:" not in named.commands:
        return Choice(named)
    choice = _default(envs)
    if want is None or choice.env is None:
        return choice
    said = f"tox declares no env {want!r} here: built {choice.env.name!r}, its own choice"
    return Choice(choice.env, choice.error, (*choice.notes, said))


def _default(envs: list[ToxEnv]) -> Choice:
    tests = [e for e in envs if _RUNS_TESTS.search(e.commands)]
    if not tests:
        return Choice(None, notes=("tox declares no environment that runs tests",))
    ours = f"py{sys.version_info.major}{sys.version_info.minor}"
    for env in tests:
        if _matches(env.base_python) and "# Exception:" not in env.commands:
            return Choice(env)
    first = tests[0]
    factors = first.name.split("-")
    renamed = "-".join(ours if _PY_FACTOR.match(f) else f for f in factors)
    if renamed == first.name:
        renamed = f"{ours}-{first.name}" if first.name != "py" else ours
    note = (
        f"no tox environment runs on Python {sys.version_info.major}.{sys.version_info.minor}: "
        f"ran {renamed!r} ({first.name!r} on this interpreter)"
    )
    renamed_env = ToxEnv(renamed, first.commands, ours, first.pass_env, first.install_command)
    return Choice(renamed_env, notes=(note,))


def parse_config(text: str) -> list[ToxEnv]:
    """The environments of ``tox config`` output (ini: ``[testenv:NAME]`` and ``key = value``
    with indented continuation lines), in tox's order."""
    cfg = configparser.ConfigParser(interpolation=None, strict=False, delimiters=("=",))
    cfg.optionxform = str  # type: ignore[assignment,method-assign]
    # tox's own log lines ("ROOT: venv> uv venv ...") come on the same stream: not config.
    kept = [ln for ln in text.splitlines() if not _LOG_LINE.match(ln)]
    try:
        cfg.read_string("\n".join(kept))
    except configparser.Error:
        return []
    out = []
    for section in cfg.sections():
        if not section.startswith("testenv:"):
            continue
        body = cfg[section]
        out.append(
            ToxEnv(
                name=section.removeprefix("testenv:"),
                commands=body.get("commands", ""),
                base_python=body.get("base_python", ""),
                pass_env=tuple(body.get("pass_env", "").split()),
                install_command=body.get("install_command", ""),
            )
        )
    return out


def _matches(base_python: str) -> bool:
    """Whether tox's ``base_python`` value means this interpreter."""
    major, minor = sys.version_info.major, sys.version_info.minor
    for spec in re.split(r"[,\s]+", base_python.strip()):
        name = Path(spec).name
        if name in ("python", "python3", "py", "py3", f"python{major}", f"py{major}"):
            return True
        m = _PY_FACTOR.match(name.removeprefix("python"))
        if m:
            got = (m.group(1) or m.group(3), m.group(2) or m.group(4))
            return got == (str(major), str(minor))
    return False
