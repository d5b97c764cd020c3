"""The completion verifier's mode gate (docs/completion.md "Modes"): without --mode, a person at a
terminal is asked full or quick before the run, each with its expected time and dispatch count;
with nobody attached (no terminal, or CI set) nothing runs and the command says to pass --mode
(exit 2); with --mode nothing is asked.

The command runs as a user runs it: on a pseudo-terminal, or in tmux (a server on a socket of its
own) where the test reads the screen and presses keys."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI
from terminal import Terminal
from terminal import terminal as open_terminal

# The question and its two answers as the person sees them (the gate's wording is the contract
# here, so it is spelled out rather than imported).
QUESTION = "Mode for this run: how should it proceed?"
FULL = "full (recommended)"
QUICK = "quick (only when short of time)"
FULL_STEPS = [
    "step1.iter1.extract",
    "step2.iter1.execute",
    "step3.iter1.classify",
    "step4.iter1.report",
]


def make_run(tmp_path: Path, command: str, run_id: str = "r1") -> Path:
    d = tmp_path / "runs" / run_id
    d.mkdir(parents=True)
    (d / "parsed_scope.json").write_text(json.dumps({"completion": command}), encoding="utf-8")
    return d


def rows(d: Path) -> list[dict[str, Any]]:
    text = (d / "dispatches.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def summary(d: Path, iteration: int) -> str:
    """The Summary section of one iteration of VERIFY_REPORT.md."""
    text = (d / "VERIFY_REPORT.md").read_text(encoding="utf-8")
    section = text.split(f"\n## Iteration {iteration}\n", 1)[1]
    return section.split("### Summary", 1)[1].split("\n### ", 1)[0]


def no_ci() -> dict[str, str]:
    """This process's environment without CI: the suite itself may run under CI."""
    return {k: v for k, v in os.environ.items() if k != "CI"}


def attached(
    args: list[str], env: dict[str, str], *, stdout_tty: bool = True, timeout: float = 90
) -> tuple[int, str]:
    """``verify-dag ARGS`` with a pseudo-terminal as stdin and stderr, and as stdout unless told
    otherwise. Nobody types: a question left waiting for an answer fails the test at the
    time-out, showing what the terminal showed. Returns the exit code and everything printed."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*CLI, *args],
            stdin=slave,
            stdout=slave if stdout_tty else subprocess.PIPE,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
    finally:
        os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(
                    f"still running after {timeout} s, waiting for an answer?\n"
                    + seen.decode("utf-8", "replace")
                )
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: nothing holds the terminal open any more
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
    piped = proc.stdout.read().decode("utf-8", "replace") if proc.stdout else ""
    return proc.wait(), seen.decode("utf-8", "replace") + piped


# --- nobody attached ------------------------------------------------------------------------------


REFUSED = (
    "verify-dag: error: the mode gate asks full or quick before every run, and there is {why} "
    "to answer: pass --mode=full (recommended) or --mode=quick"
)


def test_without_mode_and_without_a_terminal_nothing_runs_and_mode_is_required(
    tmp_path: Path,
) -> None:
    """001: before step 0 the question is fired "무조건" (unconditionally), and "메인 자가 판단
    금지" (the orchestrator never decides by itself: no guess of time, budget or context). With
    nobody to ask, no mode may be picked: the command refuses (exit 2) and says to pass --mode;
    nothing is written."""
    d = make_run(tmp_path, "echo done")
    proc = subprocess.run(
        [*CLI, "completion", "r1", f"--runs-dir={d.parent}"],
        stdin=subprocess.DEVNULL,  # not the terminal pytest may have been started from
        capture_output=True,
        text=True,
        env=no_ci(),
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == REFUSED.format(why="nobody attached (stdin is not a terminal)")
    assert proc.stdout == "" and QUESTION not in proc.stderr
    assert sorted(p.name for p in d.iterdir()) == ["parsed_scope.json"]


@pytest.mark.parametrize(
    ("ci", "stdout_tty", "why"),
    [
        ("true", True, "nobody attached (CI is set)"),
        (None, False, "nobody attached (stdout is not a terminal)"),
    ],
)
def test_at_a_terminal_ci_or_a_redirected_stdout_still_means_nobody_to_ask(
    tmp_path: Path, ci: str | None, stdout_tty: bool, why: str
) -> None:
    d = make_run(tmp_path, "true")
    env = no_ci() | ({"CI": ci} if ci else {})
    code, printed = attached(
        ["completion", "r1", f"--runs-dir={d.parent}"], env, stdout_tty=stdout_tty
    )
    assert code == 2, printed
    assert QUESTION not in printed and REFUSED.format(why=why) in " ".join(printed.split())
    assert sorted(p.name for p in d.iterdir()) == ["parsed_scope.json"]


def test_with_mode_given_a_person_at_a_terminal_is_never_asked(tmp_path: Path) -> None:
    d = make_run(tmp_path, "echo quick")
    code, printed = attached(
        ["completion", "r1", f"--runs-dir={d.parent}", "--mode=quick"], no_ci()
    )
    assert code == 0, printed
    assert QUESTION not in printed
    assert "pass: completion command exited 0 (run r1, iteration 1, mode quick)" in printed
    [row] = rows(d)
    assert (row["step"], row["mode"], row["mode_chosen_by"]) == ("verifier.quick", "quick", "given")
    assert row["description"].endswith(" (mode=quick, given with --mode)")
    text = summary(d, 1)
    assert "| mode | quick |" in text and "| mode chosen | given with --mode |" in text


# --- a person at a terminal -------------------------------------------------------------------


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    yield from open_terminal("verify-dag-mode", tmp_path, wait=90)


@pytest.mark.skipif(
    shutil.which("tmux") is None and not os.environ.get("CI"),
    reason="tmux is not installed (.ci/run installs it)",
)
def test_at_a_terminal_the_question_is_asked_and_the_answer_is_the_mode(
    tmp_path: Path, terminal: Terminal
) -> None:
    """001: "full mode (추천) ... 예상 시간 ... dispatch 수: 4회" and "quick mode — 통합 1
    dispatch": the question names each mode with its expected time and dispatch count, full
    first."""
    d = make_run(tmp_path, "echo asked")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ["HOME"],
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "VERIFY_DAG_STORE": os.environ["VERIFY_DAG_STORE"],
    }
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    command = " ".join([*CLI, "completion", "r1", f"--runs-dir={d.parent}"])
    # Three runs, one answer each: Ctrl-C, Enter (the first choice), Down and Enter.
    script = "; ".join([f"{command}; echo EXIT=$?"] * 3 + ["sleep 600"])
    terminal.tmux(
        "new-session", "-d", "-s", "vd", "-x", "80", "-y", "50", "-c", str(tmp_path),
        "env", "-i", *(f"{k}={v}" for k, v in env.items()), "sh", "-c", script,
    )  # fmt: skip

    screen = terminal.wait_for(QUESTION)
    assert FULL in screen and QUICK in screen
    said = " ".join(screen.split())
    assert "accuracy and completeness first" in said  # what full is for
    # 001: each option carries its expected time and its dispatch count.
    assert "Dispatches: 4 (3 when an unchanged parsed_scope.json skips step 1)." in said
    assert "Dispatches: 1." in said and said.count("Expected time:") == 2
    assert screen.index(FULL) < screen.index(QUICK)  # the recommended mode comes first
    terminal.keys("C-c")  # no answer: nothing runs
    screen = terminal.wait_for("EXIT=")
    assert "EXIT=130" in screen and "verify-dag: interrupted" in screen
    assert sorted(p.name for p in d.iterdir()) == ["parsed_scope.json"]

    terminal.wait_for(QUESTION, count=2)
    terminal.keys("Enter")  # full, the recommendation
    screen = terminal.wait_for("EXIT=", count=2)
    assert "pass: completion command exited 0 (run r1, iteration 1, mode full)" in screen
    assert screen.count("EXIT=0") == 1

    terminal.wait_for(QUESTION, count=3)
    terminal.keys("Down", "Enter")  # quick
    screen = terminal.wait_for("EXIT=", count=3)
    assert "pass: completion command exited 0 (run r1, iteration 2, mode quick)" in screen
    assert screen.count("EXIT=0") == 2

    got = rows(d)
    assert [r["step"] for r in got] == [*FULL_STEPS, "verifier.quick"]
    assert [(r["mode"], r["mode_chosen_by"]) for r in got] == [("full", "asked")] * 4 + [
        ("quick", "asked")
    ]
    assert got[0]["description"].endswith(" (mode=full, asked before the run)")
    assert got[4]["task"] == "verify_dag.completion.quick"
    assert got[4]["description"].endswith(" (mode=quick, asked before the run)")
    first, second = summary(d, 1), summary(d, 2)
    assert "| mode | full |" in first and "| mode chosen | asked before the run |" in first
    assert "| mode | quick |" in second and "| mode chosen | asked before the run |" in second
    assert "| mode usage | full 1, quick 1 |" in second
