"""Skill prompts for the judgement reviewers and the plan completeness check.

Every review prompt is, in order: the CONTEXT_BUNDLE, the skill's assigned files, the static
findings relevant to its domain, the engineer skill reference, the skill's own instruction block
(its registry entry in verify_dag/skills.py), the CARRY-FORWARD RULES when a ledger is in play, and
an OUTPUT FORMAT asking for one JSON object followed by the line-oriented additions (REAFFIRMED /
REOPENED / DEFERRED_TO_EPIC / STATUS). docs/verify.md ("Phase order") lists the bundle's parts.
"""

# The plan prompt's output format is quoted as the specification words it, long lines included.
# ruff: noqa: E501

from __future__ import annotations

from verify_dag import skills
from verify_dag.models.findings import Finding
from verify_dag.models.state import RunState
from verify_dag.phases.scope.text import scope_context
from verify_dag.phases.triage.gating import scoped_files
from verify_dag.reviewers.context import bundle, carry_forward, carry_forward_rules, static_table

ASSIGNED_ROWS = 300
DIFF_CAP = 400_000  # characters of BRANCH DIFF in the plan prompt

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
    """Static findings in the skill's domain (its prompt's ``static``): all for the general
    reviewers, its files for the user-facing ones, none for comment-review and qa (comments and
    tests are not lint's domain)."""
    findings = state.static.findings if state.static is not None else ()
    spec = skills.SKILLS[skill].prompt
    domain = spec.static if spec is not None else "none"
    if domain == "all":
        return findings
    if domain == "assigned":
        files = set(assigned_files(state, skill))
        return tuple(f for f in findings if f.location is not None and f.location.path in files)
    return ()


def _review_prompt(skill: str) -> skills.Prompt:
    known = skills.SKILLS.get(skill)
    spec = known.prompt if known is not None else None
    if spec is None or spec.template != "review":
        raise ValueError(f"no prompt template for skill {skill!r}")
    return spec


def skill_prompt(state: RunState, skill: str) -> str:
    """The full prompt for one judgement reviewer."""
    spec = _review_prompt(skill)
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
    parts.append(spec.instructions + (f"\n{spec.addendum}" if spec.addendum else ""))
    if carry_forward(state):
        parts.append(carry_forward_rules())
    parts.append(_output_format(state, spec))
    return "\n\n".join(parts)


def _output_format(state: RunState, spec: skills.Prompt) -> str:
    lines = [
        "OUTPUT FORMAT:",
        "Reply with exactly one JSON object listing every issue found (an empty list when there "
        "are none):",
        '{"findings": [{"title": "...", "severity": 7, "location": "path:line", '
        '"category": "...", "description": "..."}]}',
        "- title: short description",
        f"- severity: {spec.severity}",
        '- location: "path:line" of the scoped code, or null when the issue has no single line',
        f"- category: {spec.category}",
        f"- description: {spec.description}",
    ]
    extra = [spec.extra_line] if spec.extra_line else []
    if carry_forward(state):
        extra += [
            'REAFFIRMED: <known id> — <one sentence>    (one line per id, or "none")',
            'REOPENED:   <known id> — <harm evidence>   (one line per id, or "none")',
        ]
    if state.request.epic_text is not None:
        extra.append(
            'DEFERRED_TO_EPIC: <issue> — <one sentence>    (one line per deferral, or "none")'
        )
    if spec.status:
        extra.append(spec.status)
    if extra:
        lines += ["", "Then, after the JSON object, each on its own line:", *extra]
    return "\n".join(lines)


def _plan_instructions() -> str:
    spec = skills.SKILLS["plan-completeness"].prompt
    if spec is None or spec.template != "plan":
        raise ValueError("no prompt template for skill 'plan-completeness'")
    return spec.instructions


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
            _plan_instructions(),
            _PLAN_OUTPUT,
        ]
    )
