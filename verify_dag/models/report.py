"""The report (docs/report.md) as a typed model whose JSON form is the JSON v1 document.

``report.build`` makes a Report from a run's state; JSON v1, the Markdown and the store are all
produced from it. Its JSON is JSON v1 everywhere it travels (the result backend, the report
store, ``--output``), so a client reads the report it was handed and the one the store kept the
same way. Field names are snake_case here and camelCase in the JSON; a key that v1 omits when it
does not apply is a field excluded when None, every other None is written as null.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from verify_dag.models.base import Frozen
from verify_dag.models.findings import IssueClass, Status
from verify_dag.models.request import Depth, Mode
from verify_dag.models.v1_keys import ALIASES, earlier_shape, insert_after, repeat

RunStatus = Literal["error", "blocked", "ok"]
Result = Literal["error", "blocked", "issues-found", "pass"]


def _absent(value: object) -> bool:
    return value is None


class _V1(Frozen):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class FileRecord(_V1):
    path: str
    status: str  # a FileChange status, or "included" for a whole-file scope
    lines: tuple[str, ...]  # "27-36", "27", or ["entire file"]; [] for a deletion
    old_path: str | None = Field(default=None, exclude_if=_absent)
    binary: Literal[True] | None = Field(default=None, exclude_if=_absent)


class ExcludedRecord(_V1):
    path: str
    reason: str


class ReportScope(_V1):
    depth: Depth
    mode: str | None  # the resolved mode; None only when no mode was resolved
    base_ref: str | None
    merge_base: str | None
    head_sha: str | None
    included_files: tuple[FileRecord, ...]
    excluded_files: tuple[ExcludedRecord, ...]
    delta_base_sha: str | None
    delta_files: tuple[FileRecord, ...]
    compare_ref: str | None
    path_filter: tuple[str, ...]
    diff_command: str | None
    notes: tuple[str, ...]
    nothing_to_verify: bool


class ReportError(_V1):
    code: str
    message: str


class PointLocation(_V1):
    """The adversary contract's location: exactly path and line (the column a tool gave is in
    issues[].location only)."""

    path: str
    line: int


class AdversaryFinding(_V1):
    """findings[]: an issue without its id, in exactly the shape existing consumers rely on
    (title, severity, description, sources, and location where one applies): nothing is added
    here; rule, tool and column are in issues[]."""

    title: str
    severity: int
    description: str
    sources: tuple[str, ...]
    location: PointLocation | None = Field(default=None, exclude_if=_absent)


class Overall(_V1):
    result: Result
    mode: str | None


class ReaffirmedRow(_V1):
    id: str
    skill: str
    reason: str
    new_harm_evidence: bool
    known: bool  # the id was in the KNOWN FINDINGS table the reviewers saw


class ReopenedRow(_V1):
    id: str
    skill: str
    reason: str
    evidence: str
    known: bool


class KnownFindings(_V1):
    supplied: int
    reaffirmed: tuple[ReaffirmedRow, ...]
    reopened: tuple[ReopenedRow, ...]


class DeferredRow(_V1):
    issue: str
    item: str
    source: str


class SkillReason(_V1):
    skill: str
    reason: str


class GatingRow(_V1):
    applies: bool
    reason: str
    files: tuple[str, ...]


class ReportTriage(_V1):
    skills_run: tuple[SkillReason, ...]
    skills_skipped: tuple[SkillReason, ...]
    # TRIAGE_RESULT itself, absent when the run stopped before triage.
    job_b: bool | None = Field(default=None, exclude_if=_absent)
    skill_assignments: dict[str, tuple[str, ...]] | None = Field(default=None, exclude_if=_absent)
    gating: dict[str, GatingRow] | None = Field(default=None, exclude_if=_absent)


class CachedPart(_V1):
    what: str
    key: str
    stored: str | None = Field(default=None, exclude_if=_absent)


class SkillResult(_V1):
    """skillResults[]: exactly skill, status and notes, which gates compare by exact value;
    what else is known of the skill is its skillDetails entry."""

    skill: str
    status: Status
    notes: str


class ToolUseRow(_V1):
    """skillDetails[].tools[]: one analyser that ran (docs/report.md)."""

    tool: str
    version: str | None
    completed: bool


class SkillDetail(_V1):
    """skillDetails[] (additive): what skillResults cannot hold, one entry per skillResults
    item, in the same order."""

    skill: str
    # The sandbox the skill's repository code ran in; null when it ran none (docs/security.md).
    isolation: str | None
    # The parts of the result taken from the result cache; [] when none was.
    cached: tuple[CachedPart, ...]
    # Seconds the skill took where it ran and was timed; null otherwise.
    duration_s: float | None = Field(alias="durationS")
    # The analysers it ran, with their versions; [] for a skill that runs none (and from
    # reports stored before this key existed).
    tools: tuple[ToolUseRow, ...] = ()


class IssueLocation(_V1):
    """Structured: a path and a line always (an issue with no location is null, never half of
    one); endLine for a range, column where the tool gave one."""

    path: str
    line: int
    end_line: int | None = Field(default=None, exclude_if=_absent)
    column: int | None = Field(default=None, exclude_if=_absent)


class ReportIssue(_V1):
    id: str  # VI-1, VI-2, ... in report order
    severity: int
    title: str
    sources: tuple[str, ...]
    location: IssueLocation | None  # null when the issue has no path
    description: str
    issue_class: IssueClass = Field(alias="class")
    baseline: Literal["introduced", "pre-existing"] | None = Field(default=None, exclude_if=_absent)
    # The tester's IN-SCOPE / OUT-OF-SCOPE call; absent where no skill made one, since "not
    # known" is not "out of scope".
    in_scope: bool | None = Field(default=None, exclude_if=_absent)
    # Additive: the tool's rule id and the tool (null when none), the rule's documentation
    # where the tool names it, and a fingerprint that stays the same when the issue's line
    # moves (the rule and the line's text, not its number).
    rule: str | None = None
    tool: str | None = None
    help_uri: str | None = Field(default=None, exclude_if=_absent)
    # Always set by this version; absent from reports stored by earlier ones.
    fingerprint: str | None = Field(default=None, exclude_if=_absent)


class ExerciserVerdict(_V1):
    issue: str  # a VI id
    status: Literal["CONFIRMED", "NOT_REPRODUCED", "NOT_APPLICABLE", "BLOCKED"]
    evidence: str


class GateRow(_V1):
    rule: str
    status: Literal["PASS", "FAIL", "BLOCKED", "NOT_CHECKED"]
    evidence: str
    checker: str


class CustomGates(_V1):
    exerciser: tuple[GateRow, ...]
    review: tuple[GateRow, ...]


class DebuggerRow(_V1):
    failure: str
    pre_existing: Literal["yes", "no", "undetermined"]
    command: str
    evidence: str
    touched_by_diff: tuple[str, ...]


class Gates(_V1):
    """What decides the exit code, besides the run's status (docs/report.md, "Exit codes")."""

    fail_on: int  # an issue at or above this severity fails the run
    new_only: bool  # ... unless it was already there at the base (--new-only)
    fail_under: float | None  # changed-line coverage below this percentage fails it too
    # Checks of the composition that did not run exit 4 unless this is set (--allow-incomplete).
    allow_incomplete: bool = False


class RunInfo(_V1):
    id: str
    repo: str  # as the run named it, never a password
    requested_mode: Mode
    mode: Mode  # what ran: interactive runs as report-only with nobody attached (note says why)
    note: str | None
    # Additive: the gates the run was judged by and the exit code they give.
    gates: Gates | None = Field(default=None, exclude_if=_absent)
    exit_code: int | None = Field(default=None, exclude_if=_absent)
    # Additive: seconds each phase and skill took where it ran; absent when none was timed.
    phase_seconds: dict[str, float] | None = Field(default=None, exclude_if=_absent)


Origin = Literal["ruff", "model"]


class FixRecord(_V1):
    """One issue's line in the additive ``fixes`` list (Phase 9, docs/fixes.md)."""

    issue: str  # its VI id
    decision: Literal["fix", "skip", "not-acted-on"]
    option: str | None  # the chosen fix's label
    origin: Origin | None
    files: tuple[str, ...]  # what the fix touched, or would have
    applied: bool  # written to the work tree and still there (a reverted fix is not)
    # fixed / not-fixed: the check that raised the issue was re-run on the fixed files (auto-fix);
    # not-checked: applied, verify not re-run (interactive); not-attempted: nothing applied.
    verified: Literal["fixed", "not-fixed", "not-checked", "not-attempted"]
    evidence: str  # the check's output, or why nothing was attempted


class DedupCounts(_V1):
    skill_findings: int
    issues: int


class CoverageFigure(_V1):
    """The changed lines' coverage as a number (qa's figure, diff-cover's on the same data)."""

    changed_lines: int  # executable changed lines measured
    covered: int
    percent: float  # 100 when no executable line changed, as diff-cover says


class SkillTokens(_V1):
    """reviewTokens.skills[]: one skill's model call, as its backend reported it."""

    skill: str
    backend: str
    model: str | None
    # null: the backend does not report them (codex, a command template); 0 from the cache.
    input_tokens: int | None
    output_tokens: int | None
    requests: int  # HTTP requests made, retries included; 1 for a CLI call, 0 from the cache
    from_cache: bool


class ReviewTokens(_V1):
    """What the judgement reviewers' model calls cost (additive; docs/report.md)."""

    max_tokens: int | None  # --max-review-tokens, null when the run set none
    input_tokens: int  # the sums over the skills whose backend reported them
    output_tokens: int
    skills: tuple[SkillTokens, ...]


class Report(_V1):
    """The JSON v1 report: ``model_dump(mode="json")`` is the document, ``model_validate`` of a
    document gives the model back."""

    schema_version: Literal[1]
    status: RunStatus
    error: ReportError | None
    findings: tuple[AdversaryFinding, ...]
    overall: Overall
    scope: ReportScope
    known_findings: KnownFindings | None
    deferred_to_epic: tuple[DeferredRow, ...]
    triage: ReportTriage
    skill_results: tuple[SkillResult, ...]
    issues: tuple[ReportIssue, ...]
    exerciser_verification: tuple[ExerciserVerdict, ...]
    custom_gates: CustomGates
    debugger: tuple[DebuggerRow, ...]
    run: RunInfo
    dedup: DedupCounts
    # Additive: the changed lines' coverage when the run measured it (deep, --fail-under).
    coverage: CoverageFigure | None = None
    # Additive: what Phase 9 did with each issue (interactive, auto-fix); [] when it did nothing.
    fixes: tuple[FixRecord, ...] = ()
    # Additive: each skill's sandbox, cache hits and duration (skillResults holds exactly three
    # keys); read back as () from a report stored before it existed.
    skill_details: tuple[SkillDetail, ...] = ()
    # Additive: tokens in and out per judgement skill that asked a model; absent when none did
    # and no budget was set (and from reports stored before it existed).
    review_tokens: ReviewTokens | None = Field(default=None, exclude_if=_absent)

    @model_serializer(mode="wrap")
    def _v1(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        doc: dict[str, Any] = handler(self)
        for part, (after, aliases) in ALIASES.items():
            extra = {alias: repeat(part, doc[part][field]) for alias, field in aliases}
            doc[part] = insert_after(doc[part], after, extra)
        return doc

    @model_validator(mode="before")
    @classmethod
    def _without_aliases(cls, data: Any) -> Any:
        """A v1 document read back: its aliases are dropped, once checked against what they
        repeat (a document whose aliases disagree was not written from a Report)."""
        if not isinstance(data, dict):
            return data  # built from the models, not read back
        data = earlier_shape(dict(data))
        for part, (_, aliases) in ALIASES.items():
            if not isinstance(data.get(part), dict):
                continue  # the field's own validation says what is wrong
            data[part] = values = dict(data[part])
            for alias, field in aliases:
                if alias not in values:
                    continue
                got = values.pop(alias)
                try:
                    agrees = got == repeat(part, values.get(field))
                except (TypeError, KeyError):
                    agrees = True  # a malformed field: its own validation says so
                if not agrees:
                    raise ValueError(f"{part}.{alias} does not repeat {part}.{field}")
        return data
