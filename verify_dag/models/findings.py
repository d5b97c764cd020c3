"""Findings and per-skill outcomes, as every phase reports them."""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen
from verify_dag.models.carry import Deferred, Reaffirmed, Reopened

Status = Literal["COMPLETED", "PASSED", "FAILED", "BLOCKED", "SKIPPED", "NOT_RUN"]
IssueClass = Literal[
    "correctness", "security", "coverage", "comment", "ux", "visual", "test-failure",
    "environment", "style", "plan-completeness",
]


class Location(Frozen):
    path: str
    line: int | None = None
    end_line: int | None = None


class Finding(Frozen):
    title: str
    severity: int  # 1-10
    description: str
    source: str  # the skill that produced it: static-analysis, tester, reviewer, ...
    issue_class: IssueClass
    location: Location | None = None
    rule: str | None = None  # tool rule id (ruff code, mypy error code), when there is one
    tool: str | None = None  # the external tool, for static findings
    in_scope: bool | None = None  # tester failures: in or out of the scoped files


class SkillOutcome(Frozen):
    skill: str
    status: Status
    notes: str = ""
    reason: str = ""  # routing reason for triage.skillsRun / skillsSkipped
    ran: bool = True  # invoked (skillsRun) vs skipped or unavailable (skillsSkipped)
    findings: tuple[Finding, ...] = ()
    # What a judgement reviewer said about the carry-forward inputs (REAFFIRMED / REOPENED /
    # DEFERRED_TO_EPIC lines). Collected into the report, never used to filter findings.
    reaffirmed: tuple[Reaffirmed, ...] = ()
    reopened: tuple[Reopened, ...] = ()
    deferred: tuple[Deferred, ...] = ()
