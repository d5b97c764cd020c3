"""Shared fixtures and helpers: real git repositories made in tmp_path, the command line run
as a user runs it, the fake model CLI put in front of PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import install

from verify_dag import report
from verify_dag.cli import main
from verify_dag.models import Diagnosis, SkillOutcome


class Repo:
    """A real git repository in tmp_path with small helpers for building histories."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def git(self, *args: str) -> str:
        out = subprocess.run(
            ["git", *args], cwd=self.path, check=True, capture_output=True, text=True
        )
        return out.stdout.strip()

    def write(self, rel: str, content: str | bytes) -> Path:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
        return p

    def commit(self, message: str = "change", *paths: str) -> str:
        self.git("add", "-A", *(["--", *paths] if paths else []))
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")


def write(root: Path, files: dict[str, str]) -> Path:
    """Files (relative path -> text) written under ``root``, directories made as needed."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def make_repo(path: Path, branch: str = "main") -> Repo:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", branch, str(path)], check=True)
    repo = Repo(path)
    repo.git("config", "user.name", "Test User")
    repo.git("config", "user.email", "test@example.com")
    repo.git("config", "commit.gpgsign", "false")
    return repo


def calc_base(repo: Repo) -> Repo:
    """The base of the small calculator projects many tests branch from: ``src/calc.py`` with
    ``add``, one passing test, pytest configured; committed and tagged ``base``."""
    repo.write(
        "pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n'
    )
    repo.write("src/calc.py", "def add(a, b):\n    return a + b\n")
    repo.write(
        "tests/test_calc.py",
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n",
    )
    repo.commit("calc: add")
    repo.git("tag", "base")
    return repo


def venv_by_hand(venv: Path, *requirements: str, cwd: Path) -> str:
    """A venv built by hand as a test's oracle: ``python -m venv`` with ``requirements`` installed
    (pip's arguments, run in ``cwd``); returns its interpreter. uv installs what pip would resolve
    (the index's newest matches, editable installs included) without ensurepip and pip's own
    start-up: about 20 s of CPU less for each oracle on a 2-core machine."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    installed = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", python, *requirements],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    return python


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def calc(repo: Repo) -> Repo:
    """A branch adding two unused imports (ruff F401, fixable) and mean() that divides by zero."""
    calc_base(repo)
    from fixdata import CHANGED

    repo.write("src/calc.py", CHANGED)
    repo.commit("mean")
    return repo


@pytest.fixture(scope="session", autouse=True)
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A home of the session's own for what runs outside a test's (module and session
    fixtures run before ``_isolated_git``): never the developer's real caches and configs.
    A module fixture that verified in the real home kept its results in ~/.cache/verify-dag,
    where a later session's identical project (same tmp paths) found them: its suite never ran."""
    home = tmp_path_factory.mktemp("session-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
            patch.delenv(name, raising=False)
        patch.delenv("VERIFY_DAG_CACHE", raising=False)
        patch.delenv("VERIFY_DAG_RESULT_CACHE", raising=False)
        yield


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # A developer's global git config (hooks, signing, templates) must not change test outcomes.
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("VERIFY_DAG_BROKER_URL", raising=False)
    # In-process runs write their reports to the store: never the developer's real one.
    monkeypatch.setenv("VERIFY_DAG_STORE", str(tmp_path / "store"))
    yield


# Directories of tmp_path that hold environments, caches and checkouts, never a report.
_NO_REPORTS = frozenset(
    {
        ".git",
        "envs",
        "site-packages",
        "node_modules",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "uv",
        "__pycache__",
        "checkouts",
        "tools",
        "node",
        "mirrors",
        ".mypy_cache",
        ".ruff_cache",
    }
)


def reports_under(root: Path) -> Iterator[Path]:
    """Every JSON v1 report written under ``root``: --output files and the store's report.json."""
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NO_REPORTS]
        for name in files:
            path = Path(top, name)
            if not name.endswith(".json") or path.stat().st_size > 32 * 1024 * 1024:
                continue
            head = path.read_bytes()[:200]
            if head.startswith(b"{") and b'"schemaVersion": 1' in head:
                yield path


@pytest.fixture(autouse=True)
def _every_report_is_v1(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """Every report a test wrote, whatever wrote it (the CLI in this process or in its own, the
    store, a worker), matches schemas/report.v1.schema.json: the exact shapes of JSON v1 hold in
    every report the suite makes, not only in the ones a test looks at. A test that writes a
    broken report on purpose says so with ``@pytest.mark.invalid_reports``."""
    yield
    if request.node.get_closest_marker("invalid_reports") is not None:
        return
    for path in reports_under(tmp_path):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue  # not a whole document: the test that wrote it tests just that
        if isinstance(doc, dict) and doc.get("schemaVersion") == 1 and "skillResults" in doc:
            report.validate(doc)


def make_scenario(path: Path) -> Repo:
    """The issue's acceptance scenario: a branch that adds a lint error on a new line, keeps an
    old lint error on an unchanged line and adds a failing test; the base is tagged ``base``."""
    repo = make_repo(path)
    repo.write(
        "pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n'
    )
    repo.write("src/calc.py", "import os\n\n\ndef add(a, b):\n    return a + b\n")
    repo.write(
        "tests/test_calc.py",
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n",
    )
    repo.commit("calc: add")
    repo.git("tag", "base")
    repo.write(
        "src/calc.py",
        "import os\n\n\ndef add(a, b):\n    return a + b\n\n\n"
        "def mul(a, b):\n    unused = 1\n    return a * b + 1\n",
    )
    repo.write(
        "tests/test_calc.py",
        "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
        "def test_mul():\n    assert mul(3, 4) == 12\n",
    )
    repo.commit("calc: mul")
    return repo


@pytest.fixture
def scenario(tmp_path: Path) -> Repo:
    return make_scenario(tmp_path / "scenario")


# Modules whose tests take tens of seconds each: a browser, a terminal, RabbitMQ, SIGKILLed
# workers, twenty concurrent runs, hostile build backends, pre-commit installing the hook. They are
# marked `slow` and run last, so a failure in the fast tests shows within a minute or two;
# `pytest -m "not slow"` runs the rest alone.
SLOW_MODULES = frozenset(
    {
        "test_hostile.py",  # hostile packages, each built under both sandbox launchers
        "test_sandbox.py",  # the sandbox's guarantees, under both launchers
        "test_flower.py",  # Flower and headless Chromium
        "test_interactive.py",  # interactive mode in a real tmux terminal
        "test_rabbitmq.py",  # a run on RabbitMQ in a virtual host of its own
        "test_concurrency.py",  # twenty runs from two clients on two workers
        "test_faults.py",  # workers killed with SIGKILL mid-run
        "test_ci_examples.py",  # pre-commit installs the hook once, tens of seconds
        "test_plugin_suites.py",  # tox builds jaraco-style suites' envs
        "test_ops.py",  # the worker image's entrypoint and health check, run for real
    }
)


def _starts_servers(module: object) -> bool:
    return any(
        getattr(value, "__module__", None) == "redis_workers"
        or getattr(value, "__name__", None) == "redis_workers"
        for value in vars(module).values()
    )


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture its module sets up once for several tests (a server, a
    built image): such a module's tests stay on one xdist worker, where that fixture lives."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        d.scope != "function" and d.baseid.endswith(".py")
        for defs in info.name2fixturedefs.values()
        for d in defs
    )


# First: xdist's own hook (on each worker) turns the xdist_group marker into the node id's
# ``@group`` suffix its scheduler reads, so the marker must be on the item before that hook runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        module = getattr(item, "module", None)
        if module is not None and _starts_servers(module):
            item.add_marker(pytest.mark.integration)
        # Under --dist loadgroup every other test is handed out on its own, so a long module
        # (the hostile suite under both launchers) spreads over the workers instead of being
        # the run's tail on one of them.
        if _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.path.name))
    # Stable: the fast tests first, each file's tests still in file order; xdist hands them out
    # in this order too.
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two xdist workers per core. Most tests spend much of their time waiting
    (a Celery worker starting, a visibility timeout, a cron minute, a sandboxed suite's I/O):
    measured on 2 cores, 4 workers finish the suite in 685 s where 2 take 790 s."""
    return 2 * len(os.sched_getaffinity(0))


@pytest.fixture(scope="session", autouse=True)
def _embedded_worker_shutdown() -> Iterator[None]:
    yield
    from verify_dag.tasks import embedded

    embedded.shutdown()


@pytest.fixture(scope="session", autouse=True)
def _own_redis_stopped() -> Iterator[None]:
    # tests/redis_workers.py starts the session's own redis-server on first use; it ends here.
    yield
    import redis_workers

    redis_workers.shutdown()


@pytest.fixture(params=["bubblewrap", "unshare"])
def sandbox_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each launcher in turn (VERIFY_DAG_SANDBOX): the guarantees of docs/security.md hold under
    bubblewrap and under the unshare fallback alike. CI's machine (root, bubblewrap, user
    namespaces) gives both; elsewhere a missing one skips."""
    from verify_dag import sandbox

    wanted: str = request.param
    monkeypatch.setenv(sandbox.MODE_ENV, wanted)
    if sandbox.mode() != wanted:
        why = f"no working {wanted} sandbox here (this host gives {sandbox.mode()})"
        if os.environ.get("CI"):
            pytest.fail(why + " under CI")
        pytest.skip(why)
    return wanted


def running(needle: str) -> list[int]:
    """Live processes on this host whose command line holds ``needle``. Tests find what the
    repository's code left running this way: inside a sandbox it has pids of its own, so it
    cannot tell us which."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":  # zombies are dead, only unreaped
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether process ``pid`` of this host still runs (a zombie is dead, only unreaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- the command line -------------------------------------------------------------------------

CLI = (sys.executable, "-m", "verify_dag.cli")
# Most runs verify a branch against the commit its tests tagged ``base``.
BRANCH = ("--scope=branch", "--base=base")


def gone_within(pid: int, seconds: float = 5.0) -> bool:
    """Whether process ``pid`` is dead within ``seconds``: a SIGKILL sent to its group is
    delivered asynchronously, and on a loaded host a grandchild reparented away from the killed
    leader can still be seen running for a moment after the leader was reaped."""
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``verify-dag ARGS`` in a process of its own, its output captured as text."""
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def verify_branch(repo: Repo, *flags: str) -> list[str]:
    """The command line verifying ``repo``'s branch against its ``base`` tag, ``flags`` added."""
    return [*CLI, "verify", str(repo.path), *BRANCH, *flags]


def verify_json(repo: Repo, tmp_path: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    """``verify`` run in this process with ``flags``: its exit code and its JSON report, checked
    against the schema; each call writes a report file of its own under ``tmp_path``."""
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    rc = main(["verify", str(repo.path), *flags, "--format=json", f"--output={out}"])
    doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    report.validate(doc)
    return rc, doc


# --- the fake model and what the skills made of it ----------------------------------------------


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake ``claude`` first on PATH and chosen as the backend; the log its calls go to."""
    bin_dir = tmp_path / "bin"
    install(bin_dir, ("claude",))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_MODEL_LOG", str(log))
    return log


def by_failure(out: SkillOutcome) -> dict[str, Diagnosis]:
    """The debugger's diagnoses by the failure each explains."""
    return {d.failure: d for d in out.diagnoses}
