"""Ctrl-C ends the run's children too: they run in sessions of their own (so that a time-out
kills a whole tree), which the terminal's SIGINT never reaches."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import Repo, alive, calc_base, verify_branch


def test_ctrl_c_stops_the_suite_it_started(repo: Repo, tmp_path: Path) -> None:
    calc_base(repo)
    pid_file = tmp_path / "suite.pid"
    repo.write(
        "tests/test_slow.py",
        "import os, time\n\n\ndef test_slow():\n"
        f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(120)\n",
    )
    repo.commit("tests: a slow one")
    # No sandbox, so the suite's pid is one this test can see (bubblewrap gives it its own).
    env = {**os.environ, "VERIFY_DAG_SANDBOX": "none"}
    cli = subprocess.Popen(
        verify_branch(repo, "--depth=light"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
            assert cli.poll() is None, cli.communicate()
            time.sleep(0.1)
        suite = int(pid_file.read_text())
        assert alive(suite)
        cli.send_signal(signal.SIGINT)
        _, err = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 130
    assert err.strip().endswith("verify-dag: interrupted")
    deadline = time.monotonic() + 10
    while alive(suite) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(suite), "the suite outlived the interrupted run"
