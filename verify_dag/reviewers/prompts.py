"""Skill prompts for the judgement reviewers and the plan completeness check (seed Phase 6).

Every prompt follows the seed's "Skill Prompt Templates": the CONTEXT_BUNDLE, the skill's
assigned files, the static findings relevant to its domain, the engineer skill reference, the
skill's own instruction block (the seed's text, verbatim), the CARRY-FORWARD RULES for judgement
reviewers when a ledger is in play, and an OUTPUT FORMAT asking for one JSON object followed by
the seed's line-oriented additions (REAFFIRMED / REOPENED / DEFERRED_TO_EPIC / STATUS).
"""

# The instruction blocks below are the seed's text verbatim, long lines included: rewrapping them
# would make every future diff against the seed noisy.
# ruff: noqa: E501, RUF001

from __future__ import annotations

from verify_dag.models.findings import Finding
from verify_dag.models.state import RunState
from verify_dag.phases.scope import scope_context
from verify_dag.phases.triage.gating import scoped_files
from verify_dag.reviewers.context import bundle, carry_forward, carry_forward_rules, static_table

_REVIEWER = """Comprehensive review across all five dimensions:
1. Design & Code Quality: design adherence, over-engineering, AI slop, test integrity, structural completeness
2. Architecture: module boundaries, dependency direction, god objects, abstraction opportunities, coupling
3. Coherence: reinvented wheels, pattern violations, convention mismatches, documentation drift, dead code
4. Hardening: invalid inputs, error paths, inconsistent validation, orphaned references, state transitions
5. Security: injection, auth/authz, multi-tenant isolation, data exposure, crypto

Research the project's structure, patterns, and security approach BEFORE evaluating changes.
Focus on: 'Is this change well-designed, structurally sound, pattern-consistent, robust, and secure?'

Work the over-engineering lens in Dimension 1 deliberately — it is easy to review only
for what is missing and never for what should be cut. Tag those findings
(delete / stdlib / native / yagni / shrink), verify each proposed replacement actually
exists before reporting it, and close the report with the net-lines metric."""

# The seed's codex-reviewer block is addressed to the harness that shells out to Codex ("Shell out
# to the local Codex CLI", "Adapt the verify scope into a temporary diff-only workspace"). verify-dag
# is that harness: it rebuilds the workspace, checks it byte for byte against the scoped patch and
# runs `codex exec` there. Codex itself gets the part of the block that is about reviewing, said to
# it, so it does not try to shell out to itself or rebuild a workspace it is already standing in.
_CODEX_REVIEWER = """You are the independent second-opinion reviewer: a second engine's opinion, not a repeat of
another model's analysis.
Your working directory is a temporary diff-only workspace rebuilt from `SCOPE_METADATA`: HEAD holds
the old side of the scoped files and the index holds the new side, so `git diff --cached` is
exactly the change under review (checked byte for byte against the scoped patch before you were
started). Review only that diff.
Use `SCOPE_METADATA` as the source of truth for scope reconstruction.
Do NOT infer staged vs unstaged vs branch vs path-filtered scope from assigned files or prose if `SCOPE_METADATA` says otherwise.
If `git diff --cached` does not match `SCOPE_METADATA`, report PATCH_CONSTRUCTION_FAILED instead of reviewing an approximate diff.
If you cannot review (sandbox blocked, files unreadable), report BLOCKED status with a short factual reason.
If scope is `--scope=all`, report SKIPPED_UNSUPPORTED_SCOPE rather than attempting a whole-codebase audit.
Review correctness, design, hardening and security. Normalize your output into: title, severity, location, description."""

_COMMENT_REVIEW = """Review ONLY comments and docstrings added or modified in the scoped diff
(plus pre-existing comments the changes make stale).
Flag: ephemeral review-ID references (VI-N, CI-N, "per review feedback"),
historical change-narration ("previously", "now we", "replaced X with Y"),
stale comments contradicting the code, reviewer-appeasement, redundant restatement,
verbose rationale that a 1–2 line comment would carry, and one diff-level density
finding per the skill's step 5 (default 10% of added code lines; pass the project's
threshold when its agent instructions set one).
Comments must describe the current code and its intent — git owns history.
Code correctness, design, and prose docs are out of scope — other skills own those.
Normalize findings into: title, severity (floor 5, cap 6 — the floor is deliberate),
location, category (tag), description including a concrete rewrite (or "delete").
If comments are clean, report COMPLETED with zero findings."""

_UX_REVIEWER = """ONLY test user-facing changes in the scoped files.
Do not audit the entire UI/CLI for issues.
Focus on the UX of what changed in this scope.
Test any UI, CLI output, error messages, or API responses that were modified."""

_QA = """Evaluate whether the scoped changes are adequately tested.
Assess test quality, mock usage, and test type appropriateness.
Adapt expectations to codebase testing maturity.
Focus on: 'Are these changes well-tested with good tests?'"""

_VISUAL_VERIFY = """Read the engineer skill for screenshot mechanics (wrapper command, dev URLs, viewport conventions) — typically VISUAL.md or the engineer SKILL.md.
For each UI-rendering file in YOUR ASSIGNED FILES, identify at least one route that renders it (grep imports for components; page files render directly).
Take screenshots at desktop (1440-wide, full-page) AND mobile (390-wide, full-page). If responsive sizing changed, sample boundary widths too.
Open every PNG with `Read` and apply the holistic articulation step described in the skill: write 2-3 sentences describing the composition in designer's terms (balance, weight, hierarchy, rhythm, alignment, density, color, typography). Anything in that paragraph that reads as a complaint becomes a finding.
Focus on: 'Would a designer ship this?' — not 'is anything imperfect?'
If no UI-rendering files in scope or no running app discoverable, return STATUS: SKIPPED with a one-line factual reason — same convention as codex-reviewer.
Output structured findings (Title / Severity / Location / Category / Description) per the skill's reviewer-mode protocol."""

_PLAN_COMPLETENESS = """You are checking whether the implementation is complete relative to the plan.

Instructions:
- Identify all phases, sections, and steps described in the plan
- For each, determine whether the branch diff contains changes that implement it
- A phase is "addressed" if the diff contains changes that clearly correspond to its requirements
- If significant portions of the plan are unimplemented, emit a single finding:
  - Title: "Plan incomplete — only phase N of M implemented" (or similar descriptive summary)
  - Severity: 8
  - Description: List which phases/sections are implemented and which are missing, with brief reasoning
  - Sources: ["plan-completeness"]
  - Location: null (omit)
- If the plan appears fully implemented, emit NO finding (do not emit a success finding)"""


INSTRUCTIONS: dict[str, str] = {
    "reviewer": _REVIEWER,
    "codex-reviewer": _CODEX_REVIEWER,
    "comment-review": _COMMENT_REVIEW,
    "qa": _QA,
    "ux-reviewer": _UX_REVIEWER,
    "visual-verify": _VISUAL_VERIFY,
    "plan-completeness": _PLAN_COMPLETENESS,
}

# The judgement reviewers get the carry-forward rules; tester, static-analysis and exerciser never
# do (they report what came back and do not drift the way a fresh reader does).
JUDGEMENT = ("reviewer", "codex-reviewer", "qa", "comment-review", "ux-reviewer", "visual-verify")
DENSITY_THRESHOLD = "10% of added code lines"
ASSIGNED_ROWS = 300
DIFF_CAP = 400_000  # characters of BRANCH DIFF in the plan prompt

_CATEGORY = {
    "reviewer": "design, architecture, coherence, hardening or security; add the over-engineering "
    "tag (delete / stdlib / native / yagni / shrink) where it applies",
    "codex-reviewer": "correctness, design, hardening, security, ...",
    "comment-review": "the comment tag: review-id, narration, stale, appeasement, redundant, "
    "verbose or density",
    "qa": "coverage, test-quality, mocks or test-type",
    "ux-reviewer": "ux",
    "visual-verify": "visual (layout, hierarchy, spacing, typography, color, responsive, ...)",
}
_STATUS = {
    "codex-reviewer": "STATUS: COMPLETED | BLOCKED <short factual reason> | "
    "SKIPPED_UNSUPPORTED_SCOPE | PATCH_CONSTRUCTION_FAILED <reason>",
    "visual-verify": "STATUS: COMPLETED | SKIPPED <NO_UI_FILES_IN_SCOPE | "
    "NO_RUNNING_APP_DISCOVERABLE | NO_SCREENSHOT_MECHANISM> — <one-line reason>",
}

_PLAN_OUTPUT = """OUTPUT FORMAT:
Reply with exactly one JSON object. With the plan fully implemented it is {"findings": []};
otherwise it holds the single plan-completeness finding:
{"findings": [{"title": "Plan incomplete — only phase N of M implemented", "severity": 8, "location": null, "category": "plan-completeness", "description": "which phases/sections are implemented and which are missing, with brief reasoning"}]}"""


def assigned_files(state: RunState, skill: str) -> tuple[str, ...]:
    """TRIAGE_RESULT.skill_assignments[skill], else the full scoped file list."""
    triage = state.triage
    if triage is not None and skill in triage.skill_assignments:
        return triage.skill_assignments[skill]
    return scoped_files(state.scope) if state.scope is not None else ()


def relevant_static(state: RunState, skill: str) -> tuple[Finding, ...]:
    """Static findings in the skill's domain: all for the general reviewers, its files for the
    user-facing ones, none for comment-review and qa (comments and tests are not lint's domain)."""
    findings = state.static.findings if state.static is not None else ()
    if skill in ("reviewer", "codex-reviewer"):
        return findings
    if skill in ("ux-reviewer", "visual-verify"):
        files = set(assigned_files(state, skill))
        return tuple(f for f in findings if f.location is not None and f.location.path in files)
    return ()


def skill_prompt(state: RunState, skill: str) -> str:
    """The full prompt for one judgement reviewer."""
    if skill not in JUDGEMENT:
        raise ValueError(f"no prompt template for skill {skill!r}")
    files = assigned_files(state, skill)
    listed = [f"- {p}" for p in files[:ASSIGNED_ROWS]] or ["- none"]
    if len(files) > ASSIGNED_ROWS:
        listed.append(f"... {len(files) - ASSIGNED_ROWS} more (see VERIFICATION SCOPE)")
    static = relevant_static(state, skill)
    parts = [
        bundle(state),
        "YOUR ASSIGNED FILES:\n" + "\n".join(listed),
        "RELEVANT STATIC FINDINGS:\n" + (static_table(static) if static else "None."),
    ]
    eng = state.engineer
    if eng is not None and eng.skill_dir:
        parts.append(
            f"ENGINEER SKILL REFERENCE:\nReference files are available at "
            f"{eng.skill_dir}\nRead files relevant to your domain (e.g., TESTING.md for "
            "tester, architecture docs for reviewer)."
        )
    instructions = INSTRUCTIONS[skill]
    if skill == "codex-reviewer":
        instructions += (
            "\nSCOPE_METADATA above is authoritative: it must not infer scope mode "
            "from filenames or prose when exact metadata is available."
        )
    if skill == "comment-review":
        instructions += (
            f"\nCOMMENT DENSITY THRESHOLD: {DENSITY_THRESHOLD} (the default; no "
            "project threshold was supplied)."
        )
    parts.append(instructions)
    if carry_forward(state):
        parts.append(carry_forward_rules())
    parts.append(_output_format(state, skill))
    return "\n\n".join(parts)


def _output_format(state: RunState, skill: str) -> str:
    severity = "integer 1-10, where 1=trivial, 10=critical"
    description = "what the issue is and why it matters"
    # The security class is never suppressible by carry-forward, so it must be recognisable.
    category = _CATEGORY[skill] + '; use "security" for anything in the security class'
    if skill == "comment-review":
        severity = "integer, floor 5, cap 6 — the floor is deliberate (5 or 6 only)"
        description += ', including a concrete rewrite (or "delete")'
        category = _CATEGORY[skill]
    lines = [
        "OUTPUT FORMAT:",
        "Reply with exactly one JSON object listing every issue found (an empty list when there "
        "are none):",
        '{"findings": [{"title": "...", "severity": 7, "location": "path:line", '
        '"category": "...", "description": "..."}]}',
        "- title: short description",
        f"- severity: {severity}",
        '- location: "path:line" of the scoped code, or null when the issue has no single line',
        f"- category: {category}",
        f"- description: {description}",
    ]
    extra: list[str] = []
    if skill == "reviewer":
        extra.append(
            "NET_LINES: <signed number> — <the net-lines metric of the over-engineering "
            "lens, one sentence>"
        )
    if carry_forward(state):
        extra += [
            'REAFFIRMED: <known id> — <one sentence>    (one line per id, or "none")',
            'REOPENED:   <known id> — <harm evidence>   (one line per id, or "none")',
        ]
    if state.request.epic_text is not None:
        extra.append(
            'DEFERRED_TO_EPIC: <issue> — <one sentence>    (one line per deferral, or "none")'
        )
    if skill in _STATUS:
        extra.append(_STATUS[skill])
    if extra:
        lines += ["", "Then, after the JSON object, each on its own line:", *extra]
    return "\n".join(lines)


def plan_prompt(state: RunState, diff_text: str) -> str:
    """The plan completeness prompt: PLAN FILE, BRANCH DIFF, SCOPE CONTEXT, instructions."""
    plan = state.request.plan_text
    if plan is None:
        raise ValueError("plan completeness needs a resolved plan (request.plan_text)")
    if state.scope is None:
        raise ValueError("plan completeness needs a resolved scope")
    diff = diff_text
    if len(diff) > DIFF_CAP:
        diff = (
            diff[:DIFF_CAP] + f"\n... diff truncated: {len(diff_text) - DIFF_CAP} more "
            "characters not shown; read the rest with the diff command in SCOPE CONTEXT"
        )
    return "\n\n".join(
        [
            f"PLAN FILE:\n{plan.strip() or '(the plan file is empty)'}",
            f"BRANCH DIFF:\n{diff.rstrip() or '(empty diff)'}",
            "SCOPE CONTEXT:\n" + scope_context(state.scope),
            INSTRUCTIONS["plan-completeness"],
            _PLAN_OUTPUT,
        ]
    )
