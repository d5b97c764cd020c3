"""Hostile repositories (docs/security.md): what repository code sees of
the caller's environment, and what of it can reach a report, the store, the result backend or a
log.

Each attacker is a real repository whose code tries one thing; the test checks the world from
outside. Every test runs under each launcher (the ``sandbox_mode`` fixture): bubblewrap, and the
unshare fallback that builds the same view without it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import BRANCH, CLI, Repo, make_repo
from redis_workers import fresh_db, workers

from verify_dag import limits

pytestmark = pytest.mark.usefixtures("sandbox_mode")

# Variables no deny-list knows by name: the allow-list withholds them all the same.
WITHHELD = {
    "DB_PASS": "db-pass-6c1f9e2a",
    "MYSQL_PWD": "mysql-pwd-77d0b3c1",
    "SIGNING_KEY": "signing-key-a94e0f5d",
}

ENV_PROBE = """\
import os
from pathlib import Path

NAMES = {names!r}


def test_the_withheld_variables_are_not_there():
    seen = {{n: os.environ[n] for n in NAMES if n in os.environ}}
    assert not seen, seen


def test_echo_what_it_found_another_way():
    # The values reached the code by a path the sandbox cannot close (a file the repository
    # holds, say): the failure message carries them, and no report may.
    assert False, Path("leaked.txt").read_text()
"""


def need_cgroups() -> None:
    """A writable pids and memory cgroup: what .ci/run's machine (root) gives."""
    step = limits.open_step("probe")
    usable = {"pids", "memory"} <= set(step.dirs)
    step.close()
    if not usable:
        if os.environ.get("CI"):
            pytest.fail("no writable pids and memory cgroup under CI")
        pytest.skip("no writable pids and memory cgroup")


def env_attacker(path: Path) -> Repo:
    repo = make_repo(path)
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    repo.write("tests/test_env.py", "def test_nothing():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("tests/test_env.py", ENV_PROBE.format(names=sorted(WITHHELD)))
    repo.write("leaked.txt", " ".join(f"{k}={v}" for k, v in WITHHELD.items()) + "\n")
    repo.commit("attack")
    return repo


def leaks(text: str) -> list[str]:
    return [name for name, value in WITHHELD.items() if value in text]


def files_under(root: Path) -> str:
    out = []
    for path in root.rglob("*"):
        if path.is_file():
            out.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(out)


def backend_contents(client: redis.Redis) -> str:
    """Every key of the database and what it holds, read by type (DUMP may compress)."""
    out = []
    keys: list[Any] = list(client.keys("*"))
    for key in keys:
        kind = client.type(key)
        values: list[Any]
        if kind == b"string":
            values = [client.get(key) or b""]
        elif kind == b"list":
            values = list(client.lrange(key, 0, -1))
        elif kind == b"hash":
            pairs: dict[Any, Any] = dict(client.hgetall(key))
            values = [k + b"=" + v for k, v in pairs.items()]
        elif kind == b"set":
            values = list(client.smembers(key))
        elif kind == b"zset":
            values = list(client.zrange(key, 0, -1))
        else:
            values = []
        out.append(b"\n".join([key, *values]).decode("utf-8", "replace"))
    return "\n".join(out)


def test_repository_code_sees_an_allow_list_and_no_withheld_value_travels(
    tmp_path: Path,
) -> None:
    """Embedded: the suite sees none of the variables, and the values it echoes are masked in
    the report, in every file of the store and on the terminal."""
    repo = env_attacker(tmp_path / "attacker")
    env = {**os.environ, **WITHHELD, "VERIFY_DAG_STORE": str(tmp_path / "store")}
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [*CLI, "verify", str(repo.path), *BRANCH, "--format=json", f"--output={out}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    doc = json.loads(out.read_text(encoding="utf-8"))
    titles = {i["title"] for i in doc["issues"]}
    assert "Test failed: tests/test_env.py::test_the_withheld_variables_are_not_there" not in titles
    echo = next(
        i for i in doc["issues"] if i["title"].endswith("test_echo_what_it_found_another_way")
    )
    assert "[REDACTED]" in echo["description"], echo
    assert leaks(out.read_text(encoding="utf-8")) == []
    assert leaks(files_under(tmp_path / "store")) == []
    assert leaks(proc.stdout + proc.stderr) == []


def test_no_withheld_value_reaches_the_result_backend_or_a_worker_log(tmp_path: Path) -> None:
    """On workers over Redis: the values are in the workers' environment; the suite sees none
    of them, and no key of the result backend, no log line and no stored file holds one."""
    broker = fresh_db(13)
    repo = env_attacker(tmp_path / "attacker")
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    env.update(WITHHELD)
    env["VERIFY_DAG_STORE"] = str(tmp_path / "worker-store")
    out = tmp_path / "report.json"
    with workers(broker, ["hostile"], tmp_path / "logs", env):
        proc = subprocess.run(
            [
                *CLI,
                "verify",
                str(repo.path),
                *BRANCH,
                f"--broker={broker}",
                "--format=json",
                f"--output={out}",
                "--timeout=240",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert any(i["title"].endswith("test_echo_what_it_found_another_way") for i in doc["issues"])
    stored = backend_contents(redis.Redis.from_url(broker))
    assert "celery-task-meta-" in stored, "the run left nothing in the result backend"
    assert leaks(stored) == []
    assert leaks(files_under(tmp_path / "logs")) == []
    assert leaks(files_under(tmp_path / "worker-store")) == []
    assert leaks(proc.stdout + proc.stderr + out.read_text(encoding="utf-8")) == []


# --- resource limits ------------------------------------------------------------------------

HOGS = """\
import os
import subprocess
import sys
import time


def test_fork_bomb():
    children = []
    try:
        for _ in range(200):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            children.append(pid)
    except OSError:
        pass
    finally:
        for pid in children:  # the rest of the suite needs processes too
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    assert len(children) < 200


def test_disk_fill():
    with open("/tmp/fill", "wb") as fh:
        for _ in range(2048):
            fh.write(b"x" * 2**20)


def test_memory_hog():
    # In a child of its own: the cgroup's OOM killer takes the biggest process, and the rest
    # of the suite goes on to report.
    grab = "hog = [bytearray(2**20) for _ in range(8 * 1024)]"
    assert subprocess.run([sys.executable, "-c", grab]).returncode == 0
"""


def test_fork_bombs_disk_fills_and_memory_hogs_end_as_findings_naming_their_limits(
    tmp_path: Path,
) -> None:
    need_cgroups()
    repo = make_repo(tmp_path / "hog")
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    repo.write("tests/test_hogs.py", "def test_nothing():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("tests/test_hogs.py", HOGS)
    repo.commit("hogs")
    env = {
        **os.environ,
        "VERIFY_DAG_PROCESS_LIMIT": "64",
        "VERIFY_DAG_MEMORY_LIMIT_MB": "512",
        "VERIFY_DAG_TMP_LIMIT_MB": "64",
    }
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [*CLI, "verify", str(repo.path), *BRANCH, "--format=json", f"--output={out}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    limited = {i["title"]: i for i in doc["issues"] if "hit the sandbox's" in i["title"]}
    assert set(limited) == {
        "Repository code hit the sandbox's processes limit",
        "Repository code hit the sandbox's memory limit",
        "Repository code hit the sandbox's /tmp space limit",
    }, [i["title"] for i in doc["issues"]]
    assert (
        "VERIFY_DAG_PROCESS_LIMIT"
        in limited["Repository code hit the sandbox's processes limit"]["description"]
    )
    assert all(i["severity"] == 8 for i in limited.values())


# -- poisoned builds --------------------------------------------------------------------------

# An in-tree build backend (PEP 517 backend-path) that wraps setuptools and, on import, plants a
# pytest plugin turning failures into passes in the env it is building: found as the installer's
# `--python` on its command line, as any process in the box can read.
EVIL_BACKEND = '''\
import glob
import os

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403

PLUGIN = """
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
"""


def _plant():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\\0")
        except OSError:
            continue
        if b"--python" not in argv:
            continue
        venv = os.path.dirname(os.path.dirname(argv[argv.index(b"--python") + 1].decode()))
        for site in glob.glob(venv + "/lib/python*/site-packages"):
            try:
                with open(site + "/evil_plugin.py", "w") as fh:
                    fh.write(PLUGIN)
                with open(site + "/evil_plugin.pth", "w") as fh:
                    fh.write("import os; os.environ['PYTEST_PLUGINS'] = 'evil_plugin'\\n")
            except OSError:
                pass


_plant()
'''
CLEAN_BACKEND = "from setuptools.build_meta import *  # noqa: F401,F403\n"
BUILT_IN_TREE = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "backend"
backend-path = ["_build"]

[project]
name = "victim"
version = "0"

[tool.setuptools]
py-modules = ["calc"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""


def verify_failures(repo: Repo, cache: Path, out: Path) -> tuple[int, list[str]]:
    """verify-dag's exit code and failed tests for the branch of ``repo``, on ``cache``."""
    proc = subprocess.run(
        [*CLI, "verify", str(repo.path), *BRANCH, "--format=json", f"--output={out}"],
        capture_output=True,
        text=True,
        env={**os.environ, "VERIFY_DAG_CACHE": str(cache)},
        timeout=600,
    )
    assert out.is_file(), proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    return proc.returncode, sorted(
        i["title"] for i in doc["issues"] if i["title"].startswith("Test failed")
    )


def built_in_tree(path: Path, backend: str, add: str | None = None) -> Repo:
    """A project built by its in-tree backend ``backend``, tagged ``base``; with ``add``, a
    commit after it whose add() returns that expression."""
    repo = make_repo(path)
    repo.write("pyproject.toml", BUILT_IN_TREE)
    repo.write("_build/backend.py", backend)
    repo.write("calc.py", "def add(a, b):\n    return a + b\n")
    repo.write(
        "tests/test_calc.py", "import calc\n\n\ndef test_add():\n    assert calc.add(1, 2) == 3\n"
    )
    repo.commit("base")
    repo.git("tag", "base")
    if add is not None:
        repo.write("calc.py", f"def add(a, b):\n    return {add}\n")
        repo.commit("change")
    return repo


def test_a_build_backend_cannot_poison_the_env_a_later_commit_runs_in(tmp_path: Path) -> None:
    """A commit that changes only its in-tree build backend plants a plugin in the env it
    builds; the next commit restores the backend and breaks a test. Its run must fail as it
    does on a clean cache: the backend is part of the env's key, so the planted env is never
    the next commit's."""
    repo = built_in_tree(tmp_path / "victim", CLEAN_BACKEND)
    repo.write("_build/backend.py", EVIL_BACKEND)
    repo.commit("only the build backend changes")
    cache = tmp_path / "cache"
    verify_failures(repo, cache, tmp_path / "poisoning.json")

    repo.write("_build/backend.py", CLEAN_BACKEND)
    repo.write("calc.py", "def add(a, b):\n    return a - b\n")
    repo.commit("backend restored, add broken")
    later = verify_failures(repo, cache, tmp_path / "later.json")
    # What a clean cache gives (exit 1, the one broken test): the planted plugin would swallow it.
    assert later == (1, ["Test failed: tests/test_calc.py::test_add"])


# A build backend that appends "swallow every exception" to every copy of pytest it can reach:
# uv's shared cache (where another repository's env is installed from) and the env it builds
# (whose files a hard-linking installer shares with that cache).
SWALLOW = """
_verify_dag_original = pytest_pyfunc_call


def pytest_pyfunc_call(pyfuncitem):
    try:
        return _verify_dag_original(pyfuncitem)
    except BaseException:
        return True
"""
CACHE_POISONER = f"""\
import glob
import os

from setuptools.build_meta import *  # noqa: F401,F403

SWALLOW = {SWALLOW!r}


def _targets():
    yield from glob.glob(os.environ["POISON_CACHE"] + "/**/_pytest/python.py", recursive=True)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\\\\0")
        except OSError:
            continue
        if b"--python" in argv:
            venv = os.path.dirname(os.path.dirname(argv[argv.index(b"--python") + 1].decode()))
            yield from glob.glob(venv + "/lib/python*/site-packages/_pytest/python.py")


for target in set(_targets()):
    try:
        with open(target, "a") as fh:
            fh.write(SWALLOW)
    except OSError:
        pass
"""


def test_a_build_backend_cannot_poison_the_shared_cache_another_repository_installs_from(
    tmp_path: Path,
) -> None:
    """Repository A's backend tries to rewrite pytest in uv's shared cache and in its own env;
    repository B, verified later on the same cache, fails as it does on a clean one, and no
    copy of pytest in the shared cache holds A's code."""
    cache = tmp_path / "cache"
    # The cache's path in the backend's source: an attacker who knows the layout.
    backend = CACHE_POISONER.replace('os.environ["POISON_CACHE"]', repr(str(cache / "uv")))
    attacker = built_in_tree(tmp_path / "attacker", backend, "b + a")
    assert verify_failures(attacker, cache, tmp_path / "attacker.json")[1] == []
    victim = built_in_tree(tmp_path / "victim", CLEAN_BACKEND, "a - b")
    later = verify_failures(victim, cache, tmp_path / "later.json")
    # What a clean cache gives (exit 1, the one broken test): A's pytest would swallow it.
    assert later == (1, ["Test failed: tests/test_calc.py::test_add"])
    poisoned = [
        p
        for p in (cache / "uv").rglob("_pytest/python.py")
        if "_verify_dag_original" in p.read_text()
    ]
    assert (cache / "uv").is_dir() and poisoned == []


ROOT_PROBE = """\
import os


def test_not_root():
    assert os.getuid() != 0 and os.geteuid() != 0


def test_no_shadow():
    try:
        with open("/etc/shadow", "rb") as fh:
            said = fh.read()
    except OSError:
        said = b""
    assert said == b""


def test_no_service_state():
    assert [d for d in ("/var/lib", "/var/log") if os.path.isdir(d) and os.listdir(d)] == []
"""


def test_repository_code_runs_unprivileged_without_the_hosts_shadow_or_service_state(
    tmp_path: Path,
) -> None:
    """Root inside the box read /etc/shadow and RabbitMQ's cookie: now a uid that is not 0,
    the shadow files bound to an empty one, /var/lib and /var/log empty."""
    repo = make_repo(tmp_path / "root")
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    repo.write("tests/test_root.py", "def test_nothing():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("tests/test_root.py", ROOT_PROBE)
    repo.commit("probe")
    out = tmp_path / "report.json"
    subprocess.run(
        [*CLI, "verify", str(repo.path), *BRANCH, "--format=json", f"--output={out}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    doc = json.loads(out.read_text(encoding="utf-8"))
    (tester,) = [s for s in doc["skillResults"] if s["skill"] == "tester"]
    assert tester["notes"].startswith("3 passed, 0 failed"), (tester, doc["issues"])


# -- provisioning's network ---------------------------------------------------------------------

NET_PROBE_BACKEND = """\
import socket

from setuptools.build_meta import *  # noqa: F401,F403

reached = []
for host, port in {targets!r}:
    try:
        socket.create_connection((host, port), timeout=3).close()
        reached.append(f"{{host}}:{{port}}")
    except OSError:
        pass
if reached:
    raise RuntimeError("the build reached " + ", ".join(reached))
"""


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A TCP service of the test's own on every address of this host, and who connected."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except OSError:
                continue
            seen.append(peer[0])
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join()
    server.close()


def test_provisioning_reaches_the_package_index_and_nothing_else(
    tmp_path: Path,
    listener: tuple[int, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    sandbox_mode: str,
) -> None:
    """A build backend connects to a loopback service and to this host's outside address:
    neither answers it, and the env still builds from the index (the suite runs). The control,
    with the sandbox turned off, reaches both: the probe is a real one (checked once, with the
    first launcher: without a sandbox the launcher plays no part)."""
    port, seen = listener
    outside = socket.gethostbyname(socket.gethostname())
    targets = [("127.0.0.1", port), (outside, port)]
    repo = built_in_tree(tmp_path / "prober", NET_PROBE_BACKEND.format(targets=targets), "b + a")
    failures = verify_failures(repo, tmp_path / "cache", tmp_path / "boxed.json")
    doc = json.loads((tmp_path / "boxed.json").read_text(encoding="utf-8"))
    (tester,) = [s for s in doc["skillResults"] if s["skill"] == "tester"]
    assert tester["status"] == "PASSED", (tester, doc["issues"])
    assert failures[1] == [] and seen == []
    if sandbox_mode != "bubblewrap":
        return

    monkeypatch.setenv("VERIFY_DAG_SANDBOX", "none")
    verify_failures(repo, tmp_path / "control-cache", tmp_path / "control.json")
    assert len(seen) >= 2, seen


TOX_INI = (
    "[tox]\nenvlist = py\n\n[testenv]\nskip_install = true\ndeps = pytest\n"
    "commands = pytest {posargs}\n"
)
# A test that appends "swallow every exception" to the pytest of the env it runs in.
ENV_TAMPERER = f"""\
import glob
import sys

SWALLOW = {SWALLOW!r}


def test_tamper():
    for target in glob.glob(sys.prefix + "/lib/python*/site-packages/_pytest/python.py"):
        try:
            with open(target, "a") as fh:
                fh.write(SWALLOW)
        except OSError:
            pass
"""


def test_a_test_run_through_tox_cannot_change_the_env_a_later_commit_runs_in(
    tmp_path: Path,
) -> None:
    """tox writes its logs in its work directory while a suite runs, so that directory is
    writable; the env in it is not. A commit whose test rewrites the env's pytest, then one
    whose test fails: the second fails as it does on a clean cache."""
    repo = make_repo(tmp_path / "toxed")
    repo.write("tox.ini", TOX_INI)
    repo.write("tests/test_ok.py", "def test_ok():\n    assert True\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("tests/test_tamper.py", ENV_TAMPERER)
    repo.commit("a test tampers with its env")
    cache = tmp_path / "cache"
    verify_failures(repo, cache, tmp_path / "tampering.json")
    repo.write("tests/test_ok.py", "def test_ok():\n    assert 1 + 1 == 3\n")
    repo.commit("a test fails")
    later = verify_failures(repo, cache, tmp_path / "later.json")
    # What a clean cache gives (exit 1, the one broken test): the tampered pytest would pass it.
    assert later == (1, ["Test failed: tests/test_ok.py::test_ok"])
    tampered = [
        p for p in cache.rglob("_pytest/python.py") if "_verify_dag_original" in p.read_text()
    ]
    assert tampered == []
