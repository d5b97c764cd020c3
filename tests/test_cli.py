"""Bad input: one clear line on stderr, the documented exit code, never a traceback."""

from __future__ import annotations

import dataclasses
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, calc_base, run_cli, verify_branch

from verify_dag.cli import main


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("verify-dag: error: ") and needle in lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_not_a_git_repository(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("verify", str(tmp_path)), 2, "not a git repository")


def test_empty_repository(repo: Repo) -> None:
    assert_one_line_error(run_cli("verify", str(repo.path)), 2, "empty repository")


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--scope=staged", "--base=main"], "--base is only valid with --scope=branch"),
        (["--base=main"], "--base is only valid with --scope=branch"),
        (["--since=HEAD"], "--since requires --ledger"),
        (["--no-carry-forward"], "--no-carry-forward requires --ledger"),
        (["--files=../outside.py"], "outside the repository"),
        (["--files=missing.py"], "missing.py"),
        (["--module=/etc"], "outside the repository"),
        (["--skip-ux"], "--skip-ux is only valid with --depth=deep"),
        (["--format=json"], "--format=json requires --output"),
        (["--scope=sideways"], "invalid choice"),
        (["--fail-on=11"], "severity must be 1-10"),
        (["--ledger=nope.json", "--since=HEAD"], "--ledger: no such file"),
        (["--output="], "--output: empty path"),
    ],
)
def test_usage_errors(repo: Repo, flags: list[str], needle: str) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit()
    assert_one_line_error(run_cli("verify", str(repo.path), *flags), 2, needle)


def test_output_is_never_overwritten(repo: Repo, tmp_path: Path) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit()
    existing = tmp_path / "r.json"
    existing.write_text("keep me", encoding="utf-8")
    proc = run_cli("verify", str(repo.path), "--format=json", f"--output={existing}")
    assert_one_line_error(proc, 2, "already exists")
    # The line says how to go on: a new path per run (the specification: "callers supply a
    # unique path for each invocation").
    assert "pass a new path per run" in proc.stderr
    assert existing.read_text(encoding="utf-8") == "keep me"


def test_worker_needs_a_broker() -> None:
    assert_one_line_error(run_cli("worker"), 2, "a worker needs a broker")


def test_no_command_and_version() -> None:
    assert_one_line_error(run_cli(), 2, "no command given")
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("verify-dag ")


@pytest.mark.parametrize(
    ("broker", "code", "needle"),
    [
        ("foo://x", 2, "not a broker URL Celery knows: 'foo://x'"),
        ("amqp://guest:pw@127.0.0.1//", 2, "no result backend for broker amqp://"),
    ],
)
def test_a_broker_url_mistake_is_a_usage_error(
    repo: Repo, broker: str, code: int, needle: str
) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit()
    assert_one_line_error(run_cli("verify", str(repo.path), "--broker", broker), code, needle)


def test_an_unreachable_broker_is_one_line_naming_it(repo: Repo) -> None:
    import socket

    repo.write("a.py", "x = 1\n")
    repo.commit()
    repo.write("a.py", "x = 2\n")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = run_cli("verify", str(repo.path), "--broker", f"redis://:pw-secret@127.0.0.1:{port}/0")
    assert_one_line_error(
        proc, 3, f"cannot reach the broker or result store at redis://:***@127.0.0.1:{port}/0"
    )
    assert "pw-secret" not in proc.stderr and "internal error" not in proc.stderr


def test_file_names_that_look_like_flags(
    repo: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.write("-dash é space.py", "import os\n")
    repo.commit()
    out = tmp_path / "r.json"
    assert main(
        ["verify", str(repo.path), "--files=-dash é space.py", "--format=json", f"--output={out}"]
    ) in (0, 1)
    text = out.read_text(encoding="utf-8")
    assert '"path": "-dash é space.py"' in text and "F401" in text


def test_help_names_modes_and_exit_codes() -> None:
    proc = run_cli("verify", "--help")
    assert proc.returncode == 0
    said = " ".join(proc.stdout.split())
    assert "interactive (default): after the report, triage every issue" in said
    assert "auto-fix: fix every issue at or above" in said
    assert "exit codes:" in proc.stdout


def test_progress_in_a_log_is_a_line_per_phase_and_quiet_is_silent(scenario: Repo) -> None:
    args = verify_branch(scenario)
    piped = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 1
    said = piped.stderr.splitlines()
    # A line as a phase is seen to start, one as it ends, and the ends count up to the last.
    started = [x for x in said if re.fullmatch(r"verify-dag: [a-z: ]+: started", x)]
    lines = [x for x in said if x not in started]
    assert lines[0].startswith("verify-dag: [1/") and "] scope: done (" in lines[0]
    assert all(re.fullmatch(r"verify-dag: \[\d+/\d+\] .+: .+ \(\d+\.\d s\)", x) for x in lines)
    assert lines[-1].startswith(f"verify-dag: [{len(lines)}/{len(lines)}] report: done")
    quiet = subprocess.run([*args, "--quiet"], capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 1 and quiet.stderr == ""


def test_progress_on_a_terminal_shows_the_running_phase_with_its_time(repo: Repo) -> None:
    calc_base(repo)
    repo.write("tests/test_slow.py", "import time\n\n\ndef test_slow():\n    time.sleep(3)\n")
    repo.commit("a slow test")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(verify_branch(repo), stdout=subprocess.PIPE, stderr=follower, text=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=120)
    os.close(leader)
    screen = b"".join(chunks).decode()
    # Nothing fails, but no reviewer ran (no backend) and nothing could exercise it: exit 4.
    assert proc.returncode == 4 and out.startswith("# Verification Report")
    # The running phase, rewritten in place while it runs, then its line when it ends.
    assert re.search(r"\r  running: (.*, )?test \(2 s\)(, [^;]*)?; \d+ s in all", screen), screen
    # At least the test's 3 s; more on a loaded machine.
    assert re.search(r"  \[\d+/\d+\] test: done \((?:[3-9]|\d\d+)\.\d s\)", screen), screen
    assert "verify-dag: [" not in screen  # the plain lines are for logs


def test_a_log_hears_from_a_long_phase_every_heartbeat(tmp_path: Path) -> None:
    """In a CI log (no terminal), a phase that runs long is never silent: a line as it starts,
    then one every heartbeat naming what runs with its elapsed time and the run's."""
    from verify_dag.progress import Progress

    log = tmp_path / "log.txt"

    @dataclasses.dataclass(frozen=True)
    class Ref:
        label: str
        task_id: str

    @dataclasses.dataclass(frozen=True)
    class Plan:
        phases: tuple[Ref, ...]

    plan = Plan((Ref("scope", "a"), Ref("test", "b")))
    state: dict[str, dict[str, Any]] = {
        "a": {"status": "SUCCESS", "result": None},
        "b": {"status": "STARTED"},
    }
    with log.open("w", encoding="utf-8") as stream:
        progress = Progress(stream, live=False, heartbeat=0.3)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            progress.update(plan, lambda task: state[task])
            time.sleep(0.05)
        state["b"] = {"status": "SUCCESS", "result": None}
        progress.update(plan, lambda task: state[task])
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("verify-dag: [1/2] scope: done (")
    assert lines[1] == "verify-dag: test: started"
    beats = [x for x in lines if x.startswith("verify-dag: running: ")]
    assert len(beats) >= 2, lines
    assert all(re.fullmatch(r"verify-dag: running: test \(\d+ s\); \d+ s in all", x) for x in beats)
    assert lines[-1].startswith("verify-dag: [2/2] test: done (")


def test_status_with_redis_unreachable_is_one_line_within_the_outage_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket
    import time

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("VERIFY_DAG_OUTAGE_LIMIT", "1")
    start = time.monotonic()
    res = run_cli(
        "status", "0123abcd-0000-4000-8000-000000000000", "--broker", f"redis://127.0.0.1:{port}/0"
    )
    assert res.returncode == 3 and res.stderr.count("\n") == 1, res.stderr
    assert "unreachable for 1 s in a row" in res.stderr and "Traceback" not in res.stderr
    assert time.monotonic() - start < 20


LEAVING = """\
import sys, tempfile, threading, time
from pathlib import Path
from verify_dag.cli import exits

class Loud:
    def __del__(self):
        print("torn down", flush=True)

kept = Loud()
scratch = tempfile.TemporaryDirectory()  # removed by its finalizer, an exit function
late = Path(sys.argv[1])
threading.Thread(target=lambda: (time.sleep(0.5), late.write_text("done"))).start()
sys.stdout.write(scratch.name + "\\n")  # buffered: a pipe is not a terminal
exits.leave(3)
"""


def test_the_command_line_ends_as_python_would_less_its_teardown(tmp_path: Path) -> None:
    """``verify-dag`` ends with main's code after what a normal exit does first: the thread
    that is not a daemon finishes, the exit functions run (a temporary directory's finalizer),
    buffered output is flushed; only the freeing of every object (a ``__del__``) is skipped."""
    late = tmp_path / "late.txt"
    proc = subprocess.run(
        [sys.executable, "-c", LEAVING, str(late)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 3, proc.stderr
    scratch = Path(proc.stdout.splitlines()[0])
    assert scratch.name.startswith("tmp") and not scratch.exists()
    assert late.read_text() == "done"
    assert "torn down" not in proc.stdout, proc.stdout


def test_the_console_script_and_python_m_end_with_mains_code(tmp_path: Path) -> None:
    for argv in (
        [sys.executable, "-m", "verify_dag.cli"],
        [str(Path(sys.executable).with_name("verify-dag"))],
    ):
        said = subprocess.run(
            [*argv, "verify", str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=60
        )
        assert said.returncode == 2 and said.stderr.startswith(
            "verify-dag: error: not a git repository"
        ), said.stderr
        version = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60)
        assert version.returncode == 0 and version.stdout.startswith("verify-dag "), version.stderr
