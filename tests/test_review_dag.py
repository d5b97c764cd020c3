"""Judgement reviewers through the whole DAG, with a fake model CLI on PATH under the real names."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import BRANCH, Repo, verify_json
from fakes import install, logged_calls

from verify_dag.cli import main
from verify_dag.report import markdown

REPLY = json.dumps(
    {
        "findings": [
            {
                "title": "mul is off by one",
                "severity": 8,
                "location": "src/calc.py:10",
                "category": "correctness",
                "description": "mul adds 1 to the product.",
            },
        ]
    }
) + (
    "\nREAFFIRMED: F-1 — unchanged since delta base"
    "\nREAFFIRMED: F-3 — also unchanged"
    "\nREOPENED: F-2 — test_mul now fails"
    "\nDEFERRED_TO_EPIC: #47 — pagination belongs to the export issue\n"
)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bin directory in front of PATH holding the fake CLIs named in each test; its log path."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "model.log"
    monkeypatch.setenv("FAKE_MODEL_LOG", str(log))
    monkeypatch.setenv("FAKE_MODEL_REPLY", REPLY)
    for var in ("VERIFY_DAG_BACKEND", "VERIFY_DAG_BACKEND_COMMAND", "VERIFY_DAG_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return bin_dir


def calls(bin_dir: Path) -> list[dict[str, Any]]:
    """What the fake CLIs in the ``fake`` fixture's ``bin_dir`` were called with."""
    return logged_calls(bin_dir.parent / "model.log")


def result(doc: dict[str, Any], skill: str) -> dict[str, Any]:
    return next(s for s in doc["skillResults"] if s["skill"] == skill)


def test_light_picks_codex_reviewer_when_codex_is_on_path(
    scenario: Repo, tmp_path: Path, fake: Path
) -> None:
    install(fake, ["codex"])
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    assert result(doc, "codex-reviewer")["status"] == "COMPLETED"
    assert result(doc, "reviewer")["status"] == "SKIPPED"
    issue = next(i for i in doc["issues"] if i["title"] == "mul is off by one")
    assert issue["sources"] == ["codex-reviewer"] and issue["severity"] == 8
    (call,) = calls(fake)
    assert call["name"] == "codex" and "exec" in call["argv"]
    # Codex reviews a diff-only workspace, never the user's repository, with the exact metadata.
    assert not call["cwd"].startswith(str(scenario.path))
    assert "SCOPE_METADATA" in call["prompt"] and "scope_mode: branch" in call["prompt"]
    assert "**Judgement reviewer:** codex-reviewer" in markdown(doc)


def test_light_falls_back_to_reviewer_on_the_configured_backend(
    scenario: Repo, tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(fake, ["claude"])
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    assert result(doc, "reviewer")["status"] == "COMPLETED"
    assert result(doc, "codex-reviewer") == {
        "skill": "codex-reviewer",
        "status": "SKIPPED",
        "notes": "not in light composition",
    }
    assert "(Codex unavailable)" in result(doc, "reviewer")["notes"]
    (call,) = calls(fake)
    assert call["name"] == "claude" and "-p" in call["argv"]
    assert "Comprehensive review across all five dimensions" in call["prompt"]


def test_no_backend_says_which_review_did_not_run_and_how_to_configure(
    scenario: Repo, tmp_path: Path, fake: Path
) -> None:
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    reviewer = result(doc, "reviewer")
    assert reviewer["status"] == "NOT_RUN"
    assert "no model backend configured" in reviewer["notes"]
    assert "VERIFY_DAG_BACKEND" in reviewer["notes"]
    assert "**Not run:** reviewer" in markdown(doc)


@pytest.mark.parametrize(
    ("mode", "status", "needle"),
    [
        ("hang", "NOT_RUN", "timeout"),
        ("rate-limit", "NOT_RUN", "rate_limited"),
        ("garbage", "NOT_RUN", "unparseable"),
        ("empty", "NOT_RUN", "empty"),
    ],
)
def test_backend_failures_are_never_completed(
    scenario: Repo,
    tmp_path: Path,
    fake: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    status: str,
    needle: str,
) -> None:
    install(fake, ["claude"])
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    monkeypatch.setenv("VERIFY_DAG_MODEL_TIMEOUT", "2")
    monkeypatch.setenv("FAKE_MODEL_MODE", mode)
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    reviewer = result(doc, "reviewer")
    assert reviewer["status"] == status and needle in reviewer["notes"]
    assert not any("reviewer" in i["sources"] for i in doc["issues"])


def test_codex_without_auth_is_blocked_prominently(
    scenario: Repo, tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(fake, ["codex"])
    monkeypatch.setenv("FAKE_MODEL_MODE", "auth")
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    codex = result(doc, "codex-reviewer")
    assert codex["status"] == "BLOCKED" and "auth" in codex["notes"]
    assert "BLOCKED" in markdown(doc).split("## Issues Found")[0]


def test_deep_runs_the_full_composition(
    scenario: Repo, tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(fake, ["claude"])
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    monkeypatch.setenv(
        "FAKE_MODEL_REPLY",
        json.dumps(
            {
                "findings": [
                    {
                        "title": "Stale comment",
                        "severity": 2,
                        "location": "src/calc.py:9",
                        "category": "comment",
                        "description": "delete",
                    }
                ]
            }
        ),
    )
    _, doc = verify_json(scenario, tmp_path, *BRANCH, "--depth=deep")
    statuses = {s["skill"]: s["status"] for s in doc["skillResults"]}
    for name in ("reviewer", "comment-review", "qa"):
        assert statuses[name] == "COMPLETED", name
    # No codex on PATH: codex-reviewer is BLOCKED, never silently replaced by another engine.
    assert statuses["codex-reviewer"] == "BLOCKED"
    assert {c["name"] for c in calls(fake)} == {"claude"}
    skipped = {s["skill"]: s["reason"] for s in doc["triage"]["skillsSkipped"]}
    assert skipped["visual-verify"].startswith("gated: ")
    assert skipped["ux-reviewer"].startswith("gated: ")
    # comment-review's floor: a severity 2 comment finding is reported at 5, never lower.
    comment = next(i for i in doc["issues"] if "comment-review" in i["sources"])
    assert comment["severity"] == 5


def test_scope_all_skips_codex_and_the_reviewer_takes_lights_slot(
    scenario: Repo, tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """004: at light "Always run, every time: tester, and exactly one judgement reviewer";
    codex-reviewer: "If scope is `--scope=all`, report SKIPPED_UNSUPPORTED_SCOPE". With Codex on
    PATH but unusable for the scope, the reviewer runs instead ("the alternative is a change
    nobody independently reviewed"), and the report says why it was the reviewer."""
    install(fake, ["codex", "claude"])
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    out = tmp_path / "all.json"
    main(["verify", str(scenario.path), "--scope=all", "--format=json", f"--output={out}"])
    doc = json.loads(out.read_text(encoding="utf-8"))
    codex = result(doc, "codex-reviewer")
    assert codex["status"] == "SKIPPED" and "SKIPPED_UNSUPPORTED_SCOPE" in codex["notes"]
    reviewer = result(doc, "reviewer")
    assert reviewer["status"] == "COMPLETED"
    assert reviewer["notes"].startswith(
        "Judgement reviewer at light depth (Codex does not audit --scope=all)."
    )
    assert [c["name"] for c in calls(fake)] == ["claude"]
    assert "**Judgement reviewer:** reviewer (Codex does not audit --scope=all)" in markdown(doc)
    assert "judgement reviewer NOT_RUN" not in markdown(doc)


def test_ledger_epic_and_plan_reach_the_report(
    scenario: Repo, tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(fake, ["claude"])
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    ledger = tmp_path / "ledger.json"
    ledger.write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "findings": [
                    {
                        "id": "F-1",
                        "skill": "reviewer",
                        "title": "old thing",
                        "severity": 4,
                        "disposition": "accepted",
                        "location": "src/calc.py:4",
                        "rootCause": "x",
                        "reason": "y",
                    },
                    {
                        "id": "F-2",
                        "skill": "tester",
                        "title": "flaky",
                        "severity": 6,
                        "disposition": "open",
                        "location": None,
                        "rootCause": "z",
                        "reason": "w",
                    },
                    {
                        "id": "F-3",
                        "skill": "reviewer",
                        "title": "gone",
                        "severity": 3,
                        "disposition": "fixed",
                        "location": None,
                        "rootCause": "",
                        "reason": "",
                    },
                ],
            }
        ),
        encoding="utf-8",
    )
    epic = tmp_path / "epic.md"
    epic.write_text("Done: #45. This issue: #46. Remaining: #47 export pagination.\n")
    plan = tmp_path / "plan.md"
    plan.write_text("## Phase 1\nadd mul\n## Phase 2\nadd div\n")
    first = scenario.git("rev-parse", "HEAD~1")
    _, doc = verify_json(
        scenario,
        tmp_path,
        *BRANCH,
        f"--ledger={ledger}",
        f"--since={first}",
        f"--epic-context={epic}",
        f"--plan-file={plan}",
    )
    known = doc["knownFindings"]
    assert known["supplied"] == 3
    assert known["reaffirmed"][0]["id"] == "F-1" and known["reopened"][0]["id"] == "F-2"
    # F-3 is fixed, so it was not in the table the reviewer saw: its reaffirmation is flagged.
    assert {(r["id"], r["known"]) for r in known["reaffirmed"]} == {("F-1", True), ("F-3", False)}
    md = markdown(doc)
    assert "## Known Findings" in md and "| F-3 (**not in KNOWN FINDINGS**) | REAFFIRMED |" in md
    assert {
        "issue": "#47",
        "item": "pagination belongs to the export issue",
        "source": "reviewer",
    } in doc["deferredToEpic"]
    assert not any("pagination" in i["title"] for i in doc["issues"])
    plan_issue = next(i for i in doc["issues"] if i["sources"] == ["plan-completeness"])
    assert plan_issue["severity"] == 8 and plan_issue["location"] is None
    prompts = {c["prompt"] for c in calls(fake)}
    reviewer_prompt = next(p for p in prompts if "Comprehensive review" in p)
    assert "KNOWN FINDINGS" in reviewer_prompt and "CARRY-FORWARD RULES" in reviewer_prompt
    assert "| F-3 |" not in reviewer_prompt  # fixed findings are not carried forward
    assert "EPIC CONTEXT" in reviewer_prompt and "#47 export pagination" in reviewer_prompt
    assert any("PLAN FILE" in p and "add div" in p for p in prompts)


def test_no_carry_forward_keeps_the_ledger_for_reporting_only(
    scenario: Repo, tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(fake, ["claude"])
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    ledger = tmp_path / "ledger.json"
    ledger.write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "findings": [
                    {
                        "id": "F-1",
                        "skill": "reviewer",
                        "title": "old",
                        "severity": 4,
                        "disposition": "accepted",
                        "location": None,
                        "rootCause": "",
                        "reason": "",
                    }
                ],
            }
        )
    )
    _, doc = verify_json(scenario, tmp_path, *BRANCH, f"--ledger={ledger}", "--no-carry-forward")
    # The reply still says REAFFIRMED/REOPENED/DEFERRED_TO_EPIC, but the reviewer was given no
    # carry-forward rules and no epic: none of it is a decision those inputs produced.
    assert doc["knownFindings"] == {"supplied": 1, "reaffirmed": [], "reopened": []}
    assert doc["deferredToEpic"] == []
    (call,) = calls(fake)
    assert "CARRY-FORWARD RULES" not in call["prompt"] and "KNOWN FINDINGS" not in call["prompt"]


def test_patch_construction_failure_is_not_a_review(tmp_path: Path, fake: Path) -> None:
    # A file name that is not UTF-8 cannot be carried through the scope's text paths, so the
    # diff-only workspace cannot be rebuilt exactly: codex must not review an approximation.
    from conftest import make_repo

    repo = make_repo(tmp_path / "latin1")
    repo.write("a.py", "x = 1\n")
    repo.commit("one")
    repo.git("tag", "base")
    (repo.path / os.fsdecode(b"caf\xe9.py")).write_text("y = 2\n")
    repo.commit("two")
    install(fake, ["codex"])
    _, doc = verify_json(repo, tmp_path, *BRANCH)
    codex = result(doc, "codex-reviewer")
    assert codex["status"] == "BLOCKED" and codex["notes"].startswith("PATCH_CONSTRUCTION_FAILED")
    assert calls(fake) == []


def test_triage_result_reaches_the_json(scenario: Repo, tmp_path: Path, fake: Path) -> None:
    scenario.write(
        "src/cli.py",
        "import argparse\n\np = argparse.ArgumentParser()\n"
        'p.add_argument("--n", help="how many widgets to make")\n',
    )
    scenario.commit("cli")
    _, light = verify_json(scenario, tmp_path, *BRANCH)
    assert light["triage"]["jobB"] is False and light["triage"]["gating"] == {}
    files = light["triage"]["skillAssignments"]["reviewer"]
    assert files == ["src/calc.py", "src/cli.py", "tests/test_calc.py"]
    _, deep = verify_json(scenario, tmp_path, *BRANCH, "--depth=deep")
    gate = deep["triage"]["gating"]["ux-reviewer"]
    assert gate["applies"] is True and "src/cli.py" in gate["reason"]
    assert deep["triage"]["skillAssignments"]["ux-reviewer"] == ["src/cli.py"]
    assert deep["triage"]["gating"]["visual-verify"]["applies"] is False
    # Gated in, but no backend: ux-reviewer should have run and did not.
    assert result(deep, "ux-reviewer")["status"] == "NOT_RUN"


def test_a_backend_that_echoes_the_prompt_did_not_review(
    scenario: Repo, tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `cat` as the command backend: its reply is the prompt, example finding included.
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "command")
    monkeypatch.setenv("VERIFY_DAG_BACKEND_COMMAND", "cat")
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    reviewer = result(doc, "reviewer")
    assert reviewer["status"] == "NOT_RUN" and "echoed the prompt" in reviewer["notes"]


def test_a_prose_location_is_no_location(
    scenario: Repo, tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reviewer's location that is not a file of the verified commit (prose, or a path the
    commit does not hold) becomes null, never a path; a real one keeps its line."""
    install(fake, ["claude"])
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "claude")
    found = [
        ("mean is wrong", "somewhere in the mean function"),
        ("ghost file", "src/nowhere.py:3"),
        ("mul is off", "./src/calc.py:10"),
    ]
    monkeypatch.setenv(
        "FAKE_MODEL_REPLY",
        json.dumps(
            {
                "findings": [
                    {"title": t, "severity": 8, "location": loc, "description": t}
                    for t, loc in found
                ]
            }
        ),
    )
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    where = {i["title"]: i["location"] for i in doc["issues"]}
    assert where["mean is wrong"] is None and where["ghost file"] is None
    assert where["mul is off"] == {"path": "src/calc.py", "line": 10}
    titles = {f["title"]: f for f in doc["findings"]}
    assert "location" not in titles["mean is wrong"]
