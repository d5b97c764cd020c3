"""A completion criterion: one bash line, validated, run with limits, judged pass or fail.

``validate`` says why a criterion cannot run; ``extract`` reads one from the bytes of a
parsed_scope.json; ``execute`` runs it (through :func:`verify_dag.processes.run`);
``classify`` gives the verdict: pass only on exit 0, not skipped, not timed out. The exerciser
checks ``verify --completion`` with :func:`criterion`; the completion verifier
(verify_dag/completion/, docs/completion.md) runs the same steps over a run directory, one
artifact per step, and its artifacts are these models.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from verify_dag import processes
from verify_dag.models.base import Frozen
from verify_dag.models.findings import CriterionVerdict as Verdict
from verify_dag.sandbox import Policy

MAX_LENGTH = 500  # characters, after stripping
DEFAULT_TIMEOUT = 30.0  # seconds
OUTPUT_CAP = 100_000  # bytes kept per stream
FIELD = "completion"


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


Access = Literal["read-write", "read-only", "withheld"]


class NamedPath(Frozen):
    """A path the criterion names, and what the sandbox let it do there."""

    path: str  # as named, ``~`` and ``$HOME`` expanded
    access: Access
    note: str  # why: the work tree it is in, or why it stays hidden


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
    # What of this host the criterion saw beyond its working directory (verify-dag completion,
    # docs/completion.md "What the criterion sees"); empty when it named no path.
    named_paths: tuple[NamedPath, ...] = ()


class VerifyResult(Frozen):
    """verify_result.json: the deterministic verdict."""

    verdict: Verdict
    reason: str
    exit_code: int | None
    duration_ms: int
    truncated: bool
    timed_out: bool
    skipped: bool


def validate(value: object) -> list[ExtractError]:
    """Why ``value`` (the completion field) cannot run; empty when it can."""
    if not isinstance(value, str):
        kind = "null" if value is None else type(value).__name__
        kind = {
            "dict": "an object",
            "list": "an array",
            "bool": "a boolean",
            "int": "a number",
            "float": "a number",
        }.get(kind, kind)
        return [
            ExtractError(code="not_a_string", message=f"the {FIELD} field is {kind}, not a string")
        ]
    text = value.strip()
    if not text:
        return [ExtractError(code="empty", message=f"the {FIELD} field is empty")]
    errors = []
    if len(text) > MAX_LENGTH:
        errors.append(
            ExtractError(
                code="too_long",
                message=f"the {FIELD} command is {len(text)} characters long; at most {MAX_LENGTH}",
            )
        )
    if "\n" in text or "\r" in text:
        lines = len(text.splitlines())
        errors.append(
            ExtractError(
                code="multi_line", message=f"the {FIELD} command spans {lines} lines; one line only"
            )
        )
    if "\x00" in text:  # no process argument can carry it
        errors.append(
            ExtractError(code="nul_byte", message=f"the {FIELD} command contains a NUL character")
        )
    return errors


def extract(
    raw: bytes | None, *, source_sha256: str | None = None, iteration: int = 1
) -> Extracted:
    """Step 1: the criterion in parsed_scope.json's bytes (``None``: the file is missing)."""

    def failed(code: ErrorCode, message: str) -> Extracted:
        return Extracted(
            completion=None,
            errors=(ExtractError(code=code, message=message),),
            source_sha256=source_sha256,
            iteration=iteration,
        )

    if raw is None:
        return failed("missing_file", "parsed_scope.json not found in the run directory")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return failed("malformed_json", f"parsed_scope.json is not UTF-8 text ({exc.reason})")
    except json.JSONDecodeError as exc:
        return failed(
            "malformed_json",
            f"parsed_scope.json is not valid JSON: {exc.msg} at line {exc.lineno} "
            f"column {exc.colno}",
        )
    if not isinstance(doc, dict):
        return failed(
            "malformed_json", f"parsed_scope.json holds a JSON {_json_kind(doc)}, not an object"
        )
    if FIELD not in doc:
        return failed("missing_field", f"parsed_scope.json has no {FIELD!r} field")
    value = doc[FIELD]
    return Extracted(
        completion=value.strip() if isinstance(value, str) else None,
        errors=tuple(validate(value)),
        source_sha256=source_sha256,
        iteration=iteration,
    )


def _json_kind(doc: object) -> str:
    if isinstance(doc, list):
        return "array"
    if isinstance(doc, str):
        return "string"
    if isinstance(doc, bool):
        return "boolean"
    return "null" if doc is None else "number"


def execute(
    extracted: Extracted,
    *,
    cwd: str | Path,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    cap: int = OUTPUT_CAP,
    policy: Policy | None = None,
    named: Sequence[NamedPath] = (),
) -> Execution:
    """Step 2: skip on any step-1 error, else ``bash -c`` the criterion with the limits, in the
    sandbox under ``policy`` (by default: its working directory and nothing else of the
    host's hidden places); ``named`` records what that policy made of the paths it names.

    The output is redacted before it is kept: the artifacts and the report never echo a secret
    (the command's environment has none of ours, but the command can read files).
    """
    limits = {"timeout_s": timeout, "cap_bytes": cap}
    if extracted.errors or extracted.completion is None:
        reasons = tuple(e.message for e in extracted.errors) or ("no completion command",)
        return Execution(
            skipped=True, skip_reasons=reasons, skip_reason="; ".join(reasons), **limits
        )
    res = processes.run(
        ["bash", "-c", extracted.completion],
        cwd=cwd,
        env=processes.scrubbed_env() if env is None else env,
        timeout=timeout,
        cap=cap,
        sandbox=Policy() if policy is None else policy,
    )
    return Execution(
        skipped=False,
        command=extracted.completion,
        cwd=str(cwd),
        exit_code=None if res.timed_out else res.returncode,
        stdout=processes.redact(res.stdout),
        stderr=processes.redact(res.stderr),
        duration_ms=round(res.duration * 1000),
        timed_out=res.timed_out,
        truncated=res.truncated,
        named_paths=tuple(named),
        **limits,
    )


def classify(execution: Execution) -> VerifyResult:
    """Step 3: pass only on exit 0, not skipped, not timed out. Truncated
    output is metadata for the report, never a verdict input."""
    ex = execution
    passed = ex.exit_code == 0 and not ex.skipped and not ex.timed_out
    if ex.skipped:
        reason = f"skipped: {ex.skip_reason}"
    elif ex.timed_out:
        reason = f"timed out ({ex.timeout_s:g}s budget)"
    elif ex.exit_code != 0:
        reason = f"exited {ex.exit_code}"
    else:
        reason = "completion command exited 0"
    return VerifyResult(
        verdict="pass" if passed else "fail",
        reason=reason,
        exit_code=ex.exit_code,
        duration_ms=ex.duration_ms,
        truncated=ex.truncated,
        timed_out=ex.timed_out,
        skipped=ex.skipped,
    )


def criterion(
    command: str,
    *,
    cwd: str | Path,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    cap: int = OUTPUT_CAP,
) -> tuple[Extracted, Execution, VerifyResult]:
    """Steps 1-3 on a command given directly (``verify --completion``): same validation, same
    limits, same verdict rule, no run directory."""
    extracted = Extracted(completion=command.strip(), errors=tuple(validate(command)))
    execution = execute(extracted, cwd=cwd, env=env, timeout=timeout, cap=cap)
    return extracted, execution, classify(execution)


def problems(errors: Sequence[ExtractError]) -> str:
    """One line naming every error, for a usage message."""
    return "; ".join(f"{e.message} ({e.code})" for e in errors)
