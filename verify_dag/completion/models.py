"""The completion verifier's job and run records, as frozen models (docs/completion.md).

The artifacts of steps 1 to 3 (``extracted_completion.json``, ``execution_result.json``,
``verify_result.json``) are the criterion's own models, in
:mod:`verify_dag.phases.exerciser.criterion`; a ``Dispatch`` is one row of ``dispatches.jsonl``.
Field names are the ones docs/completion.md documents.
"""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen
from verify_dag.models.findings import CriterionVerdict as Verdict

Mode = Literal["full", "quick"]
# How a run's mode was chosen by the mode gate (verify_dag/completion/gate.py): given with
# --mode or asked at the terminal; "unattended" (nobody to ask, so full) is what earlier
# versions wrote, kept so that their rows and reports still read.
ChosenBy = Literal["given", "asked", "unattended"]


class ModeChoice(Frozen):
    """The mode gate's outcome; the report and every audit row say how the mode was chosen."""

    mode: Mode
    chosen_by: ChosenBy = "given"
    unattended: str | None = None  # why nobody could be asked, e.g. "nobody attached (CI is set)"

    def note(self) -> str:
        if self.chosen_by == "asked":
            return "asked before the run"
        if self.chosen_by == "unattended":
            return f"not asked: {self.unattended or 'nobody attached'}"
        return "given with --mode"


class CompletionJob(Frozen):
    """What every task of one completion run receives: names and limits, never file contents."""

    run_id: str
    run_dir: str  # absolute; every worker of the run must see it at this path
    iteration: int
    mode: Mode = "full"
    mode_chosen_by: ChosenBy = "given"
    unattended: str | None = None  # with mode_chosen_by "unattended": why nobody was asked
    timeout: float = 30.0  # seconds for the criterion (the default criterion budget)
    cap: int = 100_000  # bytes kept per stream
    # --no-sandbox: a host that offers no sandbox runs the criterion anyway (else it refuses).
    no_sandbox: bool = False

    def mode_choice(self) -> ModeChoice:
        return ModeChoice(mode=self.mode, chosen_by=self.mode_chosen_by, unattended=self.unattended)


class Dispatch(Frozen):
    """One row of dispatches.jsonl: a step that ran, in which iteration and mode."""

    ts: str  # ISO 8601 UTC
    run_id: str
    iteration: int
    step: str  # step1.iter{N}.extract ... step4.iter{N}.report, or verifier.quick
    task: str  # the Celery task that ran it
    task_id: str | None
    mode: Mode
    mode_chosen_by: ChosenBy
    description: str  # says the mode and how it was chosen: "... (mode=full, not asked: ...)"
    outcome: str


class CompletionResult(Frozen):
    """What a completion run ends with: the last task's result, read by the CLI."""

    run_id: str
    iteration: int
    mode: Mode
    verdict: Verdict
    reason: str
    report: str  # path of VERIFY_REPORT.md
