"""Phase 8: dedup, JSON v1, Markdown and exit codes, from RunStates built by hand."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from verify_dag import report
from verify_dag.errors import EXIT_ERROR, EXIT_INCOMPLETE, EXIT_ISSUES, EXIT_OK
from verify_dag.models import (
    ALL_OTHER_FILES,
    EngineerContext,
    ExcludedFile,
    FileChange,
    Finding,
    LineRange,
    Location,
    Report,
    RunState,
    Scope,
    ScopeError,
    SkillOutcome,
    Toolchain,
    Verification,
    VerifyRequest,
)
from verify_dag.models.findings import ToolUse
from verify_dag.report import formats
from verify_dag.report.dedup import dedup, same_problem
from verify_dag.report.markdown_text import path_text

GOLDEN = Path(__file__).parent / "golden"
# The OASIS SARIF 2.1.0 schema (errata 01), kept with the tests.
SCHEMAS = Path(__file__).parent / "schemas"
HEAD = "89abcdef0123456789abcdef0123456789abcdef"
MERGE_BASE = "0123456789abcdef0123456789abcdef01234567"
PIPELINE = [
    "static-analysis",
    "tester",
    "reviewer",
    "codex-reviewer",
    "comment-review",
    "qa",
    "ux-reviewer",
    "visual-verify",
    "plan-completeness",
    "exerciser",
    "debugger",
]


@pytest.fixture(autouse=True)
def _codex_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The report never looks for Codex on the host that builds it (the light choice is the review
    # worker's, recorded in the state): a `codex` on this PATH must change nothing.
    codex = tmp_path / "codex"
    codex.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    codex.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")


def built(state: RunState) -> dict[str, Any]:
    """The JSON v1 document of a run; every report a test makes is also checked against the
    schema."""
    doc = report.build(state).model_dump(mode="json")
    report.validate(doc)
    return doc


def exit_code(doc: dict[str, Any], fail_on: int) -> int:
    """The exit code of a v1 document, read back into the model the way the CLI's is."""
    return report.exit_code(Report.model_validate(doc), fail_on)


def finding(
    source: str,
    title: str,
    sev: int,
    path: str | None = "src/app.py",
    line: int | None = 30,
    **kw: Any,
) -> Finding:
    kw.setdefault("issue_class", "correctness")
    kw.setdefault("description", f"{title} ({source})")
    loc = Location(path=path, line=line, end_line=kw.pop("end_line", None)) if path else None
    return Finding(title=title, severity=sev, source=source, location=loc, **kw)


def outcome(
    skill: str, status: Any, notes: str = "", *findings: Finding, ran: bool = True, reason: str = ""
) -> SkillOutcome:
    return SkillOutcome(
        skill=skill,
        status=status,
        notes=notes,
        ran=ran,
        reason=reason or f"{skill} applies",
        findings=findings,
    )


def skipped(skill: str, why: str) -> SkillOutcome:
    return SkillOutcome(skill=skill, status="SKIPPED", notes=why, reason=why, ran=False)


def request(**kw: Any) -> VerifyRequest:
    kw.setdefault("repo", "/srv/repo")
    return VerifyRequest(**kw)


def branch_scope(**kw: Any) -> Scope:
    base: dict[str, Any] = dict(
        mode="branch",
        requested_mode="branch",
        base_ref="origin/release",
        compare_ref="HEAD",
        diff_command=f"git diff -U0 {MERGE_BASE} {HEAD}",
        merge_base=MERGE_BASE,
        head_sha=HEAD,
        old_commit=MERGE_BASE,
        new_commit=HEAD,
        excluded=(ALL_OTHER_FILES,),
        included=(
            FileChange(
                path="src/app.py",
                status="modified",
                lines=(LineRange(start=27, end=36), LineRange(start=40, end=40)),
            ),
            FileChange(path="src/new.py", status="added"),
            FileChange(path="src/old.py", status="deleted", lines=()),
            FileChange(
                path="src/util.py",
                status="renamed",
                old_path="src/helpers.py",
                lines=(LineRange(start=3, end=5),),
            ),
            FileChange(path="assets/logo.png", status="added", binary=True),
        ),
    )
    return Scope(**{**base, **kw})


def light_branch_state(**kw: Any) -> RunState:
    """Light branch run: static findings, failing tests, reviewer NOT_RUN, exerciser BLOCKED."""
    static = outcome(
        "static-analysis",
        "COMPLETED",
        "ruff (1 finding), mypy (1 finding)",
        finding(
            "static-analysis",
            "`os` imported but unused",
            3,
            line=27,
            rule="F401",
            tool="ruff",
            issue_class="style",
        ),
        finding(
            "static-analysis",
            'Incompatible return value type (got "str", expected "int")',
            7,
            line=33,
            rule="return-value",
            tool="mypy",
        ),
        reason="ruff and mypy discovered in pyproject.toml",
    ).model_copy(update={"tools": (ToolUse(tool="ruff", version="0.8.4"), ToolUse(tool="mypy"))})
    outcomes = (
        outcome(
            "tester",
            "FAILED",
            "41 passed, 2 failed",
            finding(
                "tester",
                "test_total fails: assert 3 == 4",
                9,
                path="tests/test_app.py",
                line=12,
                issue_class="test-failure",
                in_scope=True,
            ),
            finding(
                "tester",
                "test_parse fails | TypeError",
                9,
                path="tests/test_app.py",
                line=20,
                issue_class="test-failure",
                description='TypeError: unsupported operand\nwhile parsing "1|2"',
                in_scope=False,
            ),
            reason="pytest discovered in pyproject.toml",
        ),
        outcome(
            "reviewer",
            "NOT_RUN",
            "provider rate limit: 429 Too Many Requests",
            reason="judgement reviewer at light depth (Codex unavailable)",
        ),
        skipped("codex-reviewer", "codex CLI not found on PATH"),
        *(
            skipped(s, "not in light composition")
            for s in ("comment-review", "qa", "ux-reviewer", "visual-verify")
        ),
        skipped("plan-completeness", "no plan resolved"),
        outcome(
            "exerciser",
            "BLOCKED",
            "SERVICE_UNAVAILABLE: no way to start the app was found",
            reason="exerciser runs at every depth",
        ),
        outcome(
            "debugger",
            "COMPLETED",
            "2 failures: PRE_EXISTING no",
            reason="tester reported failures of severity 7+",
        ),
    )
    base: dict[str, Any] = dict(
        run_id="run-light-1",
        request=request(
            scope="branch", base="origin/release", unattended="nobody attached (CI is set)"
        ),
        scope=branch_scope(),
        engineer=EngineerContext(),
        toolchain=Toolchain(),
        static=static,
        outcomes=outcomes,
    )
    return RunState(**{**base, **kw})


def deep_staged_state() -> RunState:
    """Deep staged run: codex BLOCKED, a duplicate across reviewers, a plan finding, no debugger."""
    scope = Scope(
        mode="staged",
        base_ref="HEAD",
        compare_ref="INDEX",
        path_filter=("src/app.py",),
        diff_command="git diff --cached -U0 -- src/app.py",
        head_sha=HEAD,
        new_commit="f" * 40,
        old_commit=HEAD,
        included=(
            FileChange(
                path="src/app.py",
                status="modified",
                lines=(LineRange(start=45, end=67), LineRange(start=89, end=102)),
            ),
        ),
        excluded=(ALL_OTHER_FILES,),
        notes=("git fetch origin failed: offline",),
    )
    outcomes = (
        outcome("tester", "PASSED", "120 passed"),
        outcome(
            "reviewer",
            "COMPLETED",
            "Found 2 items",
            finding("reviewer", "Unchecked None from lookup()", 6, line=50, end_line=52),
            finding("reviewer", "Retry loop never gives up", 8, line=90),
        ),
        outcome("codex-reviewer", "BLOCKED", "Codex auth missing: run `codex login`"),
        outcome(
            "comment-review",
            "COMPLETED",
            "Found 1 item",
            finding(
                "comment-review",
                "Comment narrates history",
                5,
                line=60,
                issue_class="comment",
                description='"previously we ...": delete it',
            ),
        ),
        outcome(
            "qa",
            "COMPLETED",
            "Found 1 item",
            finding(
                "qa",
                "unchecked none from lookup",
                4,
                line=50,
                issue_class="coverage",
                description="No test covers the None branch.",
            ),
        ),
        skipped("ux-reviewer", "gated: no user-facing surface in scope"),
        skipped("visual-verify", "gated: no UI-rendering files in scope"),
        outcome(
            "plan-completeness",
            "COMPLETED",
            "Incomplete: phase 2 of 3 missing",
            finding(
                "plan-completeness",
                "Plan incomplete — only phase 1 of 3 implemented",
                8,
                path=None,
                issue_class="plan-completeness",
            ),
        ),
        outcome("exerciser", "PASSED", "Flow completed; visual lens inactive at deep"),
    )
    return RunState(
        run_id="run-deep-1",
        request=request(scope="staged", depth="deep", mode="report-only", plan_file="PLAN.md"),
        scope=scope,
        engineer=EngineerContext(),
        toolchain=Toolchain(),
        static=outcome("static-analysis", "COMPLETED", "ruff (0 findings)").model_copy(
            update={"tools": (ToolUse(tool="ruff", version="0.8.4"),)}
        ),
        outcomes=outcomes,
    )


def invalid_base_state() -> RunState:
    message = "base ref origin/nope does not resolve to a commit"
    scope = Scope(
        mode="branch",
        requested_mode="branch",
        base_ref="origin/nope",
        head_sha=HEAD,
        error=ScopeError(code="INVALID_BASE", message=message),
    )
    return RunState(
        run_id="run-error-1",
        request=request(scope="branch", base="origin/nope"),
        scope=scope,
        failed_phase="scope",
        error_code="INVALID_BASE",
        error_message=message,
    )


# -- golden files ------------------------------------------------------------------------------

GOLDEN_CASES = {
    "light_branch": light_branch_state,
    "deep_staged": deep_staged_state,
    "invalid_base": invalid_base_state,
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden(name: str) -> None:
    """Every output format of every golden run, as a golden file: JSON v1 and Markdown, and
    each other format the CLI offers (SARIF, GitHub annotations, GitLab Code Quality, JUnit)."""
    made = report.build(GOLDEN_CASES[name]())
    report.validate(made.model_dump(mode="json"))
    outputs = {f"{name}.json": report.to_json(made), f"{name}.md": report.markdown(made)}
    for fmt in formats.FORMATS.values():
        if fmt.name not in ("json", "markdown"):
            outputs[f"{name}.{fmt.name}"] = fmt.render(made)
    sarif_schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(sarif_schema).validate(json.loads(outputs[f"{name}.sarif"]))
    for filename, text in outputs.items():
        path = GOLDEN / filename
        if os.environ.get("UPDATE_GOLDEN") == "1":
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
        assert text == path.read_text(encoding="utf-8"), f"{filename} differs (UPDATE_GOLDEN=1)"


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_a_v1_document_reads_back_into_the_same_report(name: str) -> None:
    made = report.build(GOLDEN_CASES[name]())
    back = Report.model_validate_json((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    assert back == made and report.to_json(back) == report.to_json(made)


def test_aliases_that_disagree_are_refused() -> None:
    doc = built(light_branch_state())
    doc["triage"]["skills_run"] = doc["triage"]["skills_run"][1:]
    with pytest.raises(ValueError, match=r"triage\.skills_run does not repeat triage\.skillsRun"):
        Report.model_validate(doc)
    doc = built(light_branch_state())
    doc["scope"]["files"] = []
    with pytest.raises(ValueError, match=r"scope\.files does not repeat scope\.includedFiles"):
        Report.model_validate(doc)


# -- JSON v1 -----------------------------------------------------------------------------------


def test_branch_run_shape() -> None:
    doc = built(
        light_branch_state(
            request=request(scope="branch", base="origin/release", ledger="/tmp/ledger.md")
        )
    )
    assert (doc["schemaVersion"], doc["status"], doc["error"]) == (1, "ok", None)
    assert doc["overall"] == {"result": "issues-found", "mode": "branch"}
    sc = doc["scope"]
    assert (sc["depth"], sc["mode"], sc["baseRef"]) == ("light", "branch", "origin/release")
    assert (sc["mergeBase"], sc["headSha"]) == (MERGE_BASE, HEAD)
    assert sc["includedFiles"] == sc["files"] and sc["excludedFiles"] == sc["excluded"]
    assert sc["includedFiles"] == [
        {"path": "src/app.py", "status": "modified", "lines": ["27-36", "40"]},
        {"path": "src/new.py", "status": "added", "lines": ["entire file"]},
        {"path": "src/old.py", "status": "deleted", "lines": []},
        {"path": "src/util.py", "status": "renamed", "lines": ["3-5"], "oldPath": "src/helpers.py"},
        {"path": "assets/logo.png", "status": "added", "lines": ["entire file"], "binary": True},
    ]
    assert sc["excludedFiles"] == [{"path": "ALL_OTHER_FILES", "reason": "outside selected scope"}]
    assert (sc["deltaBaseSha"], sc["deltaFiles"]) == (None, [])
    assert sc["compareRef"] == "HEAD" and sc["pathFilter"] == [] and sc["notes"] == []
    # No ledger support yet: a supplied ledger still gives null, never a made-up summary.
    assert doc["knownFindings"] is None and doc["deferredToEpic"] == []
    assert [r["skill"] for r in doc["skillResults"]] == [
        "static-analysis",
        "tester",
        "reviewer",
        "codex-reviewer",
        "comment-review",
        "qa",
        "ux-reviewer",
        "visual-verify",
        "plan-completeness",
        "exerciser",
        "debugger",
    ]
    assert all(set(r) == {"skill", "status", "notes"} for r in doc["skillResults"])
    status = {r["skill"]: r["status"] for r in doc["skillResults"]}
    assert status["reviewer"] == "NOT_RUN" and status["exerciser"] == "BLOCKED"
    assert status["qa"] == "SKIPPED" and status["tester"] == "FAILED"
    t = doc["triage"]
    assert t["skills_run"] == ["static-analysis", "tester", "reviewer", "exerciser", "debugger"]
    assert t["skillsRun"][0] == {
        "skill": "static-analysis",
        "reason": "ruff and mypy discovered in pyproject.toml",
    }
    assert t["skills_skipped"] == [e["skill"] for e in t["skillsSkipped"]]
    assert {"skill": "qa", "reason": "not in light composition"} in t["skillsSkipped"]
    assert [i["id"] for i in doc["issues"]] == ["VI-1", "VI-2", "VI-3", "VI-4"]
    assert [i["severity"] for i in doc["issues"]] == [9, 9, 7, 3]
    assert doc["issues"][0]["location"] == {"path": "tests/test_app.py", "line": 12}
    assert doc["issues"][0]["class"] == "test-failure"
    assert doc["findings"][0] == {
        "title": "test_total fails: assert 3 == 4",
        "severity": 9,
        "description": "test_total fails: assert 3 == 4 (tester)",
        "sources": ["tester"],
        "location": {"path": "tests/test_app.py", "line": 12},
    }
    assert [f["title"] for f in doc["findings"]] == [i["title"] for i in doc["issues"]]
    assert doc["exerciserVerification"] == [] and doc["customGates"] == {
        "exerciser": [],
        "review": [],
    }
    assert doc["run"] == {
        "id": "run-light-1",
        "repo": "/srv/repo",
        "requestedMode": "interactive",
        "mode": "interactive",  # a run with someone attached to triage it
        "note": None,
        "gates": {"failOn": 7, "newOnly": False, "failUnder": None, "allowIncomplete": False},
        "exitCode": 1,
    }


def test_issue_location_projections() -> None:
    doc = built(deep_staged_state())
    by_title = {i["title"]: i for i in doc["issues"]}
    merged = by_title["Unchecked None from lookup()"]
    assert merged["location"] == {"path": "src/app.py", "line": 50, "endLine": 52}
    plan = by_title["Plan incomplete — only phase 1 of 3 implemented"]
    assert plan["location"] is None and plan["class"] == "plan-completeness"
    mirrored = {f["title"]: f for f in doc["findings"]}
    assert mirrored["Unchecked None from lookup()"]["location"] == {
        "path": "src/app.py",
        "line": 50,
    }
    assert "location" not in mirrored[plan["title"]]
    # Outside branch scope there is no base ref and no merge base, whatever the scope holds.
    assert (doc["scope"]["baseRef"], doc["scope"]["mergeBase"]) == (None, None)
    assert doc["scope"]["pathFilter"] == ["src/app.py"] and doc["run"]["note"] is None
    # The debugger was not recorded and nothing failed: SKIPPED with the reason, not NOT_RUN.
    debugger = next(r for r in doc["skillResults"] if r["skill"] == "debugger")
    assert debugger["status"] == "SKIPPED" and "no failures" in debugger["notes"]


def test_duplicate_findings_merge() -> None:
    issues = dedup(
        [
            finding("reviewer", "Off-by-one in page count", 6, description="Last page dropped."),
            finding(
                "tester",
                "off-by-one in page count!",
                8,
                issue_class="test-failure",
                description="test_pages fails",
            ),
            finding(
                "codex-reviewer", "Off-by-one in page count", 5, description="Last page dropped."
            ),
            finding("qa", "Off-by-one in page count", 4, line=31, issue_class="coverage"),
        ]
    )
    assert len(issues) == 2
    merged = issues[0]
    assert merged.sources == ("reviewer", "tester", "codex-reviewer")
    assert merged.severity == 8 and merged.title == "off-by-one in page count!"
    assert merged.description == "Last page dropped.\n\ntest_pages fails"
    assert merged.issue_class == "correctness"  # correctness outranks test-failure and coverage
    assert issues[1].line == 31  # another line is another issue


def test_same_rule_merges_across_titles_and_tools() -> None:
    issues = dedup(
        [
            finding(
                "static-analysis",
                "F401 `os` imported but unused",
                3,
                rule="F401",
                issue_class="style",
            ),
            finding("reviewer", "Unused import", 4, rule="F401", issue_class="coverage"),
            finding("static-analysis", "Line too long", 2, rule="E501", issue_class="style"),
        ]
    )
    assert [(i.severity, i.sources) for i in issues] == [
        (4, ("static-analysis", "reviewer")),
        (2, ("static-analysis",)),
    ]
    assert issues[0].issue_class == "coverage"


def test_correctness_wins_over_coverage() -> None:
    (issue,) = dedup(
        [
            finding("qa", "Test asserts nothing", 5, issue_class="coverage"),
            finding("reviewer", "Test asserts nothing", 5, issue_class="correctness"),
        ]
    )
    assert issue.issue_class == "correctness"


def test_comment_review_severity_never_lowered() -> None:
    issues = dedup(
        [
            finding("reviewer", "Stale docstring", 2, issue_class="style"),
            finding("comment-review", "Stale docstring", 6, issue_class="comment"),
            finding(
                "comment-review", "Comment narrates history", 5, line=60, issue_class="comment"
            ),
        ]
    )
    assert [(i.title, i.severity) for i in issues] == [
        ("Stale docstring", 6),
        ("Comment narrates history", 5),
    ]
    doc = built(deep_staged_state())
    comment = next(i for i in doc["issues"] if i["sources"] == ["comment-review"])
    assert comment["severity"] == 5 and comment["class"] == "comment"


def test_sort_order_and_line_zero() -> None:
    issues = dedup(
        [
            finding("reviewer", "b", 5, path="z.py", line=1),
            finding("reviewer", "a", 5, path=None),
            finding("reviewer", "c", 5, path="a.py", line=9),
            finding("reviewer", "d", 5, path="a.py", line=0),
            finding("reviewer", "e", 11, path="a.py", line=2),
        ]
    )
    assert [i.title for i in issues] == ["e", "d", "c", "b", "a"]
    assert issues[0].severity == 10  # clamped into the schema's range, never dropped
    assert issues[1].line is None  # line 0 is "the whole file"


def test_error_invalid_base_keeps_complete_shape() -> None:
    doc = built(invalid_base_state())
    assert doc["status"] == "error"
    assert doc["error"] == {
        "code": "INVALID_BASE",
        "message": "base ref origin/nope does not resolve to a commit",
    }
    assert doc["overall"] == {"result": "error", "mode": "branch"}
    sc = doc["scope"]
    assert (sc["baseRef"], sc["mergeBase"], sc["headSha"]) == ("origin/nope", None, HEAD)
    assert sc["includedFiles"] == [] and sc["excludedFiles"] == []
    assert [r["skill"] for r in doc["skillResults"]] == PIPELINE
    status = {r["skill"]: r["status"] for r in doc["skillResults"]}
    # What light would have run is NOT_RUN; what it never includes stays SKIPPED (docs/report.md).
    outside = {
        "codex-reviewer",
        "comment-review",
        "qa",
        "ux-reviewer",
        "visual-verify",
        "plan-completeness",
    }
    assert {s for s, st in status.items() if st == "SKIPPED"} == outside
    assert {s for s, st in status.items() if st == "NOT_RUN"} == set(PIPELINE) - outside
    assert doc["skillResults"][0]["notes"] == (
        "not run: verification stopped at scope: base ref origin/nope does not resolve to a commit"
    )
    assert doc["triage"]["skills_run"] == [] and doc["triage"]["skills_skipped"] == PIPELINE
    assert exit_code(doc, 7) == EXIT_ERROR


def test_error_before_scope_preserves_requested_base() -> None:
    state = RunState(
        run_id="r",
        request=request(scope="branch", base="origin/x"),
        failed_phase="scope",
        error_code="INTERNAL_ERROR",
        error_message="OSError: disk full",
    )
    doc = built(state)
    sc = doc["scope"]
    assert (sc["mode"], sc["baseRef"], sc["mergeBase"], sc["headSha"]) == (
        "branch",
        "origin/x",
        None,
        None,
    )
    assert doc["skillResults"][1]["notes"] == (
        "not run: verification stopped at scope: OSError: disk full"
    )


def test_error_mid_pipeline_keeps_what_ran() -> None:
    state = light_branch_state(
        outcomes=(),
        failed_phase="review",
        error_code="INTERNAL_ERROR",
        error_message="RuntimeError: broker gone",
    )
    doc = built(state)
    assert doc["status"] == "error" and doc["overall"]["result"] == "error"
    assert doc["skillResults"][0]["status"] == "COMPLETED"  # static ran and is kept
    assert doc["triage"]["skills_run"] == ["static-analysis"]
    tester = doc["skillResults"][1]
    assert tester == {
        "skill": "tester",
        "status": "NOT_RUN",
        "notes": "not run: verification stopped at review: RuntimeError: broker gone",
    }
    assert len(doc["issues"]) == 2  # findings made before the error are still reported


def test_stopped_phase_is_the_one_that_failed() -> None:
    state = light_branch_state(
        static=None,
        outcomes=(),
        failed_phase="static",
        error_code="TOOL_FAILED",
        error_message="ruff crashed",
    )
    notes = built(state)["skillResults"][0]["notes"]
    assert notes == "not run: verification stopped at static: ruff crashed"


def test_nothing_to_verify() -> None:
    scope = Scope(mode="staged", head_sha=HEAD, nothing_to_verify=True, excluded=(ALL_OTHER_FILES,))
    doc = built(RunState(run_id="r", request=request(mode="report-only"), scope=scope))
    assert (doc["status"], doc["overall"]["result"], doc["error"]) == ("ok", "pass", None)
    assert doc["scope"]["nothingToVerify"] is True
    assert [r["skill"] for r in doc["skillResults"]] == PIPELINE
    assert {(r["status"], r["notes"]) for r in doc["skillResults"]} == {
        ("SKIPPED", "nothing to verify")
    }
    assert exit_code(doc, 1) == EXIT_OK
    assert "**Nothing to verify:**" in report.markdown(doc)


def test_blocked_when_nothing_analysed() -> None:
    state = light_branch_state(
        static=skipped("static-analysis", "no linters or type checkers discovered"),
        outcomes=(
            outcome("tester", "BLOCKED", "no test command discovered"),
            outcome("codex-reviewer", "BLOCKED", "Codex auth missing"),
            skipped("reviewer", "Codex is available"),
            outcome("exerciser", "PASSED", "Flow completed"),
        ),
    )
    doc = built(state)
    assert (doc["status"], doc["overall"]["result"], doc["error"]) == ("blocked", "blocked", None)
    assert exit_code(doc, 10) == EXIT_ERROR
    md = report.markdown(doc)
    assert "**Verification blocked:**" in md
    assert "> **Warning: codex-reviewer was BLOCKED.**" in md
    assert "**Judgement reviewer:** codex-reviewer — BLOCKED" in md


@pytest.mark.parametrize(
    ("skill", "status"),
    [
        ("tester", "FAILED"),
        ("static-analysis", "COMPLETED"),
        ("qa", "COMPLETED"),
    ],
)
def test_one_analysing_skill_is_enough(skill: str, status: Any) -> None:
    recorded = outcome(skill, status)
    state = light_branch_state(
        static=recorded if skill == "static-analysis" else None,
        outcomes=() if skill == "static-analysis" else (recorded,),
    )
    assert built(state)["status"] == "ok"


def test_unrecorded_skills_are_not_run() -> None:
    tester = outcome("tester", "FAILED", "1 failed", finding("tester", "boom", 9))
    doc = built(light_branch_state(outcomes=(tester,)))
    status = {r["skill"]: (r["status"], r["notes"]) for r in doc["skillResults"]}
    assert status["qa"] == ("SKIPPED", "not in light composition")
    assert status["plan-completeness"] == ("SKIPPED", "no plan resolved")
    # A failure of severity 7+ needed the debugger: its absence is a hole, shown as one.
    assert status["debugger"] == ("NOT_RUN", "not run: no result was recorded for this skill")
    assert status["exerciser"][0] == "NOT_RUN"
    # Without Codex on PATH light would have chosen reviewer: codex-reviewer is not a hole.
    assert status["codex-reviewer"] == ("SKIPPED", "not in light composition")
    assert "> **Not run:** reviewer, exerciser, debugger." in report.markdown(doc)


@pytest.mark.parametrize(
    ("fail_on", "expected"),
    [
        (1, EXIT_ISSUES),
        (9, EXIT_ISSUES),
        # Nothing reaches the threshold, but the reviewer did not run and the exerciser was
        # blocked: not a pass.
        (10, EXIT_INCOMPLETE),
        (11, EXIT_INCOMPLETE),
    ],
)
def test_exit_code_fail_on(fail_on: int, expected: int) -> None:
    doc = built(light_branch_state())  # highest severity 9
    assert exit_code(doc, fail_on) == expected


def test_exit_code_pass_only_when_every_check_ran() -> None:
    """0 means every check of the composition ran and none failed; the result field stays the
    specification's (pass), and --allow-incomplete accepts checks that did not run."""
    ran = (
        outcome("tester", "PASSED", "3 passed"),
        outcome("reviewer", "COMPLETED", "nothing found"),
        outcome("exerciser", "PASSED", "exercised"),
    )
    clean = light_branch_state(static=outcome("static-analysis", "COMPLETED"), outcomes=ran)
    doc = built(clean)
    assert doc["overall"]["result"] == "pass" and exit_code(doc, 1) == EXIT_OK
    holes = light_branch_state(static=outcome("static-analysis", "COMPLETED"), outcomes=ran[:1])
    doc = built(holes)
    assert doc["overall"]["result"] == "pass" and doc["run"]["exitCode"] == EXIT_INCOMPLETE
    assert exit_code(doc, 1) == EXIT_INCOMPLETE
    allowed = holes.model_copy(
        update={"request": holes.request.model_copy(update={"allow_incomplete": True})}
    )
    doc = built(allowed)
    assert doc["run"]["gates"]["allowIncomplete"] is True and doc["run"]["exitCode"] == EXIT_OK


def test_light_with_no_judgement_reviewer_at_all_is_incomplete() -> None:
    """Light --scope=all with Codex on PATH: codex-reviewer does not audit a whole codebase and
    the reviewer is not the light slot's choice, so both are SKIPPED and no judgement ran:
    exit 4, and the Markdown says which check did not run."""
    ran = (
        outcome("tester", "PASSED", "3 passed"),
        skipped("codex-reviewer", "SKIPPED_UNSUPPORTED_SCOPE: Codex does not audit --scope=all"),
        skipped("reviewer", "Codex available: the light slot is codex-reviewer"),
        outcome("exerciser", "PASSED", "exercised"),
    )
    doc = built(light_branch_state(static=outcome("static-analysis", "COMPLETED"), outcomes=ran))
    assert doc["overall"]["result"] == "pass" and doc["run"]["exitCode"] == EXIT_INCOMPLETE
    assert "**Did not run:** judgement reviewer NOT_RUN (none of light's ran" in report.markdown(
        report.build(
            light_branch_state(static=outcome("static-analysis", "COMPLETED"), outcomes=ran)
        )
    )


# -- Markdown ----------------------------------------------------------------------------------


def test_markdown_escapes_table_cells() -> None:
    md = report.markdown(built(light_branch_state()))
    row = next(line for line in md.splitlines() if line.startswith("| VI-2 "))
    assert "test_parse fails \\| TypeError" in row
    # A line break is " / ", not an HTML tag: the table reads in a terminal too.
    assert 'TypeError: unsupported operand / while parsing "1\\|2"' in row
    assert len(re.findall(r"(?<!\\)\|", row)) == 7  # 6 columns: no cell split the row


def test_markdown_sections() -> None:
    md = report.markdown(built(light_branch_state()))
    assert md.startswith(
        "# Verification Report\n\n"
        "**Verdict: issues found** (exit 1): 3 issue(s) at or above severity 7\n\n"
        "**Did not run:** reviewer NOT_RUN (provider rate limit: 429 Too Many Requests); "
        "exerciser BLOCKED (SERVICE_UNAVAILABLE: no way to start the app was found)\n\n"
        "> Mode: interactive ran as report-only: nobody attached (CI is set)"
    )
    assert "<br>" not in md
    assert "- src/app.py (modified, lines 27-36, 40)" in md
    assert "- src/new.py (added, entire file)" in md
    assert "- src/old.py (deleted)" in md
    assert "- src/util.py (renamed from src/helpers.py, lines 3-5)" in md
    assert "**Files Excluded:** All other files (outside selected scope)" in md
    assert "**Judgement reviewer:** reviewer (Codex unavailable) — NOT_RUN" in md
    assert "**Static analysis:** ruff (1 finding), mypy (1 finding)" in md
    assert "| reviewer | **NOT_RUN** | provider rate limit: 429 Too Many Requests |" in md
    assert "> **Not run:** reviewer." in md
    assert "**Total: 4 issues from 4 skill findings (deduplicated)**" in md
    assert "No issues were evaluated by the exerciser." in md
    assert "Custom Verification Gates" not in md and "Deferred to Later Epic" not in md


def test_markdown_error_block() -> None:
    md = report.markdown(built(invalid_base_state()))
    assert (
        "**Verification error** (INVALID_BASE): base ref origin/nope does not resolve to a commit"
    ) in md
    assert "**Base ref:** `origin/nope`" in md and "**Merge base:** `null`" in md


def test_markdown_deep_judgement_line_and_total() -> None:
    md = report.markdown(built(deep_staged_state()))
    assert (
        "**Judgement reviewer:** 4 of five: reviewer, codex-reviewer — BLOCKED, comment-review, qa"
    ) in md
    assert "**Total: 4 issues from 5 skill findings (deduplicated)**" in md


def test_markdown_renders_gates_and_verifications() -> None:
    doc = built(deep_staged_state())
    doc["exerciserVerification"] = [
        {"issue": "VI-1", "status": "NOT_REPRODUCED", "evidence": "retried 3x"}
    ]
    doc["customGates"]["exerciser"] = [
        {
            "rule": "Saved records reload",
            "status": "PASS",
            "evidence": "record 42",
            "checker": "exerciser",
        }
    ]
    doc["customGates"]["review"] = [
        {"rule": "Tenant scoped", "status": "BLOCKED", "evidence": "", "checker": "reviewer"}
    ]
    report.validate(doc)
    md = report.markdown(doc)
    assert "| VI-1 | Retry loop never gives up | NOT REPRODUCED | retried 3x |" in md
    assert "| 1 | Tenant scoped | BLOCKED | reviewer |  |" in md
    assert "**Custom Gates: 1/2 passed, 1 blocked**" in md


# -- 8a: one problem reported by several skills ------------------------------------------------

RUFF_JSON: dict[str, Any] = dict(rule="F401", tool="ruff", issue_class="style")


def test_static_and_reviewer_findings_of_one_problem_merge() -> None:
    # The audit's case: ruff's own finding, a reviewer quoting it, and a reviewer's paraphrase.
    issues = dedup(
        [
            finding(
                "static-analysis",
                "ruff F401: `json` imported but unused",
                5,
                path="pkg/m.py",
                line=9,
                **RUFF_JSON,
            ),
            finding(
                "reviewer",
                "ruff F401: `json` imported but unused",
                6,
                path="pkg/m.py",
                line=9,
                issue_class="style",
            ),
            finding(
                "codex-reviewer",
                "Unused import json",
                4,
                path="pkg/m.py",
                line=9,
                issue_class="style",
            ),
        ]
    )
    assert len(issues) == 1
    (issue,) = issues
    assert issue.sources == ("static-analysis", "reviewer", "codex-reviewer")
    assert issue.severity == 6 and (issue.path, issue.line) == ("pkg/m.py", 9)


def test_report_counts_the_merge() -> None:
    static = outcome(
        "static-analysis",
        "COMPLETED",
        "ruff (1 finding)",
        finding(
            "static-analysis",
            "F401 `json` imported but unused",
            5,
            path="pkg/m.py",
            line=9,
            **RUFF_JSON,
        ),
    )
    reviewer = outcome(
        "reviewer",
        "COMPLETED",
        "Found 1 item",
        finding("reviewer", "Unused import json", 6, path="pkg/m.py", line=9),
    )
    doc = built(light_branch_state(static=static, outcomes=(reviewer,)))
    assert [(i["sources"], i["severity"]) for i in doc["issues"]] == [
        (["static-analysis", "reviewer"], 6)
    ]
    assert doc["dedup"] == {"skillFindings": 2, "issues": 1}


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        # A rule code settles it, however the other side words the problem.
        (
            finding("static-analysis", "ruff F401: `json` imported but unused", 5, **RUFF_JSON),
            finding("reviewer", "F401: json is never used", 6),
            True,
        ),
        (
            finding(
                "static-analysis",
                "mypy arg-type: Argument 1 has incompatible type",
                7,
                rule="arg-type",
                tool="mypy",
            ),
            finding("reviewer", "Wrong argument type passed to f() [arg-type]", 6),
            True,
        ),
        # Otherwise most content words must be shared, inflections and punctuation aside.
        (
            finding("static-analysis", "ruff F401: `json` imported but unused", 5, **RUFF_JSON),
            finding("reviewer", "Unused import json", 6),
            True,
        ),
        (
            finding("reviewer", "Off-by-one in the page count", 6),
            finding("qa", "off by one in page counts!", 4),
            True,
        ),
        # Different problems on one line stay apart.
        (
            finding("reviewer", "Unused import json", 6),
            finding("codex-reviewer", "Division by zero when total is 0", 8),
            False,
        ),
        (
            finding("static-analysis", "ruff F401: `json` imported but unused", 5, **RUFF_JSON),
            finding("reviewer", "Division by zero", 8),
            False,
        ),
        (
            finding("reviewer", "Unused import json", 6),
            finding("codex-reviewer", "Unused import os", 6),
            False,
        ),
        (
            finding("static-analysis", "ruff F401: `os` imported but unused", 5, **RUFF_JSON),
            finding("static-analysis", "ruff F401: `json` imported but unused", 5, **RUFF_JSON),
            False,
        ),
        (
            finding(
                "static-analysis",
                "ruff E501: Line too long (120 > 100)",
                2,
                rule="E501",
                tool="ruff",
            ),
            finding("reviewer", "ruff F401: `json` imported but unused", 6),
            False,
        ),
    ],
)
def test_same_problem(a: Finding, b: Finding, same: bool) -> None:
    assert same_problem(a, b) is same and same_problem(b, a) is same
    assert len(dedup([a, b])) == len(dedup([b, a])) == (1 if same else 2)


def test_no_chained_merge_across_two_problems() -> None:
    # "Unused import" matches each of the two, but the two are different imports: the third
    # finding must not pull the second into the first one's issue.
    issues = dedup(
        [
            finding("static-analysis", "ruff F401: `os` imported but unused", 5, **RUFF_JSON),
            finding("reviewer", "Unused import", 6, rule="F401"),
            finding("static-analysis", "ruff F401: `json` imported but unused", 5, **RUFF_JSON),
        ]
    )
    assert [i.sources for i in issues] == [("static-analysis", "reviewer"), ("static-analysis",)]


def test_comment_review_floor_survives_a_paraphrased_merge() -> None:
    (issue,) = dedup(
        [
            finding("reviewer", "Docstring of parse() is stale", 2, issue_class="style"),
            finding("comment-review", "Stale docstring on parse()", 5, issue_class="comment"),
        ]
    )
    assert issue.sources == ("reviewer", "comment-review")
    assert (issue.severity, issue.issue_class) == (5, "comment")


def test_exerciser_verdict_finds_a_merged_issue_by_any_member_title() -> None:
    static = outcome(
        "static-analysis",
        "COMPLETED",
        "",
        finding(
            "static-analysis",
            "F401 `json` imported but unused",
            5,
            path="pkg/m.py",
            line=9,
            **RUFF_JSON,
        ),
        finding(
            "static-analysis",
            "E501 Line too long",
            2,
            path="pkg/m.py",
            line=9,
            rule="E501",
            tool="ruff",
            issue_class="style",
        ),
    )
    reviewer = outcome(
        "reviewer",
        "COMPLETED",
        "",
        finding("reviewer", "Unused import json", 6, path="pkg/m.py", line=9),
    )
    exerciser = SkillOutcome(
        skill="exerciser",
        status="PASSED",
        reason="r",
        verifications=(
            Verification(
                path="pkg/m.py",
                line=9,
                status="CONFIRMED",
                evidence="e",
                title="F401 `json` imported but unused",
            ),
        ),
    )
    doc = built(light_branch_state(static=static, outcomes=(reviewer, exerciser)))
    assert doc["issues"][0]["title"] == "Unused import json"  # the lead is the reviewer's
    assert doc["exerciserVerification"] == [
        {"issue": "VI-1", "status": "CONFIRMED", "evidence": "e"}
    ]


# -- tester: IN-SCOPE / OUT-OF-SCOPE ------------------------------------------------------------


def test_in_scope_is_reported_where_known() -> None:
    doc = built(light_branch_state())
    by_title = {i["title"]: i for i in doc["issues"]}
    assert by_title["test_total fails: assert 3 == 4"]["inScope"] is True
    assert by_title["test_parse fails | TypeError"]["inScope"] is False
    assert all("inScope" not in i for i in doc["issues"] if i["class"] != "test-failure")
    assert all("inScope" not in f for f in doc["findings"])  # the adversary shape is fixed
    md = report.markdown(doc)
    assert "| test_total fails: assert 3 == 4 (IN-SCOPE) |" in md
    assert (
        "| test_parse fails \\| TypeError (OUT-OF-SCOPE: no scoped file in the test or its "
        "traceback) |"
    ) in md


def test_schema_rejects_a_non_boolean_in_scope() -> None:
    doc = built(light_branch_state())
    doc["issues"][0]["inScope"] = "yes"
    with pytest.raises(ValueError, match=r"inScope: 'yes' is not of type 'boolean'"):
        report.validate(doc)


def test_merged_failure_is_in_scope_when_any_member_is() -> None:
    (issue,) = dedup(
        [
            finding(
                "tester", "Test failed: t.py::test_a", 9, issue_class="test-failure", in_scope=False
            ),
            finding(
                "exerciser",
                "Test failed: t.py::test_a",
                8,
                issue_class="test-failure",
                in_scope=True,
            ),
        ]
    )
    assert issue.in_scope is True


# -- Markdown cosmetics -------------------------------------------------------------------------


def test_markdown_single_line_range_says_line() -> None:
    scope = branch_scope(
        included=(
            FileChange(path="a.py", status="modified", lines=(LineRange(start=2, end=2),)),
            FileChange(path="b.py", status="modified", lines=(LineRange(start=2, end=3),)),
            FileChange(
                path="c.py",
                status="modified",
                lines=(LineRange(start=2, end=2), LineRange(start=7, end=7)),
            ),
        )
    )
    md = report.markdown(built(light_branch_state(scope=scope)))
    assert "- a.py (modified, line 2)\n" in md
    assert "- b.py (modified, lines 2-3)\n" in md
    assert "- c.py (modified, lines 2, 7)\n" in md


def test_markdown_quotes_file_names_git_would_quote() -> None:
    odd = "pkg/a\nb.py"
    scope = branch_scope(
        included=(
            FileChange(path=odd, status="modified", lines=(LineRange(start=1, end=4),)),
            FileChange(path="pkg/a b.py", status="added"),
        ),
        excluded=(ExcludedFile(path="vendor/x\ty.py", reason="vendored"),),
    )
    bug = outcome("reviewer", "COMPLETED", "", finding("reviewer", "Bug", 6, path=odd, line=2))
    clean = outcome("static-analysis", "COMPLETED")
    md = report.markdown(built(light_branch_state(scope=scope, static=clean, outcomes=(bug,))))
    assert '- `"pkg/a\\nb.py"` (modified, lines 1-4)\n' in md
    assert "- pkg/a b.py (added, entire file)\n" in md  # nothing to quote: shown as it is
    assert '- `"vendor/x\\ty.py"` (vendored)\n' in md
    row = next(line for line in md.splitlines() if line.startswith("| VI-1 "))
    assert '| `"pkg/a\\nb.py"`:2 |' in row
    assert "<br>" not in row and "pkg/a b.py" not in row


def test_markdown_quoting_keeps_distinct_names_distinct() -> None:
    names = ["a\nb", "a\\nb", "a b", '"a\\nb"', "a`b\n", "\x1b.py"]
    assert len({path_text(n) for n in names}) == len(names)
    assert path_text("a\\nb") == '`"a\\\\nb"`'
    assert path_text("a`b\n") == '``"a`b\\n"``'
    assert path_text("\x1b.py") == '`"\\033.py"`'


def test_parametrized_failures_at_one_line_stay_apart() -> None:
    # Their titles differ by the case id only; the test ids say they are two failures.
    issues = dedup(
        [
            finding(
                "tester",
                f"Test failed: tests/t.py::test_x[{case}]",
                9,
                path="tests/t.py",
                line=5,
                issue_class="test-failure",
                nodeid=f"tests/t.py::test_x[{case}]",
            )
            for case in ("1", "2")
        ]
    )
    assert [i.title for i in issues] == [
        "Test failed: tests/t.py::test_x[1]",
        "Test failed: tests/t.py::test_x[2]",
    ]
