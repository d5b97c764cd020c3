"""The completion verifier's four steps as functions, with no Celery and no run directory.

``extract`` turns the bytes of parsed_scope.json into an :class:`Extracted`; ``execute`` runs the
criterion (the only step that starts a process, through :func:`verify_dag.util.run`);
``classify`` applies the seed's deterministic verdict rule. The verify DAG's exerciser runs a
``--completion`` criterion through :func:`criterion`, the same functions without files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from verify_dag import util
from verify_dag.completion.models import (
    ErrorCode,
    Execution,
    Extracted,
    ExtractError,
    VerifyResult,
)
from verify_dag.sandbox import Policy

MAX_LENGTH = 500  # characters, after stripping
DEFAULT_TIMEOUT = 30.0  # seconds
OUTPUT_CAP = 100_000  # bytes kept per stream
FIELD = "completion"


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
) -> Execution:
    """Step 2: skip on any step-1 error, else ``bash -c`` the criterion with the limits.

    The output is redacted before it is kept: the artifacts and the report never echo a secret
    (the command's environment has none of ours, but the command can read files).
    """
    limits = {"timeout_s": timeout, "cap_bytes": cap}
    if extracted.errors or extracted.completion is None:
        reasons = tuple(e.message for e in extracted.errors) or ("no completion command",)
        return Execution(
            skipped=True, skip_reasons=reasons, skip_reason="; ".join(reasons), **limits
        )
    res = util.run(
        ["bash", "-c", extracted.completion],
        cwd=cwd,
        env=util.scrubbed_env() if env is None else env,
        timeout=timeout,
        cap=cap,
        sandbox=Policy(),
    )
    return Execution(
        skipped=False,
        command=extracted.completion,
        cwd=str(cwd),
        exit_code=None if res.timed_out else res.returncode,
        stdout=util.redact(res.stdout),
        stderr=util.redact(res.stderr),
        duration_ms=round(res.duration * 1000),
        timed_out=res.timed_out,
        truncated=res.truncated,
        **limits,
    )


def classify(execution: Execution) -> VerifyResult:
    """Step 3, the seed's rule: pass only on exit 0, not skipped, not timed out. Truncated
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
