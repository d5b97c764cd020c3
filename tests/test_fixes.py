"""Phase 9 (docs/fixes.md): auto-fix, the fix plan, the backup and restore, and interactive mode
with nobody attached. Real repositories, real ruff, git and pytest; the model is the fake CLI,
which answers each prompt on its own ($FAKE_MODEL_REPLIES). The terminal itself is driven in
tests/test_interactive.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Repo, run_cli, verify_json
from fixdata import CHANGED, DOCSTRING, GUARD, ZERO, fix_reply, replies, reviewer_sees, untouched

from verify_dag import git
from verify_dag.cli import main
from verify_dag.fixes import backup, compose
from verify_dag.fixes.plan import Step
from verify_dag.fixes.propose import propose
from verify_dag.models.fixes import FixOption
from verify_dag.models.report import ReportIssue


def test_auto_fix_fixes_the_three_issues_at_the_threshold_and_verifies_them(
    calc: Repo, tmp_path: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replies(
        tmp_path,
        monkeypatch,
        {"prompt": "Issue VI-1 (severity 7", "reply": fix_reply(("Guard the empty list", GUARD))},
        {"prompt": "Propose fixes for one issue", "reply": '{"options": []}'},
        *reviewer_sees(ZERO, DOCSTRING, unless_guarded=(DOCSTRING,)),
    )
    before = untouched(calc)
    rc, doc = verify_json(calc, tmp_path, "--scope=branch", "--base=base", "--mode=auto-fix")
    assert doc["run"]["mode"] == "auto-fix" and doc["run"]["note"] is None
    by_issue = {i["id"]: i for i in doc["issues"]}
    fixes = {f["issue"]: f for f in doc["fixes"]}
    assert [by_issue[i]["severity"] for i in sorted(fixes)] == [7, 5, 5, 2]
    for vi in ("VI-1", "VI-2", "VI-3"):
        assert fixes[vi]["decision"] == "fix" and fixes[vi]["applied"], fixes[vi]
        assert fixes[vi]["verified"] == "fixed", fixes[vi]
    assert [fixes[vi]["origin"] for vi in ("VI-1", "VI-2", "VI-3")] == ["model", "ruff", "ruff"]
    assert fixes["VI-4"] == {
        "issue": "VI-4",
        "decision": "not-acted-on",
        "option": None,
        "origin": None,
        "files": [],
        "applied": False,
        "verified": "not-attempted",
        "evidence": "severity 2 is below --auto-fix-threshold=3",
    }
    text = (calc.path / "src/calc.py").read_text(encoding="utf-8")
    assert "import os" not in text and "import sys" not in text and "if not values:" in text
    # Nothing committed, staged or stashed; the exit code is the verdict on what was verified.
    assert untouched(calc) == before and rc == 1
    assert calc.git("status", "--porcelain") == "M src/calc.py"
    run_id = doc["run"]["id"]
    assert (tmp_path / "store" / run_id / "fix-plan.md").is_file()
    # The store keeps the report with its fixes.
    stored = json.loads((tmp_path / "store" / run_id / "report.json").read_text(encoding="utf-8"))
    assert stored["fixes"] == doc["fixes"]
    # restore puts the file back as it was before the fixes.
    assert main(["restore", run_id, str(calc.path)]) == 0
    assert (calc.path / "src/calc.py").read_text(encoding="utf-8") == CHANGED
    assert untouched(calc) == before


def test_a_fix_after_which_a_check_fails_is_reverted(
    calc: Repo, tmp_path: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The model's fix guards the list but leaves an unused variable behind: ruff's F841.
    sloppy = GUARD.replace("        return 0.0\n", "        unused = 1\n        return 0.0\n")
    replies(
        tmp_path,
        monkeypatch,
        {"prompt": "Issue VI-1 (severity 7", "reply": fix_reply(("Guard it", sloppy))},
        {"prompt": "Propose fixes for one issue", "reply": '{"options": []}'},
        *reviewer_sees(ZERO, unless_guarded=()),
    )
    _, doc = verify_json(calc, tmp_path, "--scope=branch", "--base=base", "--mode=auto-fix")
    fixes = {f["issue"]: f for f in doc["fixes"]}
    assert not fixes["VI-1"]["applied"] and fixes["VI-1"]["verified"] == "not-fixed"
    assert fixes["VI-1"]["evidence"].startswith(
        "reverted: after the fix, a check failed: ruff F841"
    )
    assert fixes["VI-2"]["applied"] and fixes["VI-2"]["verified"] == "fixed"
    text = (calc.path / "src/calc.py").read_text(encoding="utf-8")
    assert "unused" not in text and "if not values" not in text and "import os" not in text


def test_interactive_with_nobody_attached_runs_report_only_and_says_so(
    calc: Repo, tmp_path: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    _, doc = verify_json(calc, tmp_path, "--scope=branch", "--base=base")
    assert doc["run"]["requestedMode"] == "interactive" and doc["run"]["mode"] == "report-only"
    assert (
        doc["run"]["note"]
        == "interactive ran as report-only: nobody attached (stdin is not a terminal)"
    )
    assert doc["fixes"] == [] and calc.git("status", "--porcelain") == ""
    assert not [f for f in fake_claude.read_text().splitlines() if "Propose fixes" in f]


def test_files_changed_outside_the_verified_scope_are_not_touched_by_auto_fix(
    calc: Repo, tmp_path: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replies(
        tmp_path,
        monkeypatch,
        {"prompt": "Propose fixes", "reply": '{"options": []}'},
        *reviewer_sees(),
    )
    calc.write("src/calc.py", CHANGED + "\n\ndef later():\n    return 1\n")  # not committed
    _, doc = verify_json(calc, tmp_path, "--scope=branch", "--base=base", "--mode=auto-fix")
    fixes = {f["issue"]: f for f in doc["fixes"]}
    assert {f["applied"] for f in fixes.values()} == {False}
    assert "src/calc.py changed outside the verified scope" in fixes["VI-1"]["evidence"]
    assert "def later" in (calc.path / "src/calc.py").read_text(encoding="utf-8")
    assert git.verify_commit(calc.path, backup.ref(doc["run"]["id"])) is None  # nothing to keep


def test_auto_fix_refuses_no_wait() -> None:
    proc = run_cli("verify", "--mode=auto-fix", "--no-wait", "--broker=redis://127.0.0.1:1/0")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "verify-dag: error: --mode=auto-fix applies fixes when the report is back: drop --no-wait"
    )


def test_help_and_docs_say_the_modes_are_built() -> None:
    proc = run_cli("verify", "--help")
    said = " ".join(proc.stdout.split())
    assert "not built yet" not in said and "auto-fix: fix every issue at or above" in said
    readme = " ".join(
        (Path(__file__).parents[1] / "docs" / "usage.md").read_text(encoding="utf-8").split()
    )
    assert "only report-only is built" not in readme and "`verify-dag restore" in readme


# --- the parts ------------------------------------------------------------------------------


def issue(n: int, line: int, rule: str | None = None) -> ReportIssue:
    return ReportIssue.model_validate(
        {
            "id": f"VI-{n}",
            "severity": 5,
            "title": f"issue {n}",
            "sources": ["static-analysis" if rule else "reviewer"],
            "location": {"path": "src/calc.py", "line": line},
            "description": "d",
            "class": "style",
            "rule": rule,
            "tool": "ruff" if rule else None,
        }
    )


def test_ruff_proposes_its_own_fix_for_each_finding_and_adjacent_fixes_compose(calc: Repo) -> None:
    head = calc.head()
    steps = []
    for n, line in ((1, 1), (2, 2)):
        props = propose(calc.path, issue(n, line, "F401"))
        (option,) = props.options
        assert option.origin == "ruff" and option.label == "Apply ruff's fix"
        steps.append(Step(issue(n, line, "F401"), option))
    assert "Remove unused import: `os`" in steps[0].option.description
    done = compose.compose(calc.path, head, steps)
    assert not done.failed and len(done.applied) == 2
    assert done.texts["src/calc.py"] == CHANGED.replace("import os\nimport sys\n", "")


def test_fixes_of_the_same_lines_conflict_and_the_later_is_not_applied(calc: Repo) -> None:
    def replace_line_10(text: str) -> FixOption:
        from verify_dag.fixes import patches

        new = patches.apply_edits(CHANGED, [patches.Edit("src/calc.py", 10, 10, text)])
        patch = patches.unified("src/calc.py", CHANGED, new)
        return FixOption(
            label="x", description="x", origin="model", patch=patch, files=("src/calc.py",)
        )

    first = Step(issue(1, 10), replace_line_10("    return 0\n"))
    second = Step(issue(2, 10), replace_line_10("    return 1\n"))
    done = compose.compose(calc.path, calc.head(), [first, second])
    assert [s.issue.id for s in done.applied] == ["VI-1"]
    assert done.failed == {
        "VI-2": "it changes the same lines of src/calc.py as an earlier fix does"
    }


def test_a_model_edit_outside_the_file_or_the_repository_is_dropped(
    calc: Repo, tmp_path: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = {
        "options": [
            {
                "label": "far",
                "edits": [
                    {"path": "src/calc.py", "startLine": 90, "endLine": 90, "replacement": "x"}
                ],
            },
            {
                "label": "out",
                "edits": [{"path": "../x.py", "startLine": 1, "endLine": 1, "replacement": "x"}],
            },
            {
                "label": "ok",
                "edits": [
                    {"path": "src/calc.py", "startLine": 10, "endLine": 10, "replacement": GUARD}
                ],
            },
        ]
    }
    replies(
        tmp_path,
        monkeypatch,
        {"prompt": "Propose fixes", "reply": "```json\n" + json.dumps(bad) + "\n```"},
    )
    props = propose(calc.path, issue(1, 10))
    assert [o.label for o in props.options] == ["ok"]
    assert props.notes == (
        "the model's option 1 was dropped: src/calc.py: lines 90-90 are not in the file",
        "the model's option 2 was dropped: '../x.py' is not a path inside the repository",
    )


def test_no_fix_option_says_why(calc: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERIFY_DAG_BACKEND", raising=False)
    props = propose(calc.path, issue(1, 10))
    assert props.options == ()
    assert props.notes[0].startswith("no model backend is configured")


def test_backup_and_restore_keep_head_the_index_and_the_stash(calc: Repo) -> None:
    calc.write("staged.txt", "staged\n")
    calc.git("add", "staged.txt")
    calc.write("notes.txt", "untracked\n")
    before = untouched(calc)
    ref = backup.keep(calc.path, "run-1")
    assert ref == "refs/verify-dag/backups/run-1" and untouched(calc) == before
    # A fix edits one file and creates another; restore puts back the one, removes the other.
    calc.write("src/calc.py", "changed\n")
    calc.write("src/new.py", "new\n")
    backup.note_touched(calc.path, "run-1", ["src/calc.py", "src/new.py"])
    assert backup.restore(calc.path, "run-1") == ["src/calc.py", "src/new.py"]
    assert (calc.path / "src/calc.py").read_text(encoding="utf-8") == CHANGED
    assert not (calc.path / "src/new.py").exists()
    assert (calc.path / "notes.txt").read_text(encoding="utf-8") == "untracked\n"
    assert untouched(calc) == before
    assert calc.git("diff", "--cached", "--name-only") == "staged.txt"


def test_restore_of_an_unknown_run_is_one_line_and_exit_2(calc: Repo) -> None:
    proc = run_cli("restore", "nope", str(calc.path))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"verify-dag: error: no backup of run nope in {calc.path} "
        "(refs/verify-dag/backups/nope): only a run that changed files keeps one\n"
    )


def test_a_location_free_issue_gets_no_option_from_ruff(calc: Repo) -> None:
    bare = issue(1, 1, "F401").model_copy(update={"location": None})
    assert propose(calc.path, bare).options == ()


def test_auto_fix_prints_the_report_in_the_format_asked_for(
    calc: Repo, fake_claude: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GitHub annotations on stdout, the fixes' summary on stderr: stdout stays the report.
    flags = ["--scope=branch", "--base=base", "--mode=auto-fix", "--format=github", "--quiet"]
    rc = main(["verify", str(calc.path), *flags])
    out, err = capsys.readouterr()
    assert rc == 1
    assert out.startswith("::") and "# Verification Report" not in out
    assert "## Fixes" in err
