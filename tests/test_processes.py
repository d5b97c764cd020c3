"""The subprocess chokepoint: what every child of verify-dag runs under."""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import pytest
from conftest import gone_within

from verify_dag import credentials, outside, processes


def test_repository_code_gets_an_allow_list_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "DB_PASS": "x" * 12,
        "LANG": "C.UTF-8",
        "LC_TIME": "C",
        "TZ": "UTC",
    }.items():
        monkeypatch.setenv(name, value)
    env = processes.scrubbed_env({"VIRTUAL_ENV": "/venv"})
    assert "DB_PASS" not in env
    assert (env["LANG"], env["LC_TIME"], env["TZ"], env["VIRTUAL_ENV"]) == (
        "C.UTF-8",
        "C",
        "UTC",
        "/venv",
    )
    assert set(env) <= {*credentials.PASSED_NAMES, "LC_TIME", "VIRTUAL_ENV"} | {
        n for n in env if n.startswith("LC_")
    }
    # The withheld value is masked in output, as a known secret is.
    assert "x" * 12 not in processes.redact("it was " + "x" * 12)


def test_a_password_in_a_url_is_a_secret_whatever_the_variable_is_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://app:pw123456@db.internal/app")
    # An index URL is passed on (provisioning needs it), unless it carries a password.
    monkeypatch.setenv("PIP_INDEX_URL", "https://example.org/simple")
    monkeypatch.setenv("UV_INDEX_URL", "https://ci:pw123456@example.org/simple")
    env = processes.scrubbed_env()
    assert "DATABASE_URL" not in env and env["PIP_INDEX_URL"] == "https://example.org/simple"
    assert "UV_INDEX_URL" not in env
    leaked = "connect failed: postgres://app:pw123456@db.internal/app"
    assert "pw123456" not in processes.redact(leaked)


def test_a_runaway_allocation_hits_the_memory_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(processes.MEMORY_ENV, "300")
    grab = "b = bytearray(1024 * 1024 * 1024); print('allocated')"
    res = processes.run([sys.executable, "-c", grab], timeout=60, env=processes.scrubbed_env())
    assert res.returncode != 0 and "MemoryError" in res.stderr
    monkeypatch.setenv(processes.MEMORY_ENV, "4096")
    ok = processes.run([sys.executable, "-c", grab], timeout=60, env=processes.scrubbed_env())
    assert ok.returncode == 0 and "allocated" in ok.stdout


@pytest.mark.parametrize("launcher", ["prlimit", "hook"])
def test_a_runaway_writer_hits_the_file_size_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launcher: str
) -> None:
    """Through prlimit(1), and through Popen's hook on a host without it: the same limit."""
    if launcher == "hook":
        monkeypatch.setattr(processes, "_prlimit", lambda: None)
    monkeypatch.setenv(processes.FILE_SIZE_ENV, "1")
    write = "open('big', 'wb').write(b'x' * 3 * 1024 * 1024)"
    res = processes.run(
        [sys.executable, "-c", write], cwd=tmp_path, timeout=60, env=processes.scrubbed_env()
    )
    assert res.returncode != 0 and "File too large" in res.stderr
    assert (tmp_path / "big").stat().st_size <= 1024 * 1024


def test_defaults_leave_room_for_real_work() -> None:
    limits = processes.resource_limits()
    assert limits[resource.RLIMIT_CORE] == 0
    assert limits[resource.RLIMIT_DATA] >= 1024 * 2**20
    assert limits[resource.RLIMIT_FSIZE] == processes.DEFAULT_FILE_LIMIT_MB * 2**20


def test_stopping_a_run_ends_its_commands_and_no_other_runs(tmp_path: Path) -> None:
    """An in-process run stopped at its --timeout (client.stop_here): its running command is
    killed and any it starts afterwards dies at once; another run's command in the same process
    (a test session, an in-process fleet audit) goes on."""
    import threading
    import time

    got: dict[str, processes.Result] = {}

    def go(run: str) -> None:
        with processes.for_run(run):
            got[run] = processes.run(["sleep", "60"], cwd=tmp_path, timeout=120)

    threads = {run: threading.Thread(target=go, args=(run,)) for run in ("run-a", "run-b")}
    for t in threads.values():
        t.start()
    deadline = time.monotonic() + 30
    while sorted(r for r in processes._LIVE.values() if r) != ["run-a", "run-b"]:
        assert time.monotonic() < deadline, "the commands never started"
        time.sleep(0.05)
    assert processes.stop_run("run-a") == 1
    threads["run-a"].join(30)
    assert not threads["run-a"].is_alive() and got["run-a"].returncode != 0
    assert threads["run-b"].is_alive()  # the other run's command still runs
    began = time.monotonic()
    with processes.for_run("run-a"):
        again = processes.run(["sleep", "60"], cwd=tmp_path, timeout=120)
    assert again.returncode != 0 and time.monotonic() - began < 30
    processes.stop_run("run-b")
    threads["run-b"].join(30)
    assert got["run-b"].returncode != 0


def test_prlimit_is_found_whatever_path_said_at_the_first_spawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer is kept for the process's life: a PATH narrowed at the first spawn must not
    leave every later one on the hook."""
    monkeypatch.setenv("PATH", str(tmp_path))
    processes._prlimit.cache_clear()
    try:
        assert processes._prlimit() is not None
    finally:
        processes._prlimit.cache_clear()


def test_a_command_is_spawned_with_no_python_between_fork_and_exec(tmp_path: Path) -> None:
    """prlimit sets the limits, so Popen needs no preexec_fn and spawns with vfork: a hook makes
    it fork the whole worker for every git call."""
    limits = processes.resource_limits()
    argv, hook = processes._launch(["git", "--version"], limits, processes.git_env(), tmp_path)
    assert hook is None and argv[-3:] == ["--", "git", "--version"]
    res = processes.run(["git", "--version"], cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.startswith("git version")


def test_a_missing_program_is_not_found_whichever_way_it_is_spawned(tmp_path: Path) -> None:
    for argv in (["no-such-program-here"], ["./no-such-script"], [str(tmp_path / "gone")]):
        res = processes.run(argv, cwd=tmp_path)
        assert res.not_found and res.returncode == 127, (argv, res)
        assert res.stderr.startswith(argv[0] + ":"), res.stderr
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\necho hi\n")
    res = processes.run(["./not-executable"], cwd=tmp_path)
    assert res.not_found and "Permission denied" in res.stderr, res.stderr


def test_the_chokepoint_sees_a_commands_end_its_code_and_its_time_limit() -> None:
    """processes.run waits on a pidfd, not on Popen's polling: the exit code and the output of a
    command that ended come back as they were, and one that outlives its limit is stopped,
    marked timed out, and its descendants go with its group."""
    ended = processes.run([sys.executable, "-c", "print('out'); raise SystemExit(3)"])
    assert (ended.returncode, ended.stdout, ended.timed_out) == (3, "out\n", False)
    slow = (
        "import subprocess, time; child = subprocess.Popen(['sleep', '30']); "
        "print(child.pid, flush=True); time.sleep(30)"
    )
    stopped = processes.run([sys.executable, "-c", slow], timeout=1)
    assert stopped.timed_out and stopped.returncode == -9
    assert 1 <= stopped.duration < 10
    assert gone_within(int(stopped.stdout))
    waited = processes.run(["sleep", "0.2"], timeout=None)
    assert waited.returncode == 0 and not waited.timed_out
    # A limit of years, as a deadline far off gives: poll takes a C int of milliseconds.
    far = processes.run(["sleep", "0.2"], timeout=1e12)
    assert far.returncode == 0 and not far.timed_out


def test_commands_other_than_git_are_counted_and_git_is_not() -> None:
    # verify_dag/cli/replay.py keeps a run's answer only when it started git alone.
    before = outside.calls()
    assert processes.run(["git", "--version"]).returncode == 0
    assert outside.calls() == before
    assert processes.run(["true"]).returncode == 0
    assert outside.calls() == before + 1
