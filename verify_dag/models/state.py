"""The small payload that travels down the chain: request plus what each phase produced."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from verify_dag.models.base import Frozen
from verify_dag.models.findings import BuiltEnv, SkillOutcome
from verify_dag.models.request import VerifyRequest
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import EngineerContext, Toolchain
from verify_dag.models.triage import TriageResult

# The phases of the DAG that come before the report, in order (docs/verify.md, "Phase order").
Phase = Literal["scope", "engineer", "triage", "static", "review", "exerciser", "debugger"]


class ProbeResult(Frozen):
    """One derived probe's process as it ended: its exit code and the kept ends of its output."""

    returncode: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False


class EarlyProbes(Frozen):
    """The derived exercise's probes, run beside the suite (verify_dag/phases/exerciser/
    derived.py, ``early``) for the exerciser to judge: good only for the plan and tree of
    ``key`` (probes.memo_key). ``isolation`` and ``limits`` are what their commands ran under
    and hit, which the exerciser's outcome then names as its own."""

    key: str
    results: tuple[ProbeResult, ...]
    isolation: tuple[str, ...] = ()
    limits: tuple[str, ...] = ()


class RunState(Frozen):
    run_id: str
    request: VerifyRequest
    scope: Scope | None = None
    engineer: EngineerContext | None = None
    toolchain: Toolchain | None = None
    triage: TriageResult | None = None
    static: SkillOutcome | None = None
    outcomes: tuple[SkillOutcome, ...] = ()  # chord results, then exerciser and debugger
    probed: EarlyProbes | None = None  # the derived probes' results, when they ran early
    # A phase that could not proceed (status: error): which one, and why in its own words.
    failed_phase: Phase | None = None
    error_code: str | None = None
    error_message: str | None = None
    # Seconds each linear phase took where it ran (tasks/base.py): the run metrics' phase times.
    timings: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _failure_names_its_phase(self) -> RunState:
        # The report says where a run stopped from failed_phase alone: an error without one
        # would leave it guessing.
        if (self.failed_phase is None) != (self.error_code is None):
            raise ValueError("failed_phase and error_code are set together")
        return self

    @property
    def stopped(self) -> bool:
        """Later phases skip themselves when scope failed or found nothing."""
        nothing = self.scope is not None and self.scope.nothing_to_verify
        return self.error_code is not None or nothing

    def base_commit(self) -> tuple[str | None, str]:
        """The commit the change is compared with (the merge base for a branch, the commit
        before a snapshot), or None and why there is none."""
        if self.scope is None:
            return None, "no scope was resolved"
        base = self.scope.merge_base or self.scope.old_commit
        if base is None:
            return None, (
                f"a whole-file scope ({self.scope.mode}) has no base commit to compare with"
            )
        return base, ""

    def tested_env(self) -> BuiltEnv | None:
        """The env the verified commit's suite ran in (its builder and name), for building the
        merge base's alike."""
        return next((o.env for o in self.outcomes if o.skill == "tester" and o.env), None)
