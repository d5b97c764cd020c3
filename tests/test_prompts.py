"""Phase 5 CONTEXT_BUNDLE and Phase 6 skill prompts, built from hand-made run states."""

from __future__ import annotations

import json
from typing import Any

import pytest

from verify_dag import skills
from verify_dag.models import (
    Command,
    EngineerContext,
    FileChange,
    Finding,
    Ledger,
    LedgerFinding,
    LineRange,
    Location,
    RunState,
    Scope,
    SkillOutcome,
    Toolchain,
    TriageResult,
    VerifyRequest,
)
from verify_dag.models.source import parse_source
from verify_dag.reviewers import context, prompts

# Each skill's instruction block, from its registry entry.
INSTRUCTIONS = {n: s.prompt.instructions for n, s in skills.SKILLS.items() if s.prompt is not None}
SCOPE = Scope(
    mode="branch",
    base_ref="origin/main",
    compare_ref="HEAD",
    merge_base="b" * 40,
    head_sha="c" * 40,
    old_commit="b" * 40,
    new_commit="c" * 40,
    diff_command="git diff bbbb cccc",
    diff_stat=" src/cli.py | 3 ++-\n 1 file changed",
    included=(
        FileChange(path="src/cli.py", status="modified", lines=(LineRange(start=12, end=14),)),
        FileChange(path="web/App.tsx", status="added"),
        FileChange(path="old.py", status="deleted", lines=()),
    ),
)
LEDGER = Ledger(
    findings=(
        LedgerFinding(
            id="F-3",
            skill="reviewer",
            title="Token compared with ==",
            severity=6,
            disposition="accepted",
            location="src/cli.py:13",
            root_cause="public nonce",
            reason="agreed | round 2",
        ),
        LedgerFinding(
            id="F-9", skill="qa", title="Logout untested", severity=5, disposition="fixed"
        ),
    )
)
STATIC = SkillOutcome(
    skill="static-analysis",
    status="COMPLETED",
    findings=(
        Finding(
            title="ruff F401: `os` imported but unused",
            severity=4,
            description="d",
            source="static-analysis",
            issue_class="style",
            tool="ruff",
            rule="F401",
            location=Location(path="src/cli.py", line=12),
        ),
        Finding(
            title="eslint no-unused-vars: x unused",
            severity=3,
            description="d",
            source="static-analysis",
            issue_class="style",
            tool="eslint",
            rule="no-unused-vars",
            location=Location(path="web/App.tsx", line=2),
        ),
    ),
)


def _state(**request: Any) -> RunState:
    req = VerifyRequest(source=parse_source("/r"), depth="deep", **request)
    triage = TriageResult(job_b=True, skill_assignments={"ux-reviewer": ("src/cli.py",)})
    return RunState(
        run_id="r",
        request=req,
        scope=SCOPE,
        static=STATIC,
        triage=triage,
        toolchain=Toolchain(
            commands=(
                Command(kind="test", argv=("pytest",), source="pyproject", exists=True),
                Command(kind="lint", argv=("ruff", "check"), source="ruff", exists=True),
            )
        ),
    )


def test_bundle_sections_without_optional_inputs() -> None:
    text = context.bundle(_state())
    order = [
        "VERIFICATION SCOPE:",
        "SCOPE_METADATA:",
        "ENGINEER SKILL SUMMARY:",
        "STATIC ANALYSIS SUMMARY:",
        "TOOLCHAIN:",
        "CUSTOM REVIEW GATES:",
        "DIFF STAT:",
    ]
    positions = [text.index(h) for h in order]
    assert positions == sorted(positions)
    assert "src/cli.py (modified, lines 12-14)" in text
    assert context.NO_ENGINEER in text and "Reference files available" not in text
    assert "| ruff | F401 | src/cli.py:12 | 4 | `os` imported but unused |" in text
    assert "- Test: pytest\n- Build: none discovered\n- Lint: ruff check" in text
    assert "CUSTOM REVIEW GATES:\nNone defined\nThese are repo-maintainer-defined" in text
    assert " 1 file changed" in text
    for absent in ("KNOWN FINDINGS", "DELTA SINCE", "EPIC CONTEXT", "DEFERRED_TO_EPIC"):
        assert absent not in text


def test_static_that_did_not_run_is_not_reported_as_clean() -> None:
    state = _state().model_copy(
        update={
            "static": SkillOutcome(
                skill="static-analysis", status="NOT_RUN", notes="ruff could not run"
            )
        }
    )
    assert "Static analysis NOT_RUN: ruff could not run" in context.bundle(state)
    clean = _state().model_copy(
        update={"static": SkillOutcome(skill="static-analysis", status="COMPLETED")}
    )
    assert "No static findings on scoped lines." in context.bundle(clean)


def test_static_table_is_capped_with_a_count() -> None:
    many = tuple(STATIC.findings[0] for _ in range(45))
    table = context.static_table(many)
    assert table.count("| ruff |") == context.STATIC_ROWS
    assert table.endswith("... 5 more static findings not shown")


def test_ledger_adds_known_findings_without_fixed_ones_and_the_delta() -> None:
    scope = SCOPE.model_copy(
        update={
            "delta_base_sha": "d" * 40,
            "delta_files": (
                FileChange(
                    path="src/cli.py", status="modified", lines=(LineRange(start=13, end=13),)
                ),
            ),
        }
    )
    state = _state(ledger_data=LEDGER).model_copy(update={"scope": scope})
    text = context.bundle(state)
    assert "KNOWN FINDINGS (decided by previous verification runs on this change):" in text
    assert (
        "| F-3 | src/cli.py:13 | Token compared with == | public nonce | 6 | accepted | "
        "agreed \\| round 2 |"
    ) in text
    assert "F-9" not in text  # fixed findings are not known findings
    assert f"DELTA SINCE LAST VERIFIED HEAD: {'d' * 40}\n- src/cli.py (modified, line 13)" in text


def test_no_carry_forward_removes_known_findings_and_rules() -> None:
    state = _state(ledger_data=LEDGER, no_carry_forward=True)
    assert "KNOWN FINDINGS" not in context.bundle(state)
    prompt = prompts.skill_prompt(state, "reviewer")
    assert "CARRY-FORWARD RULES" not in prompt and "REAFFIRMED:" not in prompt


def test_carry_forward_rules_go_only_to_judgement_reviewers() -> None:
    state = _state(ledger_data=LEDGER)
    for skill in skills.reviewers():
        prompt = prompts.skill_prompt(state, skill)
        assert context.carry_forward_rules() in prompt
        assert "\nREAFFIRMED: <known id>" in prompt and "\nREOPENED:   <known id>" in prompt
    for skill in ("tester", "static-analysis", "exerciser"):
        with pytest.raises(ValueError, match="no prompt template"):
            prompts.skill_prompt(state, skill)
    rules = context.carry_forward_rules()
    assert rules.startswith("CARRY-FORWARD RULES\n\nTier A — regression lens")
    assert "Never suppressible, whatever KNOWN FINDINGS says" in rules


def test_epic_context_adds_the_deferral_rules_and_line() -> None:
    state = _state(epic_text="Done: #1\nThis: #2\nRemaining: #3 caching\n")
    text = context.bundle(state)
    assert "EPIC CONTEXT:\nDone: #1\nThis: #2\nRemaining: #3 caching" in text
    assert "Work whose natural home is one of the remaining issues is deferred" in text
    assert 'OUTPUT ADDITION:\nDEFERRED_TO_EPIC: <issue> — <one sentence>    (or "none")' in text
    prompt = prompts.skill_prompt(state, "qa")
    assert prompt.rstrip().splitlines()[-1].startswith("DEFERRED_TO_EPIC: <issue>")
    assert "DEFERRED_TO_EPIC" not in prompts.skill_prompt(_state(), "qa")


def test_engineer_skill_and_review_gates() -> None:
    md = (
        "# Verification\n\n## Exerciser Gates\n- app starts\n\n## Review Gates\n"
        "- no print() in library code\n* every endpoint checks auth\n\n## Other\n- not a gate\n"
    )
    state = _state().model_copy(
        update={
            "engineer": EngineerContext(
                skill_dir=".claude/skills/app-engineer",
                summary="Build with make.",
                verification_md=md,
            )
        }
    )
    text = context.bundle(state)
    assert (
        "ENGINEER SKILL SUMMARY:\nBuild with make.\nReference files available at "
        ".claude/skills/app-engineer" in text
    )
    assert (
        "CUSTOM REVIEW GATES:\n- no print() in library code\n* every endpoint checks auth\n"
        "These are repo-maintainer-defined"
    ) in text
    assert "not a gate" not in text and "app starts" not in text
    prompt = prompts.skill_prompt(state, "reviewer")
    assert "ENGINEER SKILL REFERENCE:\nReference files are available at .claude/skills/" in prompt


def test_codex_prompt_says_scope_metadata_is_authoritative() -> None:
    prompt = prompts.skill_prompt(_state(), "codex-reviewer")
    assert "SCOPE_METADATA above is authoritative" in prompt
    assert "Use `SCOPE_METADATA` as the source of truth for scope reconstruction." in prompt
    assert "- scope_mode: branch" in prompt and f"- merge_base: {'b' * 40}" in prompt
    assert "STATUS: COMPLETED | BLOCKED" in prompt and "SKIPPED_UNSUPPORTED_SCOPE" in prompt
    # Codex is told where it stands, not asked to shell out to itself or rebuild the workspace.
    assert "git diff --cached" in prompt
    assert "Shell out" not in prompt and "under /tmp" not in prompt


def test_assigned_files_and_relevant_static_findings() -> None:
    state = _state()
    reviewer = prompts.skill_prompt(state, "reviewer")
    # No assignment for reviewer in this triage: the full scoped list, deleted files excluded.
    assert "YOUR ASSIGNED FILES:\n- src/cli.py\n- web/App.tsx\n\n" in reviewer
    assert reviewer.count("| eslint |") == 2  # bundle + all static findings for reviewer
    ux = prompts.skill_prompt(state, "ux-reviewer")
    assert "YOUR ASSIGNED FILES:\n- src/cli.py\n\n" in ux
    relevant = ux.split("RELEVANT STATIC FINDINGS:")[1]
    assert "| ruff |" in relevant.split("ONLY test user-facing")[0]
    assert "| eslint |" not in relevant
    for skill in ("comment-review", "qa"):
        assert "RELEVANT STATIC FINDINGS:\nNone." in prompts.skill_prompt(state, skill)


def test_comment_review_threshold_and_severity_rule() -> None:
    prompt = prompts.skill_prompt(_state(), "comment-review")
    assert "COMMENT DENSITY THRESHOLD: 10% of added code lines" in prompt
    assert "severity (floor 5, cap 6 — the floor is deliberate)" in prompt  # its instruction block
    assert "- severity: integer, floor 5, cap 6" in prompt  # output format


def test_output_format_is_json_then_status_lines() -> None:
    prompt = prompts.skill_prompt(_state(), "visual-verify")
    fmt = prompt[prompt.index("OUTPUT FORMAT:") :]
    example = next(line for line in fmt.splitlines() if line.startswith('{"findings"'))
    keys = set(json.loads(example)["findings"][0])
    assert keys == {"title", "severity", "location", "category", "description"}
    assert fmt.rstrip().splitlines()[-1].startswith("STATUS: COMPLETED | SKIPPED")
    assert "STATUS:" not in prompts.skill_prompt(_state(), "qa").split("OUTPUT FORMAT:")[1]


def test_instruction_blocks_are_the_specified_text() -> None:
    assert set(INSTRUCTIONS) == {*skills.reviewers(), "plan-completeness"}
    assert INSTRUCTIONS["qa"].startswith(
        "Evaluate whether the scoped changes are adequately tested."
    )
    assert INSTRUCTIONS["reviewer"].endswith("close the report with the net-lines metric.")


def test_plan_prompt() -> None:
    state = _state(plan_text="# Plan\n## Phase 1\nadd cli\n## Phase 2\nadd cache\n")
    text = prompts.plan_prompt(state, "diff --git a/src/cli.py b/src/cli.py\n+x\n")
    order = [
        "PLAN FILE:\n# Plan",
        "BRANCH DIFF:\ndiff --git",
        "SCOPE CONTEXT:\nVERIFICATION SCOPE:",
        "You are checking whether the implementation is complete",
        "OUTPUT FORMAT:",
    ]
    positions = [text.index(h) for h in order]
    assert positions == sorted(positions)
    assert '"severity": 8, "location": null' in text and '{"findings": []}' in text
    with pytest.raises(ValueError, match="plan_text"):
        prompts.plan_prompt(_state(), "")
