"""The completion verifier's artifacts and job, as frozen models (seed 001).

Each artifact model is what one step writes into the run directory: ``extracted_completion.json``
(step 1), ``execution_result.json`` (step 2) and ``verify_result.json`` (step 3); a ``Dispatch``
is one row of ``dispatches.jsonl``. Field names are the seed's.
"""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen

Mode = Literal["full", "quick"]
Verdict = Literal["pass", "fail"]
ErrorCode = Literal[
    "missing_file",
    "malformed_json",
    "missing_field",
    "not_a_string",
    "empty",
    "too_long",
    "multi_line",
    "nul_byte",
]


class CompletionJob(Frozen):
    """What every task of one completion run receives: names and limits, never file contents."""

    run_id: str
    run_dir: str  # absolute; every worker of the run must see it at this path
    iteration: int
    mode: Mode = "full"
    timeout: float = 30.0  # seconds for the criterion (the seed's budget)
    cap: int = 100_000  # bytes kept per stream


class ExtractError(Frozen):
    code: ErrorCode
    message: str


class Extracted(Frozen):
    """extracted_completion.json: the criterion and why it cannot run, if it cannot."""

    completion: str | None  # stripped; None when there is no string to show
    errors: tuple[ExtractError, ...] = ()
    source: str = "parsed_scope.json"
    # Step 1 re-runs on a later iteration only when parsed_scope.json no longer has this hash.
    source_sha256: str | None = None
    iteration: int = 1  # the iteration that extracted it


class Execution(Frozen):
    """execution_result.json."""

    skipped: bool
    skip_reasons: tuple[str, ...] = ()
    skip_reason: str | None = None
    command: str | None = None  # what ran; None when skipped
    cwd: str | None = None
    exit_code: int | None = None  # None when skipped or timed out
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = 0
    timed_out: bool = False
    truncated: bool = False  # metadata for the report, never a verdict input
    timeout_s: float = 30.0
    cap_bytes: int = 100_000


class VerifyResult(Frozen):
    """verify_result.json: the deterministic verdict."""

    verdict: Verdict
    reason: str
    exit_code: int | None
    duration_ms: int
    truncated: bool
    timed_out: bool
    skipped: bool


class Dispatch(Frozen):
    """One row of dispatches.jsonl: a step that ran, in which iteration and mode."""

    ts: str  # ISO 8601 UTC
    run_id: str
    iteration: int
    step: str  # step1.iter{N}.extract ... step4.iter{N}.report, or verifier.quick
    task: str  # the Celery task that ran it
    task_id: str | None
    mode: Mode
    description: str
    outcome: str


class Outcome(Frozen):
    """What a completion run ends with: the last task's result, read by the CLI."""

    run_id: str
    iteration: int
    mode: Mode
    verdict: Verdict
    reason: str
    report: str  # path of VERIFY_REPORT.md
