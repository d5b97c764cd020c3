"""An engineer skill's gates and app declarations, through the whole DAG."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import BRANCH, Repo, verify_json
from fakes import install

from verify_dag.report import markdown


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_gates_app_and_issue_checks_reach_the_report(scenario: Repo, tmp_path: Path) -> None:
    port = free_port()
    skill = ".claude/skills/calc-engineer"
    scenario.write(f"{skill}/SKILL.md", "# calc engineer\n\n## Testing\n\n```sh\npytest -q\n```\n")
    scenario.write("site/index.html", "<h1>calc</h1>\n")
    scenario.write(
        f"{skill}/VERIFICATION.md",
        f"""# Verification

## Exerciser Gates
- The home page is served
  CHECK: curl -fsS http://127.0.0.1:{port}/index.html
  EXPECT: exit 0; output contains "calc"
- The missing page is served
  CHECK: curl -fsS http://127.0.0.1:{port}/missing.html
  EXPECT: exit 0

## Review Gates
- Arithmetic stays in src/calc.py

## App
START: python3 -m http.server {port} --bind 127.0.0.1 --directory site
HEALTH: curl -fsS http://127.0.0.1:{port}/
START_TIMEOUT: 5
EXERCISE: curl -fsS http://127.0.0.1:{port}/index.html
""",
    )
    scenario.commit("engineer skill")
    rc, doc = verify_json(scenario, tmp_path, *BRANCH)
    assert rc == 1
    gates = doc["customGates"]
    assert [(g["rule"], g["status"]) for g in gates["exerciser"]] == [
        ("The home page is served", "PASS"),
        ("The missing page is served", "FAIL"),
    ]
    assert all(g["evidence"] and g["checker"] for g in gates["exerciser"])
    assert [(g["rule"], g["status"]) for g in gates["review"]] == [
        ("Arithmetic stays in src/calc.py", "NOT_CHECKED")
    ]
    exerciser = next(s for s in doc["skillResults"] if s["skill"] == "exerciser")
    assert exerciser["status"] == "FAILED"  # a failing gate: never PASSED
    checked = {e["issue"]: e["status"] for e in doc["exerciserVerification"]}
    by_title = {i["title"]: i["id"] for i in doc["issues"]}
    assert checked[by_title["Test failed: tests/test_calc.py::test_mul"]] == "CONFIRMED"
    # The base has no site/: its app never gets healthy within START_TIMEOUT, so the debugger
    # cannot tell whether the failing gate failed there too.
    (gate,) = [d for d in doc["debugger"] if "The missing page is served" in d["failure"]]
    assert gate["preExisting"] == "undetermined", gate
    assert "SERVICE_UNAVAILABLE" in gate["evidence"] and "5s" in gate["evidence"], gate
    text = markdown(doc)
    assert "## Custom Verification Gates" in text and "**Custom Gates: 1/3 passed" in text
    with socket.socket() as s:  # the app was stopped: nothing listens on its port any more
        # SO_REUSEADDR: connections in TIME_WAIT do not count, a listener still would.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


def _judged_gates_run(
    scenario: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Three review gates, two without CHECK (the reviewer judges them), one with a CHECK
    that fails; and two GATE lines the file does not declare or the CHECK decides."""
    bin_dir = tmp_path / "bin"
    install(bin_dir, ["claude"])
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    monkeypatch.setenv("FAKE_MODEL_LOG", str(tmp_path / "model.log"))
    monkeypatch.setenv(
        "FAKE_MODEL_REPLY",
        '{"findings": []}\n'
        "GATE: Arithmetic stays in src/calc.py — PASS — all four operations live in calc.py\n"
        "GATE: **Every public function has a docstring** - FAIL - mul() has none\n"
        "GATE: The version is printed — PASS — made up\n"
        "GATE: No gate like this — FAIL — invented\n",
    )
    skill = ".claude/skills/calc-engineer"
    scenario.write(f"{skill}/SKILL.md", "# calc engineer\n")
    scenario.write(
        f"{skill}/VERIFICATION.md",
        f"""# Verification

## Review Gates
- Arithmetic stays in src/calc.py
- Every public function has a docstring
- The version is printed
  CHECK: {sys.executable} -c "print('0.1')"
  EXPECT: output contains "1.0"
""",
    )
    scenario.commit("engineer skill")
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    return doc


def test_review_gates_are_judged_by_the_reviewer_and_fail_at_severity_9(
    scenario: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review gate without CHECK is judged by the reviewer that ran (its GATE line, with the
    evidence), not left NOT_CHECKED; a failed one, judged or run, is a severity 9 issue. A GATE
    line for a gate the file does not declare, or one with a CHECK, is not taken."""
    doc = _judged_gates_run(scenario, tmp_path, monkeypatch)
    review = {g["rule"]: (g["status"], g["checker"]) for g in doc["customGates"]["review"]}
    assert review == {
        "Arithmetic stays in src/calc.py": ("PASS", "reviewer"),
        "Every public function has a docstring": ("FAIL", "reviewer"),
        "The version is printed": ("FAIL", "exerciser"),  # its CHECK's result stands
    }
    judged = next(g for g in doc["customGates"]["review"] if g["checker"] == "reviewer")
    assert judged["evidence"] == "all four operations live in calc.py"
    failed = {i["title"]: i["severity"] for i in doc["issues"] if "gate failed" in i["title"]}
    assert failed == {
        "Review gate failed: Every public function has a docstring": 9,
        "Review gate failed: The version is printed": 9,
    }


def test_the_exercisers_notes_count_the_gates_as_the_gate_table_has_them(
    scenario: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """004: review agents get the review gates and "report PASS/FAIL for it"; 8b's Review Gates
    table has "PASS / FAIL / NOT CHECKED" per gate with the skill that checked it. The exerciser
    runs after the reviewers (7c), so its notes count the gates as that table has them: the
    ones the reviewer judged with its verdict, never as NOT_CHECKED."""
    doc = _judged_gates_run(scenario, tmp_path, monkeypatch)
    table = [g["status"] for g in doc["customGates"]["review"]]
    assert sorted(table) == ["FAIL", "FAIL", "PASS"]
    notes = next(s["notes"] for s in doc["skillResults"] if s["skill"] == "exerciser")
    assert "review gates: 1 PASS, 2 FAIL" in notes, notes
    assert "NOT_CHECKED" not in notes
