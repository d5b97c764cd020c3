"""The four steps over a run directory (what each Celery task does), quick mode's single pass,
and the audit rows they leave in dispatches.jsonl.

Each step reads what the step before it wrote and writes its own artifact, as separate
agents would: tasks pass only the small :class:`CompletionJob` between them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from verify_dag.completion import artifacts as files
from verify_dag.completion import report
from verify_dag.completion.models import CompletionJob, CompletionResult, Dispatch
from verify_dag.completion.reach import reach
from verify_dag.phases.exerciser import criterion
from verify_dag.phases.exerciser.criterion import Execution, Extracted, VerifyResult

STEPS = ("extract", "execute", "classify", "report")
QUICK_STEP = "verifier.quick"
DESCRIPTIONS = {
    "extract": "verifier step 1 — extract and validate the completion criterion",
    "execute": "verifier step 2 — run the criterion with bash (timeout, capped output)",
    "classify": "verifier step 3 — deterministic verdict from the exit code",
    "report": "verifier step 4 — render VERIFY_REPORT.md from the template",
    "quick": "verifier quick mode — single-dispatch fallback",
}


def step_name(step: str, iteration: int) -> str:
    """``step1.iter{N}.extract`` ... ``step4.iter{N}.report``; quick mode is ``verifier.quick``."""
    if step == "quick":
        return QUICK_STEP
    return f"step{STEPS.index(step) + 1}.iter{iteration}.{step}"


def plan_iteration(directory: Path) -> tuple[int, bool]:
    """(the next iteration, whether step 1 must run in it). After the first iteration step 1
    runs again only when parsed_scope.json no longer has the hash the last extraction saw."""
    iteration = files.next_iteration(files.dispatches(directory))
    if iteration == 1:
        return iteration, True
    try:
        seen = Extracted.model_validate_json(
            (directory / files.EXTRACTED).read_bytes()
        ).source_sha256
    except (OSError, ValidationError):
        return iteration, True
    return iteration, seen is None or seen != files.sha256(directory / files.PARSED_SCOPE)


def extract(job: CompletionJob) -> str:
    directory = Path(job.run_dir)
    raw = files.read_bytes(directory / files.PARSED_SCOPE)
    digest = None if raw is None else hashlib.sha256(raw).hexdigest()
    extracted = criterion.extract(raw, source_sha256=digest, iteration=job.iteration)
    files.write_model(directory / files.EXTRACTED, extracted)
    if extracted.errors:
        return "errors: " + ", ".join(e.code for e in extracted.errors)
    return "ok"


def execute(job: CompletionJob) -> str:
    directory = Path(job.run_dir)
    extracted = files.read_model(directory / files.EXTRACTED, Extracted)
    # The run directory is the documented working directory: the criterion may cd elsewhere,
    # and what it names there is exposed to it (reach.py).
    seen = reach(extracted.completion or "")
    execution = criterion.execute(
        extracted,
        cwd=directory,
        timeout=job.timeout,
        cap=job.cap,
        policy=seen.policy,
        named=seen.named,
    )
    files.write_model(directory / files.EXECUTION, execution)
    if execution.skipped:
        return "skipped"
    if execution.timed_out:
        return "timed out"
    return f"exit {execution.exit_code}" + (" (truncated)" if execution.truncated else "")


def classify(job: CompletionJob) -> str:
    directory = Path(job.run_dir)
    result = criterion.classify(files.read_model(directory / files.EXECUTION, Execution))
    files.write_model(directory / files.VERIFY_RESULT, result)
    return result.verdict


def render(job: CompletionJob) -> CompletionResult:
    directory = Path(job.run_dir)
    extracted = files.read_model(directory / files.EXTRACTED, Extracted)
    execution = files.read_model(directory / files.EXECUTION, Execution)
    result = files.read_model(directory / files.VERIFY_RESULT, VerifyResult)
    usage = files.mode_usage(files.dispatches(directory), job.iteration, job.mode)
    ctx = report.Context(
        run_id=job.run_id,
        iteration=job.iteration,
        mode=job.mode,
        mode_chosen=job.mode_choice().note(),
        mode_usage=usage,
        finished=files.now(),
    )
    path = directory / files.REPORT
    existing = files.read_bytes(path)
    text = report.place(
        None if existing is None else existing.decode("utf-8", "replace"),
        report.section(ctx, extracted, execution, result),
        job.run_id,
        job.iteration,
    )
    files.write_text(path, text)
    return CompletionResult(
        run_id=job.run_id,
        iteration=job.iteration,
        mode=job.mode,
        verdict=result.verdict,
        reason=result.reason,
        report=str(path),
    )


def quick(job: CompletionJob) -> CompletionResult:
    """All four steps in one pass (``--mode=quick``): the same artifacts, one audit row."""
    extract(job)
    execute(job)
    classify(job)
    return render(job)


def record(job: CompletionJob, step: str, task: str, task_id: str | None, outcome: str) -> None:
    files.append_dispatch(
        Path(job.run_dir),
        Dispatch(
            ts=files.now(),
            run_id=job.run_id,
            iteration=job.iteration,
            step=step_name(step, job.iteration),
            task=task,
            task_id=task_id,
            mode=job.mode,
            mode_chosen_by=job.mode_chosen_by,
            # The specification's mode meta: mode=..., and how it was chosen (not asked, why).
            description=f"{DESCRIPTIONS[step]} (mode={job.mode}, {job.mode_choice().note()})",
            outcome=outcome,
        ),
    )
