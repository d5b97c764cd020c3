"""THE registry of skills: what each is, where it runs, when it is due, and what it is asked.

The composition of a verify run (docs/verify.md, "Composition") is read from here by the canvas
builder (which review tasks a depth fans out), the reviewers (what each task runs), the prompts,
the model backends (which skills take per-skill settings, the cost tier), triage (which skills get
assigned files) and the report (the order skillResults lists every skill in, and what a skill the
run holds no result for is filled in as; docs/report.md). Adding a reviewer is its registry entry
here, plus a module when it needs more than its prompt.
"""

# The instruction blocks are the specification's text verbatim, long lines included: rewrapping
# them would make every later comparison with it noisy.
# ruff: noqa: E501, RUF001

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from verify_dag.models.findings import IssueClass
from verify_dag.models.request import Depth

# The rows of the composition table: how a skill works, not where it runs.
Kind = Literal["deterministic", "judgement", "empirical", "diagnostic", "completeness"]
Queue = Literal["git", "static", "review", "test", "exercise"]
# When a skill of a depth's composition is due:
#   always          whenever its depth runs
#   if-codex        light's one judgement slot, when the review worker finds the Codex CLI
#   if-no-codex     light's one judgement slot otherwise
#   triage-gated    when triage Job B gates it in (--skip-ux / --skip-visual force it out)
#   needs-plan      when a plan resolved (--plan-file)
#   needs-contract  when --contract was given
#   on-failure      when a skill that fires the debugger reported a failure of severity 7+
Gate = Literal[
    "always",
    "if-codex",
    "if-no-codex",
    "triage-gated",
    "needs-plan",
    "needs-contract",
    "on-failure",
]
Tier = Literal["capable", "general"]  # the model a skill deserves by default (backends/config.py)
# One task fills light's judgement slot: the choice between if-codex and if-no-codex is made on
# the worker that runs it, where the Codex CLI either is or is not on PATH.
LIGHT_SLOT = "judgement"
# The security class is never suppressible by carry-forward, so a reviewer must name it as such.
_SECURITY = '; use "security" for anything in the security class'


@dataclass(frozen=True)
class Prompt:
    """What a model is asked (reviewers/prompts.py assembles it around the context bundle).

    ``review`` prompts get the assigned files, the relevant static findings and the carry-forward
    rules; the ``plan`` prompt is the plan, the branch diff and the scope.
    """

    instructions: str  # the skill's own instruction block
    template: Literal["review", "plan"] = "review"
    addendum: str = ""  # said after the instruction block
    category: str = ""  # what the OUTPUT FORMAT's category field takes
    # The static findings it sees: all of them, those on its assigned files, or none.
    static: Literal["all", "assigned", "none"] = "none"
    extra_line: str | None = None  # a line of its own after the JSON object, before carry-forward
    status: str | None = None  # the STATUS line it may end with
    severity: str = "integer 1-10, where 1=trivial, 10=critical"
    description: str = "what the issue is and why it matters"


@dataclass(frozen=True)
class Skill:
    name: str
    kind: Kind
    queue: Queue  # the Celery queue its task is routed to (tasks/app.py ROUTES)
    gates: Mapping[Depth, Gate]  # the depths whose composition includes it, and when it is due
    reason: str = ""  # the routing reason triage.skillsRun gives; phases that run it say their own
    prompt: Prompt | None = None
    issue_class: IssueClass = "correctness"  # a finding's class when the model names none we know
    tier: Tier = "general"
    assigned: bool = False  # triage gives it its own file list (skill_assignments)
    fires_debugger: frozenset[Depth] = frozenset()  # depths where its failures fire the debugger


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

# The specification's codex-reviewer block is addressed to a harness that shells out to Codex and
# builds a diff-only workspace for it. verify-dag is that harness: it rebuilds the workspace, checks
# it byte for byte against the scoped patch and runs `codex exec` there. Codex itself gets the part
# of the block that is about reviewing, said to it, so it does not try to shell out to itself or
# rebuild a workspace it is already standing in.
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


_BOTH: Mapping[Depth, Gate] = {"light": "always", "deep": "always"}
_DEEP: Mapping[Depth, Gate] = {"deep": "always"}
_GATED: Mapping[Depth, Gate] = {"deep": "triage-gated"}

# In the pipeline's order: skillResults lists the skills in it, and the canvas fans the review
# tasks out in it.
SKILLS: dict[str, Skill] = {
    s.name: s
    for s in (
        Skill("static-analysis", "deterministic", "static", _BOTH),
        Skill(
            "tester",
            "deterministic",
            "test",
            _BOTH,
            assigned=True,
            fires_debugger=frozenset({"light", "deep"}),
        ),
        Skill(
            "reviewer",
            "judgement",
            "review",
            {"light": "if-no-codex", "deep": "always"},
            reason="code files require correctness review",
            prompt=Prompt(
                _REVIEWER,
                category="design, architecture, coherence, hardening or security; add the "
                "over-engineering tag (delete / stdlib / native / yagni / shrink) where it applies"
                + _SECURITY,
                static="all",
                extra_line="NET_LINES: <signed number> — <the net-lines metric of the "
                "over-engineering lens, one sentence>",
            ),
            tier="capable",
            assigned=True,
        ),
        Skill(
            "codex-reviewer",
            "judgement",
            "review",
            {"light": "if-codex", "deep": "always"},
            reason="independent second-model review",
            prompt=Prompt(
                _CODEX_REVIEWER,
                addendum="SCOPE_METADATA above is authoritative: it must not infer scope mode "
                "from filenames or prose when exact metadata is available.",
                category="correctness, design, hardening, security, ..." + _SECURITY,
                static="all",
                status="STATUS: COMPLETED | BLOCKED <short factual reason> | "
                "SKIPPED_UNSUPPORTED_SCOPE | PATCH_CONSTRUCTION_FAILED <reason>",
            ),
            assigned=True,
        ),
        Skill(
            "comment-review",
            "judgement",
            "review",
            _DEEP,
            reason="comments can rot in any changed file",
            prompt=Prompt(
                _COMMENT_REVIEW,
                addendum="COMMENT DENSITY THRESHOLD: 10% of added code lines (the default; no "
                "project threshold was supplied).",
                # Its tags are all comments: none of them is the security class.
                category="the comment tag: review-id, narration, stale, appeasement, redundant, "
                "verbose or density",
                severity="integer, floor 5, cap 6 — the floor is deliberate (5 or 6 only)",
                description="what the issue is and why it matters, including a concrete rewrite "
                '(or "delete")',
            ),
            issue_class="comment",
            assigned=True,
        ),
        # qa's changed-line coverage comes from the tester's run on the test queue; its review
        # task adds the model pass, and collect merges the two.
        Skill(
            "qa",
            "judgement",
            "review",
            _DEEP,
            reason="test coverage assessment for everything that changed",
            prompt=Prompt(_QA, category="coverage, test-quality, mocks or test-type" + _SECURITY),
            issue_class="coverage",
            assigned=True,
        ),
        Skill(
            "ux-reviewer",
            "judgement",
            "review",
            _GATED,
            reason="user-facing surface in scope",
            prompt=Prompt(_UX_REVIEWER, category="ux" + _SECURITY, static="assigned"),
            issue_class="ux",
            assigned=True,
            fires_debugger=frozenset({"deep"}),
        ),
        # The composition table's empirical row: it judges screenshots of the running app, and
        # at light the exerciser's own visual lens stands in for it.
        Skill(
            "visual-verify",
            "empirical",
            "review",
            _GATED,
            reason="UI-rendering files in scope",
            prompt=Prompt(
                _VISUAL_VERIFY,
                category="visual (layout, hierarchy, spacing, typography, color, responsive, ...)"
                + _SECURITY,
                static="assigned",
                status="STATUS: COMPLETED | SKIPPED <NO_UI_FILES_IN_SCOPE | "
                "NO_RUNNING_APP_DISCOVERABLE | NO_SCREENSHOT_MECHANISM> — <one-line reason>",
            ),
            issue_class="visual",
            assigned=True,
        ),
        Skill(
            "plan-completeness",
            "completeness",
            "review",
            {"light": "needs-plan", "deep": "needs-plan"},
            reason="a plan file was supplied",
            prompt=Prompt(_PLAN_COMPLETENESS, template="plan"),
            issue_class="plan-completeness",
        ),
        Skill(
            "exerciser",
            "empirical",
            "exercise",
            _BOTH,
            fires_debugger=frozenset({"light", "deep"}),
        ),
        Skill("debugger", "diagnostic", "test", {"light": "on-failure", "deep": "on-failure"}),
        # Reported only in runs given a contract (docs/contract.md), so never filled in.
        Skill(
            "contract",
            "completeness",
            "review",
            {"light": "needs-contract", "deep": "needs-contract"},
            reason="a contract was supplied",
        ),
    )
}


def gate(skill: str, depth: Depth) -> Gate | None:
    """When ``skill`` is due at ``depth``; None when that depth's composition leaves it out."""
    return SKILLS[skill].gates.get(depth)


def light_slot() -> tuple[str, str]:
    """Light's one judgement reviewer: the one it runs where the worker finds Codex, and the one
    it runs otherwise."""
    with_codex = next(n for n in SKILLS if gate(n, "light") == "if-codex")
    return with_codex, next(n for n in SKILLS if gate(n, "light") == "if-no-codex")


def pipeline() -> tuple[str, ...]:
    """Every skill skillResults lists, in order: a skill the run holds no result for is filled in."""
    return tuple(s.name for s in SKILLS.values() if "needs-contract" not in s.gates.values())


def of_kind(kind: Kind) -> tuple[str, ...]:
    return tuple(s.name for s in SKILLS.values() if s.kind == kind)


def reviewers() -> tuple[str, ...]:
    """The judgement reviewers: every skill a model judges from a review prompt. Only they get the
    carry-forward rules; the skills that run commands report what came back and do not drift the
    way a fresh reader does."""
    return tuple(s.name for s in SKILLS.values() if s.prompt and s.prompt.template == "review")


def asks_a_model() -> tuple[str, ...]:
    """The skills that call a model backend, and so may have their own model and effort."""
    return tuple(
        s.name for s in SKILLS.values() if s.prompt is not None or s.kind == "completeness"
    )


def fires_debugger(depth: Depth) -> frozenset[str]:
    return frozenset(s.name for s in SKILLS.values() if depth in s.fires_debugger)
