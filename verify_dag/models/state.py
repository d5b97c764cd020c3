"""The small payload that travels down the chain: request plus what each phase produced."""

from __future__ import annotations

from verify_dag.models.base import Frozen
from verify_dag.models.findings import SkillOutcome
from verify_dag.models.request import VerifyRequest
from verify_dag.models.scope import Scope
from verify_dag.models.toolchain import EngineerContext, Toolchain
from verify_dag.models.triage import TriageResult


class RunState(Frozen):
    run_id: str
    request: VerifyRequest
    scope: Scope | None = None
    engineer: EngineerContext | None = None
    toolchain: Toolchain | None = None
    triage: TriageResult | None = None
    static: SkillOutcome | None = None
    outcomes: tuple[SkillOutcome, ...] = ()  # chord results, then exerciser and debugger
    error_code: str | None = None  # a phase that could not proceed (status: error)
    error_message: str | None = None

    @property
    def stopped(self) -> bool:
        """Later phases skip themselves when scope failed or found nothing."""
        nothing = self.scope is not None and self.scope.nothing_to_verify
        return self.error_code is not None or nothing
