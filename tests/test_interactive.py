"""Interactive mode in a real terminal: tmux runs ``verify-dag verify`` in an 80-column window,
the test sends keys and reads the screen (its own tmux server, on a socket of its own)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CLI, Repo, calc_base
from fakes import install
from fixdata import CHANGED, DOCSTRING, GUARD, ZERO, fix_reply, reviewer_sees, untouched
from terminal import Terminal
from terminal import terminal as open_terminal

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None and not os.environ.get("CI"),
    reason="tmux is not installed (.ci/run installs it)",
)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    yield from open_terminal("verify-dag-test", tmp_path)


def verify_in(terminal: Terminal, cwd: Path, env: dict[str, str], *flags: str) -> None:
    """``verify --scope=branch --base=base FLAGS`` in an 80x50 tmux window at ``cwd``, with only
    the environment a person's shell would give it (``env`` over the defaults); the window
    stays open after it exits and shows ``EXIT=<code>``."""
    full = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ["HOME"],
        "GIT_CONFIG_NOSYSTEM": "1",
        "VERIFY_DAG_STORE": os.environ["VERIFY_DAG_STORE"],
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        **env,
    }
    command = " ".join([*CLI, "verify", "--scope=branch", "--base=base", *flags])
    terminal.tmux(
        "new-session", "-d", "-s", "vd", "-x", "80", "-y", "50", "-c", str(cwd),
        "env", "-i", *(f"{k}={v}" for k, v in full.items()),
        "sh", "-c", f"{command}; echo EXIT=$?; sleep 600",
    )  # fmt: skip


def test_a_batch_of_four_fix_explain_skip_skip_then_restore(
    calc: Repo, tmp_path: Path, terminal: Terminal
) -> None:
    bin_dir = tmp_path / "bin"
    install(bin_dir, ("claude",))
    replies = tmp_path / "replies.json"
    entries = [
        {"prompt": "Issue VI-1 (severity 7", "reply": fix_reply(("Guard the empty list", GUARD))},
        {"prompt": "Propose fixes for one issue", "reply": '{"options": []}'},
        *reviewer_sees(ZERO, DOCSTRING),
    ]
    replies.write_text(json.dumps(entries), encoding="utf-8")
    before = untouched(calc)
    verify_in(
        terminal,
        calc.path,
        {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "VERIFY_DAG_BACKEND": "claude",
            "FAKE_MODEL_REPLIES": str(replies),
        },
    )
    terminal.wait_for("VI-1: what now?")
    terminal.keys("Enter")  # Fix 1: the model's guard
    terminal.wait_for("VI-2: what now?")
    terminal.keys("Down", "Enter")  # Explain
    screen = terminal.wait_for("VI-2: what now?", count=2)
    assert "VI-2, explained (level 1" in screen and "In src/calc.py as it is now:" in screen
    assert ">1 | import os" in screen
    terminal.keys("Down", "Down", "Enter")  # Skip (the fix option stays first)
    terminal.wait_for("VI-3: what now?")
    terminal.keys("Down", "Down", "Enter")  # Skip
    screen = terminal.wait_for("VI-4: what now?")
    assert "No fix option: the model proposed no fix" in screen
    terminal.keys("Down", "Enter")  # Skip (Explain comes first: it has no fix option)
    screen = terminal.wait_for("Apply the 1 fix(es) in this order?")
    table = screen.split("Decisions:")[1].split("# Fix plan")[0].split()
    assert " ".join(table) == (
        "Issue Sev Decision VI-1 7 fix: Guard the empty list VI-2 5 skip VI-3 5 skip VI-4 2 skip"
    )
    terminal.keys("y")
    screen = terminal.wait_for("EXIT=")
    assert "EXIT=1" in screen  # the verdict is on what was verified, before the fixes
    assert "Fixes: 1 applied, 0 verified fixed, nothing committed" in screen
    # -J joins what the terminal wrapped: the triage's own lines fit in 80 columns unwrapped
    # (the report's Markdown tables above it are as wide as their rows).
    triage = screen.split("=== Triage")[1].split("# Fix plan")[0]
    assert max(len(line) for line in triage.splitlines()) <= 80
    text = (calc.path / "src/calc.py").read_text(encoding="utf-8")
    assert "if not values:" in text and "import os" in text and "import sys" in text
    assert untouched(calc) == before
    assert calc.git("status", "--porcelain") == "M src/calc.py"
    (run_dir,) = (Path(os.environ["VERIFY_DAG_STORE"])).iterdir()
    stored = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    fixes = {f["issue"]: (f["decision"], f["applied"], f["verified"]) for f in stored["fixes"]}
    assert fixes == {
        "VI-1": ("fix", True, "not-checked"),
        "VI-2": ("skip", False, "not-attempted"),
        "VI-3": ("skip", False, "not-attempted"),
        "VI-4": ("skip", False, "not-attempted"),
    }
    assert stored["run"]["mode"] == "interactive"
    assert (run_dir / "fix-plan.md").is_file()
    restored = subprocess.run(
        [*CLI, "restore", run_dir.name], cwd=calc.path, capture_output=True, text=True
    )
    assert restored.returncode == 0, restored.stderr
    assert (calc.path / "src/calc.py").read_text(encoding="utf-8") == CHANGED
    assert untouched(calc) == before and calc.git("status", "--porcelain") == ""


def test_codex_blocked_is_asked_about_and_stop_ends_the_run_before_triage(
    calc: Repo, tmp_path: Path, terminal: Terminal
) -> None:
    """004 7a: "If codex-reviewer reports BLOCKED ... In interactive mode: Use AskUserQuestion to
    ask: 'Codex review was BLOCKED ({reason}). Continue without Codex review, or stop to
    resolve?'" Codex is on PATH but not logged in; the person stops: no triage, no fix, and the
    stored run says why."""
    bin_dir = tmp_path / "bin"
    install(bin_dir, ("codex",))
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    verify_in(terminal, calc.path, {"PATH": path, "FAKE_MODEL_MODE": "auth"})
    screen = terminal.wait_for("Codex review was BLOCKED: what now?")
    said = " ".join(screen.split())
    assert "Codex review was BLOCKED (" in said
    assert "). Continue without Codex review, or stop to resolve?" in said
    assert "Continue without Codex review" in screen and "Stop to resolve" in screen
    terminal.keys("Down", "Enter")  # Stop to resolve
    screen = terminal.wait_for("EXIT=")
    assert "EXIT=4" in screen  # the verdict stands: a check (codex-reviewer) did not run
    assert "Stopped: interactive stopped before triage: Codex review was BLOCKED" in " ".join(
        screen.split()
    )
    assert "Proposing fixes" not in screen and "=== Triage" not in screen
    (run_dir,) = (Path(os.environ["VERIFY_DAG_STORE"])).iterdir()
    stored = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    codex = next(s for s in stored["skillResults"] if s["skill"] == "codex-reviewer")
    assert codex["status"] == "BLOCKED"
    assert stored["run"]["note"].startswith(
        f"interactive stopped before triage: Codex review was BLOCKED ({codex['notes']})"
    )
    assert stored["fixes"] == [] and calc.git("status", "--porcelain") == ""


def test_an_exerciser_barrier_asks_for_help_and_the_exerciser_runs_again_with_it(
    repo: Repo, tmp_path: Path, terminal: Terminal
) -> None:
    """004 7c: "If BLOCKED with LOGIN_REQUIRED, UNCLEAR_FEATURE, NO_EXERCISE_STRATEGY,
    NO_ENGINEER_SKILL, or SERVICE_UNAVAILABLE (interactive/auto-fix modes only): 1. Use
    AskUserQuestion to get help from the user 2. Re-invoke exerciser with the user's response
    3. If still blocked, record as final BLOCKED status." A changed script nothing can exercise
    (NO_EXERCISE_STRATEGY, the severity 9 finding); the person gives the command that does, and
    the verdict is the run that exercised it."""
    calc_base(repo)
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("tool.py", "print('tool ran')\n")
    repo.commit("tool: a script")
    verify_in(terminal, repo.path, {}, "--allow-incomplete")
    screen = terminal.wait_for("Command to exercise the change:")
    said = " ".join(screen.split())
    assert "The exerciser was BLOCKED (NO_EXERCISE_STRATEGY: no START, EXERCISE" in said
    assert "Cannot determine how to exercise the change" in said  # the first report's finding
    terminal.tmux("send-keys", "-t", "vd", "-l", "python3 tool.py")
    terminal.keys("Enter")
    screen = terminal.wait_for("EXIT=")
    assert "Verifying again, the exerciser running `python3 tool.py`" in screen
    assert "EXIT=0" in screen  # the re-run's verdict: exercised, nothing at the gate
    runs = [json.loads((d / "report.json").read_text(encoding="utf-8")) for d in store_dirs()]
    assert len(runs) == 2
    status = {
        next(s["status"] for s in r["skillResults"] if s["skill"] == "exerciser"): r for r in runs
    }
    assert sorted(status) == ["BLOCKED", "PASSED"]
    assert "Cannot determine how to exercise the change" in [
        i["title"] for i in status["BLOCKED"]["issues"]
    ]
    assert status["PASSED"]["issues"] == []
    gate = status["PASSED"]["customGates"]["exerciser"][0]
    assert (gate["rule"], gate["status"]) == ("Completion criterion: python3 tool.py", "PASS")


def store_dirs() -> list[Path]:
    return [d for d in Path(os.environ["VERIFY_DAG_STORE"]).iterdir() if d.is_dir()]
