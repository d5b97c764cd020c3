"""The whole DAG through the in-process worker, on real repositories, via the CLI entry point."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from conftest import BRANCH, Repo, verify_json

from verify_dag.cli import main
from verify_dag.models.source import parse_source


def skill(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in doc["skillResults"] if s["skill"] == name)


def test_acceptance_branch_scenario(
    scenario: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, doc = verify_json(scenario, tmp_path, *BRANCH)
    assert rc == 1
    assert capsys.readouterr().out.startswith("JSON report written to ")
    assert doc["status"] == "ok" and doc["overall"] == {"result": "issues-found", "mode": "branch"}
    assert doc["scope"]["baseRef"] == "base"
    assert doc["scope"]["mergeBase"] == scenario.git("rev-parse", "base")
    assert doc["scope"]["headSha"] == scenario.head()
    titles = [f["title"] for f in doc["findings"]]
    # The new lint error is reported; the old one (import os, line 1, unchanged) is not.
    assert any("F841" in t for t in titles)
    assert not any("F401" in t for t in titles)
    lint = next(i for i in doc["issues"] if "F841" in i["title"])
    assert lint["location"] == {"path": "src/calc.py", "line": 9, "column": 5}
    assert (lint["rule"], lint["tool"]) == ("F841", "ruff")
    failing = next(i for i in doc["issues"] if "test_mul" in i["title"])
    assert failing["severity"] >= 9 and failing["class"] == "test-failure"
    assert skill(doc, "tester")["status"] == "FAILED"
    assert skill(doc, "tester")["notes"].startswith("1 passed, 1 failed, 0 errors, 0 skipped")
    assert skill(doc, "reviewer")["status"] == "NOT_RUN"
    assert skill(doc, "qa") == {
        "skill": "qa",
        "status": "SKIPPED",
        "notes": "not in light composition",
    }
    # No VERIFICATION.md: the changed module is imported, as the project declares it.
    assert skill(doc, "exerciser")["status"] == "PASSED"
    assert "import calc: ok" in skill(doc, "exerciser")["notes"]
    assert doc["run"]["mode"] == "report-only" and doc["run"]["requestedMode"] == "interactive"


def test_markdown_report_on_stdout(scenario: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["verify", str(scenario.path), "--scope=branch", "--base=base", "--fail-on=10"])
    out, err = capsys.readouterr()
    # The worst issue is severity 9, below --fail-on=10, but the reviewer did not run (no
    # backend): not a pass (exit 4), and stderr says why.
    assert rc == 4
    assert "verify-dag: incomplete: no issue fails the run, but these checks did not run: " in err
    assert "reviewer (NOT_RUN)" in err
    rc = main(
        [
            *["verify", str(scenario.path), "--scope=branch", "--base=base"],
            "--quiet",
            "--fail-on=10",
            "--allow-incomplete",
        ]
    )
    assert rc == 0 and "incomplete" not in capsys.readouterr().err
    assert out.startswith("# Verification Report")
    assert "**Judgement reviewer:** reviewer (Codex unavailable)" in out
    assert "Test failed: tests/test_calc.py::test_mul" in out


def test_invalid_base_is_a_complete_error_report(
    scenario: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, doc = verify_json(scenario, tmp_path, "--scope=branch", "--base=no-such-ref")
    assert rc == 3
    # The report went to a file; stderr still says why, in the one line every error gets.
    errors = [e for e in capsys.readouterr().err.splitlines() if "error:" in e]
    assert errors == [
        "verify-dag: error: verification failed: base ref 'no-such-ref' is not a commit"
    ]
    assert doc["status"] == "error" and doc["error"]["code"] == "INVALID_BASE"
    assert doc["scope"]["baseRef"] == "no-such-ref" and doc["scope"]["mergeBase"] is None
    assert doc["scope"]["includedFiles"] == [] and doc["findings"] == []
    status = {s["skill"]: s["status"] for s in doc["skillResults"]}
    # Light would have run these; the rest was never part of its plan (SKIPPED: docs/report.md).
    assert {s for s, st in status.items() if st == "NOT_RUN"} == {
        "static-analysis",
        "tester",
        "reviewer",
        "debugger",
        "exerciser",
    }


def test_auto_detect_with_no_base_at_all_is_an_error_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only a `trunk` branch, no remote, one commit ahead of the first: no base to compare
    with, which is exit 3 with a complete error report, not "Nothing to verify" and exit 0."""
    from conftest import make_repo

    repo = make_repo(tmp_path / "r", branch="trunk")
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    repo.write("a.py", "x = 2\n")
    repo.commit("second")
    rc, doc = verify_json(repo, tmp_path)
    assert rc == 3 and doc["status"] == "error" and doc["error"]["code"] == "NO_BASE"
    assert doc["scope"]["mergeBase"] is None and doc["scope"]["nothingToVerify"] is False
    (line,) = [e for e in capsys.readouterr().err.splitlines() if "error:" in e]
    assert line.startswith("verify-dag: error: verification failed: ") and "master" in line


def test_nothing_to_verify(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit()
    assert main(["verify", str(repo.path)]) == 0
    assert capsys.readouterr().out.startswith("Nothing to verify: ")


def test_staged_scope_leaves_index_and_worktree_alone(repo: Repo, tmp_path: Path) -> None:
    repo.write("mod.py", "def f():\n    return 1\n")
    repo.commit()
    repo.write("mod.py", "import sys\n\n\ndef f():\n    return 1\n")
    repo.git("add", "mod.py")
    repo.write("mod.py", "import sys\nimport json\n\n\ndef f():\n    return 1\n")
    index = (repo.path / ".git" / "index").read_bytes()
    status = repo.git("status", "--porcelain")
    rc, doc = verify_json(repo, tmp_path)
    assert doc["scope"]["mode"] == "staged" and doc["scope"]["compareRef"] == "INDEX"
    # Only the staged import is in scope; the unstaged one is not.
    assert [i["title"] for i in doc["issues"] if i["sources"] == ["static-analysis"]] == [
        "ruff F401: `sys` imported but unused"
    ]
    assert (repo.path / ".git" / "index").read_bytes() == index
    assert repo.git("status", "--porcelain") == status
    # No test command in this repository: that is a finding, never a pass.
    assert skill(doc, "tester")["status"] in {"NOT_RUN", "BLOCKED"}
    assert rc == 1


def test_deep_composition_reports_every_reviewer(scenario: Repo, tmp_path: Path) -> None:
    _, doc = verify_json(scenario, tmp_path, *BRANCH, "--depth=deep", "--skip-ux")
    assert doc["scope"]["depth"] == "deep"
    statuses = {s["skill"]: s["status"] for s in doc["skillResults"]}
    assert statuses["reviewer"] == "NOT_RUN"
    # qa's changed-line coverage comes from the tester's run; its model pass did not run, so qa
    # as a whole is NOT_RUN (a judgement that never happened is not a pass), coverage kept.
    assert statuses["qa"] == "NOT_RUN"
    qa_notes = skill(doc, "qa")["notes"]
    assert "changed-line coverage: diff coverage" in qa_notes and "model pass: no model" in qa_notes
    # comment-review's deterministic rules run without a model; its model pass did not.
    assert statuses["comment-review"] == "NOT_RUN"
    notes = skill(doc, "comment-review")["notes"]
    assert "deterministic rules: " in notes and "model pass: no model backend" in notes
    assert statuses["codex-reviewer"] in {"BLOCKED", "SKIPPED"}
    assert statuses["ux-reviewer"] == "SKIPPED"
    assert skill(doc, "ux-reviewer")["notes"].startswith("--skip-ux (triage: ")
    assert statuses["visual-verify"] == "SKIPPED"
    assert skill(doc, "visual-verify")["notes"].startswith("gated: ")
    assert "ux-reviewer" in doc["triage"]["skills_skipped"]


def test_scope_all_on_dirty_worktree(scenario: Repo, tmp_path: Path) -> None:
    scenario.write("src/extra.py", "import json\n")
    _, doc = verify_json(scenario, tmp_path, "--scope=all")
    paths = [f["path"] for f in doc["scope"]["includedFiles"]]
    assert "src/calc.py" in paths and "src/extra.py" not in paths  # untracked: not in all
    titles = [i["title"] for i in doc["issues"]]
    assert any("F401" in t for t in titles)  # whole-file scope: the old import is in scope now


def test_since_adds_the_delta(scenario: Repo, tmp_path: Path) -> None:
    first = scenario.git("rev-parse", "HEAD")
    scenario.write("src/calc.py", scenario.path.joinpath("src/calc.py").read_text() + "\nZ = 1\n")
    scenario.commit("more")
    ledger = tmp_path / "ledger.json"
    ledger.write_text('{"schemaVersion": 1, "findings": []}', encoding="utf-8")
    _, doc = verify_json(
        scenario,
        tmp_path,
        *BRANCH,
        f"--since={first}",
        f"--ledger={ledger}",
    )
    assert doc["scope"]["deltaBaseSha"] == first
    assert [f["path"] for f in doc["scope"]["deltaFiles"]] == ["src/calc.py"]
    # The full branch diff is still what is verified.
    assert [f["path"] for f in doc["scope"]["includedFiles"]] == [
        "src/calc.py",
        "tests/test_calc.py",
    ]


def test_detached_head_on_a_merge_commit(scenario: Repo, tmp_path: Path) -> None:
    scenario.git("checkout", "-q", "-b", "side", "base")
    scenario.write("docs.txt", "side\n")
    scenario.commit("side")
    scenario.git("checkout", "-q", "main")
    scenario.git("merge", "-q", "--no-edit", "side")
    scenario.git("checkout", "-q", "--detach", "HEAD")
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    paths = [f["path"] for f in doc["scope"]["includedFiles"]]
    assert paths == ["docs.txt", "src/calc.py", "tests/test_calc.py"]
    assert doc["scope"]["headSha"] == scenario.head()


def test_a_redelivered_task_returns_its_first_result(
    scenario: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verify_dag.models import RunState, VerifyRequest
    from verify_dag.phases import exerciser
    from verify_dag.tasks import base, embedded
    from verify_dag.tasks.app import app

    # The embedded worker runs in this process, so the phase and the lookup can be observed.
    runs: list[str] = []
    lookups: list[object] = []
    real_run, real_lookup = exerciser.run, base.previous_result

    def counting_run(state: RunState) -> object:
        runs.append(state.run_id)
        return real_run(state)

    def recording_lookup(task: object) -> object:
        found = real_lookup(task)
        lookups.append(found)
        return found

    monkeypatch.setattr(exerciser, "run", counting_run)  # the module the exerciser task calls
    monkeypatch.setattr(base, "previous_result", recording_lookup)
    embedded.ensure_worker()
    first = RunState(run_id="r1", request=VerifyRequest(source=parse_source(str(scenario.path))))
    second = RunState(
        run_id="r2", request=VerifyRequest(source=parse_source(str(scenario.path)), depth="deep")
    )
    sig = app.signature("verify_dag.exerciser")
    sig.apply_async(args=(first.model_dump(mode="json"),), task_id="same-id").get(
        timeout=30, disable_sync_subtasks=False
    )
    sig.apply_async(args=(second.model_dump(mode="json"),), task_id="same-id")
    deadline = time.monotonic() + 30
    while len(lookups) < 2:
        assert time.monotonic() < deadline, "the redelivered task never ran"
        time.sleep(0.01)
    assert runs == ["r1"]  # the phase did not run again
    assert lookups[0] is None and isinstance(lookups[1], dict) and lookups[1]["run"] == "r1"


def test_exerciser_failures_reach_the_debugger(repo: Repo, tmp_path: Path) -> None:
    """The debugger runs after the exerciser (docs/verify.md), so a failed exerciser gate is
    diagnosed at the merge base instead of the debugger saying there was nothing to investigate."""
    import sys

    from verify_dag.models import VerifyRequest
    from verify_dag.tasks.workflow import plan

    labels = [p.label for p in plan(VerifyRequest(source=parse_source(str(repo.path)))).phases]
    assert labels[labels.index("collect") :] == ["collect", "exerciser", "debugger", "report"]

    repo.write(".claude/skills/shop-engineer/SKILL.md", "# shop engineer\n")
    repo.write(
        ".claude/skills/shop-engineer/VERIFICATION.md",
        f"## Exerciser Gates\n- Export works\n  CHECK: {sys.executable} export.py\n",
    )
    repo.write("export.py", "print('exported')\n")
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    repo.write("tests/test_ok.py", "def test_ok():\n    pass\n")  # the tester passes
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("export.py", "raise SystemExit(3)\n")
    repo.commit("branch: export breaks")
    _, doc = verify_json(repo, tmp_path, *BRANCH)
    assert skill(doc, "exerciser")["status"] == "FAILED"
    assert skill(doc, "tester")["status"] == "PASSED"
    from verify_dag import sandbox

    assert skill(doc, "debugger") == {
        "skill": "debugger",
        "status": "COMPLETED",
        "notes": "1 failure: 0 pre-existing, 1 new",
    }
    (detail,) = [d for d in doc["skillDetails"] if d["skill"] == "debugger"]
    assert detail["isolation"] == sandbox.mode()
    (d,) = doc["debugger"]
    assert d["failure"] == "Exerciser gate failed: Export works"
    assert d["preExisting"] == "no" and d["evidence"].startswith("passes at the merge base")
    assert d["command"].startswith(f"{sys.executable} export.py  (cwd: ")
    order = [s["skill"] for s in doc["skillResults"]]
    assert order.index("exerciser") < order.index("debugger")


def test_task_messages_carry_references_not_the_run_state(
    scenario: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every message of a deep run, from the client's and from the workers', carries ids and a
    reference to the run's state (tasks/stash.py), never the state: the plan's text, which the
    run's request holds, is in none of them. The largest arguments are the fan-ins': a reference
    per header task, naming its skills' statuses."""
    import json

    from celery import signals

    monkeypatch.setenv("VERIFY_DAG_BACKEND", "none")  # the reviewers NOT_RUN: no model needed
    marker = "PLAN-MARKER-" + "x" * 4000  # a state carrying it would be over 4 KB
    plan = tmp_path / "plan.md"
    plan.write_text(f"# Plan\n\n{marker}\n", encoding="utf-8")
    seen: list[tuple[str, str, int]] = []

    def record(sender: str | None = None, body: Any = None, **_: Any) -> None:
        args = body[0] if isinstance(body, (list, tuple)) else body
        seen.append((str(sender), json.dumps(body), len(json.dumps(args))))

    signals.before_task_publish.connect(record, weak=False)
    try:
        rc, doc = verify_json(scenario, tmp_path, *BRANCH, "--depth=deep", f"--plan-file={plan}")
    finally:
        signals.before_task_publish.disconnect(record)
    assert doc["status"] == "ok" and rc == 1
    names = {name for name, _, _ in seen}
    assert {"verify_dag.scope", "verify_dag.collect", "verify_dag.report"} <= names
    assert len(names) >= 8, names  # the phases and reviewers were each sent as a message
    assert not [name for name, body, _ in seen if "PLAN-MARKER" in body]
    biggest = max(seen, key=lambda s: s[2])
    assert biggest[2] <= 2000, biggest[0]
    fan_ins = ("verify_dag.reviews", "verify_dag.collect")
    assert max(size for name, _, size in seen if name not in fan_ins) <= 200
