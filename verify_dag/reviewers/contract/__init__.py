"""The contract skill of the review chord: ``verify --contract=PATH`` (docs/contract.md).

The contract verifier lives beside it (:func:`.verify.verify_contract`: parsing, diff scope, the
oracle, the judge, the floor guard); ``verify-dag contract`` (the
command, verify_dag/contract_tool/) uses the same verifier. This module only runs it on the run's
diff, in a checkout of the verified commit (a worker's copy of the repository may be bare), and
turns its gaps into findings of the report.
"""

from __future__ import annotations

from pathlib import Path

from verify_dag import skills, workspace
from verify_dag.models import Finding, Location, RunState, SkillOutcome
from verify_dag.reviewers import runner
from verify_dag.reviewers.contract.models import ContractVerdict
from verify_dag.reviewers.contract.verify import verify_contract

SKILL = "contract"
REASON = skills.SKILLS[SKILL].reason
# A criterion the change does not meet is a defect of the change; a weakened floor hides one.
NOT_MET, FLOOR, UNVERIFIABLE, OUT_OF_SCOPE = 8, 7, 6, 6


def review(state: RunState) -> list[SkillOutcome]:
    sc, req = state.scope, state.request
    assert sc is not None and req.contract_text is not None
    if sc.old_commit is None:
        why = f"--scope={sc.mode} has no diff to hold against a contract"
        return [SkillOutcome(skill=SKILL, status="SKIPPED", ran=False, reason=why, notes=why)]
    shown = req.contract or "CONTRACT"
    with workspace.checkout(state.run_id, req.repo, sc.new_commit) as workdir:
        verdict = verify_contract(
            workdir,
            workdir / Path(shown).name,
            f"{sc.old_commit}..{sc.new_commit}",
            config=runner.backends_config(state),
            shown_path=shown,
            text=req.contract_text,
        )
    return [outcome(verdict)]


def outcome(verdict: ContractVerdict) -> SkillOutcome:
    """The verdict as a skill outcome: ERROR is NOT_RUN with its reason, never a pass."""
    line = verdict.line
    if verdict.verdict == "ERROR":
        return SkillOutcome(skill=SKILL, status="NOT_RUN", reason=REASON, notes=line)
    return SkillOutcome(
        skill=SKILL,
        status="COMPLETED",
        reason=REASON,
        notes=line,
        findings=tuple(findings(verdict)),
    )


def findings(verdict: ContractVerdict) -> list[Finding]:
    out: list[Finding] = []
    for c in verdict.criteria:
        if c.status == "NOT-MET":
            out.append(
                _finding(
                    f"Contract criterion {c.number} not met: {c.text}",
                    NOT_MET,
                    "correctness",
                    c.evidence,
                    None,
                )
            )
        elif c.status == "UNVERIFIABLE":
            out.append(
                _finding(
                    f"Contract criterion {c.number} unverifiable: {c.text}",
                    UNVERIFIABLE,
                    "plan-completeness",
                    c.evidence,
                    None,
                )
            )
    for path in verdict.scope.outOfScope if verdict.scope else ():
        out.append(
            _finding(
                f"File outside the contract's FILE SCOPE: {path}",
                OUT_OF_SCOPE,
                "plan-completeness",
                "the change touches a file the contract's FILE SCOPE does not list",
                Location(path=path),
            )
        )
    for row in verdict.floor.rows if verdict.floor else ():
        if not row.waived:
            out.append(
                _finding(
                    f"Floor weakened ({row.kind}): {row.snippet}",
                    FLOOR,
                    "coverage",
                    row.text(),
                    Location(path=row.file, line=row.line),
                )
            )
    return out


def _finding(
    title: str, severity: int, issue_class: str, description: str, location: Location | None
) -> Finding:
    return Finding.model_validate(
        {
            "title": title,
            "severity": severity,
            "description": description,
            "source": SKILL,
            "issue_class": issue_class,
            "location": location,
        }
    )
