"""Phase 5: the compact CONTEXT_BUNDLE every judgement reviewer's prompt starts with.

The bundle tells a reviewer where to look and what is already known; reviewers read files
themselves. Tables are capped so the bundle stays compact on big scopes, and every cap says how
much it left out. The CARRY-FORWARD RULES live here too: they belong to the bundle's ledger
inputs, but are appended only to judgement reviewers' prompts (see ``prompts.skill_prompt``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from verify_dag.models.findings import Finding
from verify_dag.models.state import RunState
from verify_dag.phases.scope.text import describe, scope_context, scope_metadata

STATIC_ROWS = 40
KNOWN_ROWS = 80
SUMMARY_LINES = 40
_CELL = 160  # characters per table cell

NO_ENGINEER = "No engineer skill found — toolchain discovered via exploration"

_KNOWN_HEAD = """KNOWN FINDINGS (decided by previous verification runs on this change):

| ID | Location | Title | Root cause | Sev | Disposition | Reason |
|----|----------|-------|------------|-----|-------------|--------|"""

_EPIC_RULES = """\
Work whose natural home is one of the remaining issues is deferred, not reported: name it on
a DEFERRED_TO_EPIC line instead of filing a finding. Anything at severity 9-10, anything in
the security class, and any defect this change itself introduces is reported normally
regardless of what the backlog says.

OUTPUT ADDITION:
DEFERRED_TO_EPIC: <issue> — <one sentence>    (or "none")"""

_GATES_RULE = """\
These are repo-maintainer-defined requirements. If any rule falls in your review domain,
report PASS/FAIL for it. Failed gates should be reported as severity 9 findings.
Report each gate you judge on a line of its own, outside the findings:
GATE: <the rule as written> — PASS or FAIL — <the evidence you saw>
A FAIL there is filed as a severity 9 finding for you; do not repeat it among the findings. A
gate with a CHECK command is run by the exerciser: leave it to it."""

_CARRY_FORWARD_RULES = """CARRY-FORWARD RULES

Tier A — regression lens, full scoped diff, always. You have the whole branch diff and you
review all of it for anything the DELTA broke. A defect the delta introduced or made
reachable is reportable at full severity even at a location listed in KNOWN FINDINGS: an
accepted finding covers the exact state its root cause describes, never the file, the
function, or the subsystem.

Tier B — new audit territory. Do not open a new line of inquiry into code that is unchanged
since DELTA BASE and that KNOWN FINDINGS does not mention. Previous rounds already reviewed
that code against this threshold and dispositioned what they found. Widening the audit a
little further each round is how a loop that was one round from done ends up reporting on a
different subsystem every time.

Matching a known finding:
- Matches a KNOWN finding AND the code there is unchanged since DELTA BASE
  -> do not report it as a finding. List it under REAFFIRMED with the known ID and one sentence.
- Matches a KNOWN finding BUT the code there changed in the delta
  -> report it normally, at full severity. It is a new finding about new code.
- Has new evidence of concrete harm — a failing test, a reproduction, an exploit path
  -> report it normally AND list it under REOPENED with that evidence.

Never suppressible, whatever KNOWN FINDINGS says: anything at severity 9 or 10, and
anything in the security class.

OUTPUT ADDITIONS:
REAFFIRMED: <known id> — <one sentence>    (or "none")
REOPENED:   <known id> — <harm evidence>   (or "none")"""

_HEADING = re.compile(r"^\s*(#{1,6})\s*(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S")


def carry_forward_rules() -> str:
    """The CARRY-FORWARD RULES block, in the specification's words (docs/verify.md,
    "Carry-forward and epic context")."""
    return _CARRY_FORWARD_RULES


def carry_forward(state: RunState) -> bool:
    """Whether the carry-forward inputs are in play: a ledger without --no-carry-forward."""
    return state.request.ledger_data is not None and not state.request.no_carry_forward


def bundle(state: RunState) -> str:
    """The CONTEXT_BUNDLE, section by section (docs/verify.md, "Phase order")."""
    scope = state.scope
    if scope is None:
        raise ValueError("the context bundle needs a resolved scope")
    # scope_metadata() carries its own "SCOPE_METADATA:" header, the name the codex-reviewer
    # instructions refer to; a second "SCOPE METADATA:" line above it would only repeat it.
    parts = [scope_context(scope), scope_metadata(scope)]
    if carry_forward(state):
        parts.append(_known(state))
        if scope.delta_base_sha:
            delta = [f"- {c.path} {describe(c)}" for c in scope.delta_files] or [
                "- none (no file changed since that head)"
            ]
            parts.append(
                f"DELTA SINCE LAST VERIFIED HEAD: {scope.delta_base_sha}\n" + "\n".join(delta)
            )
    if state.request.epic_text is not None:
        epic = state.request.epic_text.strip() or "(the epic context file is empty)"
        parts.append(f"EPIC CONTEXT:\n{epic}\n\n{_EPIC_RULES}")
    parts += [
        _engineer(state),
        _static(state),
        _toolchain(state),
        _gates(state),
        "DIFF STAT:\n" + (scope.diff_stat.rstrip() or "(none: whole-file scope)"),
    ]
    return "\n\n".join(parts)


def _known(state: RunState) -> str:
    ledger = state.request.ledger_data
    known = ledger.known() if ledger is not None else ()
    rows = [
        _row(
            f.id,
            f.location or "-",
            f.title,
            f.root_cause or "-",
            str(f.severity),
            f.disposition,
            f.reason or "-",
        )
        for f in known[:KNOWN_ROWS]
    ]
    if not known:
        rows = ["| - | - | none: every ledger finding is fixed | - | - | - | - |"]
    elif len(known) > KNOWN_ROWS:
        rows.append(f"... {len(known) - KNOWN_ROWS} more known findings not shown")
    return _KNOWN_HEAD + "\n" + "\n".join(rows)


def _engineer(state: RunState) -> str:
    eng = state.engineer
    summary = (eng.summary.strip() if eng is not None else "") or NO_ENGINEER
    summary = "\n".join(summary.splitlines()[:SUMMARY_LINES])
    text = f"ENGINEER SKILL SUMMARY:\n{summary}"
    if eng is not None and eng.skill_dir:
        text += (
            f"\nReference files available at {eng.skill_dir} — read TESTING.md, "
            "ARCHITECTURE.md etc. for your domain"
        )
    return text


def static_table(findings: Sequence[Finding], limit: int = STATIC_ROWS) -> str:
    """| Tool | Rule | Location | Severity | Message | rows for static-analysis findings."""
    rows = [
        "| Tool | Rule | Location | Severity | Message |",
        "|------|------|----------|----------|---------|",
    ]
    for f in findings[:limit]:
        where = "-"
        if f.location is not None:
            where = f.location.path + (f":{f.location.line}" if f.location.line else "")
        rows.append(_row(f.tool or f.source, f.rule or "-", where, str(f.severity), _message(f)))
    if len(findings) > limit:
        rows.append(f"... {len(findings) - limit} more static findings not shown")
    return "\n".join(rows)


def _static(state: RunState) -> str:
    head = "STATIC ANALYSIS SUMMARY:\n"
    static = state.static
    if static is None:
        return head + "Static analysis has not run."
    if static.findings:
        return head + static_table(static.findings)
    if static.status != "COMPLETED":
        # A static phase that did not run found nothing only in the sense that it looked nowhere.
        return head + f"Static analysis {static.status}: {static.notes or static.reason}"
    return head + "No static findings on scoped lines."


def _toolchain(state: RunState) -> str:
    tc = state.toolchain

    def show(kinds: tuple[str, ...]) -> str:
        cmds = [c for c in (tc.commands if tc is not None else ()) if c.kind in kinds]
        if not cmds:
            return "none discovered"
        return "; ".join(c.display() + ("" if c.exists else " (not found)") for c in cmds)

    return (
        "TOOLCHAIN:\n"
        f"- Test: {show(('test',))}\n"
        f"- Build: {show(('build',))}\n"
        f"- Lint: {show(('lint', 'typecheck'))}"
    )


def review_gates(verification_md: str | None) -> list[str]:
    """The bullet list under a "Review Gates" heading of VERIFICATION.md."""
    if not verification_md:
        return []
    gates: list[str] = []
    level = 0
    for line in verification_md.splitlines():
        heading = _HEADING.match(line)
        if heading:
            depth = len(heading.group(1))
            if level and depth <= level:
                break
            if not level and "review gates" in heading.group(2).lower():
                level = depth
            continue
        if level and _BULLET.match(line):
            gates.append(line.strip())
    return gates


def _gates(state: RunState) -> str:
    eng = state.engineer
    gates = review_gates(eng.verification_md if eng is not None else None)
    return "CUSTOM REVIEW GATES:\n" + ("\n".join(gates) or "None defined") + "\n" + _GATES_RULE


def _message(f: Finding) -> str:
    # Static titles read "ruff F401: message"; the table has Tool and Rule columns already.
    prefix = f"{f.tool} {f.rule}: " if f.rule else f"{f.tool}: "
    return f.title[len(prefix) :] if f.tool and f.title.startswith(prefix) else f.title


def _row(*cells: str) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= _CELL else text[: _CELL - 3] + "..."
