"""Findings and per-skill outcomes, as every phase reports them."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import field_validator

from verify_dag.models.base import Frozen
from verify_dag.models.carry import Deferred, Reaffirmed, Reopened
from verify_dag.models.evidence import SuiteEvidence

Status = Literal["COMPLETED", "PASSED", "FAILED", "BLOCKED", "SKIPPED", "NOT_RUN"]
# A completion criterion's verdict: the exerciser's check of --completion and the completion
# verifier's artifacts give the same two.
CriterionVerdict = Literal["pass", "fail"]
IssueClass = Literal[
    "correctness",
    "security",
    "coverage",
    "comment",
    "ux",
    "visual",
    "test-failure",
    "environment",
    "style",
    "plan-completeness",
]
# The classes, in this order: the report schema's enum (tests/test_house.py checks it), and what
# every table keyed by class covers.
ISSUE_CLASSES: tuple[IssueClass, ...] = get_args(IssueClass)


class Location(Frozen):
    path: str
    line: int | None = None
    end_line: int | None = None
    column: int | None = None  # 1-based, where the tool gave one

    @field_validator("column")
    @classmethod
    def _one_based(cls, value: int | None) -> int | None:
        # A tool's column 0 (a 0-based tool's first column, a message without one) says no
        # more than "this line": the report's columns are 1-based.
        return value if value is None or value >= 1 else None


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
    # Static findings on modified lines: did the same problem exist at the merge base already?
    baseline: Literal["introduced", "pre-existing"] | None = None
    nodeid: str | None = None  # tester failures: the test id, for re-running just that test
    # tester failures: the per-test time limit (seconds) the test hit. Nothing re-runs such a
    # test at that limit again (it would cost the limit again).
    timed_out: float | None = None
    help_uri: str | None = None  # the rule's documentation, where the tool names it


class Diagnosis(Frozen):
    """The debugger's answer for one distinct failure signature (docs/verify.md, "The debugger")."""

    failure: str  # the failing test id or failure title
    pre_existing: Literal["yes", "no", "undetermined"]
    command: str
    evidence: str
    touched_by_diff: tuple[str, ...] = ()


class BuiltEnv(Frozen):
    """The env a suite ran in, by the builder that made it (tester/env/registry.py) and the env's
    own name there (a tox env, a nox session, a hatch env): another commit's suite (the
    debugger's, at the merge base) asks for the same one, to be built alike."""

    builder: str
    name: str


class GateResult(Frozen):
    """One custom gate from VERIFICATION.md, checked (docs/gates.md)."""

    kind: Literal["exerciser", "review"]
    rule: str
    status: Literal["PASS", "FAIL", "BLOCKED", "NOT_CHECKED"]
    evidence: str
    checker: str


class Verification(Frozen):
    """The exerciser's attempt to reproduce one reported issue (the report's exerciserVerification).

    Issues get their VI ids only when the report is built, so the issue is named by the same
    key the report dedups on: path, line and title.
    """

    path: str | None
    line: int | None
    title: str
    status: Literal["CONFIRMED", "NOT_REPRODUCED", "NOT_APPLICABLE", "BLOCKED"]
    evidence: str


class CacheHit(Frozen):
    """One part of a skill's result that came from the result cache (verify_dag/resultcache.py)
    instead of being computed again: what it is, its entry, and when it was stored."""

    what: str  # "mypy", "ruff: 3 of 4 files", "suite", "reply"
    key: str  # the entry's sha256
    stored: str | None = None  # ISO 8601 UTC


class TokenUsage(Frozen):
    """What one skill's model call cost, as the backend reported it (docs/report.md,
    "reviewTokens"): tokens read and written, None where the backend does not say (a CLI that
    prints no usage), and the requests it took (a retried 429 counts each try)."""

    backend: str  # the backend kind: anthropic, openai, claude, codex, command
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    requests: int = 0
    cached: bool = False  # the reply came from the result cache: nothing was spent on it

    def spent(self) -> int | None:
        """Tokens this call used, in and out; None when the backend did not report both."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


class ChangedCoverage(Frozen):
    """The changed lines' coverage the suite's run measured (qa's figure, diff-cover's)."""

    covered: int
    total: int  # executable changed lines; 0: none, which diff-cover counts as 100%

    @property
    def percent(self) -> float:
        return 100.0 * self.covered / self.total if self.total else 100.0


class ToolUse(Frozen):
    """One analyser a skill ran: its name, the version it ran at where that is known, and
    whether it completed. Code scanning closes a tool's alerts only when a later upload names
    that tool with no result, so every tool that ran is recorded, findings or not."""

    tool: str
    version: str | None = None
    completed: bool = True


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
    diagnoses: tuple[Diagnosis, ...] = ()  # debugger
    gates: tuple[GateResult, ...] = ()  # exerciser (exerciser gates) and reviewers (review gates)
    verifications: tuple[Verification, ...] = ()  # exerciser
    evidence: SuiteEvidence | None = None  # tester: per-test results for the evidence bundle
    # qa: the scoped files' coverage as Cobertura XML, kept with the run as coverage.xml so that
    # diff-cover can re-check the changed-line figure on the same data.
    coverage_xml: str | None = None
    # The sandbox the skill's repository code ran in (sandbox.py modes, joined by "+" when a
    # skill's commands ran under more than one); None when it ran none.
    isolation: str | None = None
    # The parts of this result taken from the result cache rather than computed in this run.
    cached: tuple[CacheHit, ...] = ()
    # The tester: the changed lines' coverage, when the run measured it (deep, --fail-under).
    coverage: ChangedCoverage | None = None
    # Seconds its task took (tasks/base.py header_phase), for the run metrics; None elsewhere.
    seconds: float | None = None
    # A judgement skill's model call: its tokens and requests; None when no model was asked.
    usage: TokenUsage | None = None
    # The analysers the skill ran (static analysis), with their versions.
    tools: tuple[ToolUse, ...] = ()
    # The tester: the env builder and env the suite ran in, when a builder with named envs
    # made it.
    env: BuiltEnv | None = None

    def combine(self, other: SkillOutcome) -> SkillOutcome:
        """One skill that ran in two parts (deterministic rules and a model pass, say).

        The skill is only as complete as its least complete part: a model pass that timed out
        makes the whole skill NOT_RUN even though its rules ran, because the judgement it was
        due did not happen (NOT_RUN, never COMPLETED, for a review that never ran). Both
        parts' findings are kept, and each part's own status stays visible in the notes.
        """
        status = next(
            (s for s in (self.status, other.status) if s in ("NOT_RUN", "BLOCKED")),
            self.status if self.status == "COMPLETED" else other.status,
        )
        return self.model_copy(
            update={
                "status": status,
                "notes": f"{self.notes}; {other.notes}",
                "findings": (*self.findings, *other.findings),
                "reaffirmed": (*self.reaffirmed, *other.reaffirmed),
                "reopened": (*self.reopened, *other.reopened),
                "deferred": (*self.deferred, *other.deferred),
                "diagnoses": (*self.diagnoses, *other.diagnoses),
                "gates": (*self.gates, *other.gates),
                "verifications": (*self.verifications, *other.verifications),
                "coverage_xml": self.coverage_xml or other.coverage_xml,
                "cached": (*self.cached, *other.cached),
                "usage": self.usage or other.usage,
                "tools": (*self.tools, *other.tools),
                "env": self.env or other.env,
            }
        )
