"""Pydantic models that cross a task boundary or reach a report."""

from __future__ import annotations

from verify_dag.models.carry import (
    Deferred,
    Ledger,
    LedgerFinding,
    Reaffirmed,
    Reopened,
)
from verify_dag.models.evidence import CaseCounts, CaseResult, Inventory, SuiteEvidence
from verify_dag.models.findings import (
    Diagnosis,
    Finding,
    GateResult,
    Location,
    SkillOutcome,
    Verification,
)
from verify_dag.models.report import Report
from verify_dag.models.request import Snapshot, VerifyRequest
from verify_dag.models.result import ReportResult
from verify_dag.models.scope import (
    ALL_OTHER_FILES,
    ExcludedFile,
    FileChange,
    LineRange,
    Scope,
    ScopeError,
)
from verify_dag.models.source import RepoSource, parse_source
from verify_dag.models.state import RunState
from verify_dag.models.toolchain import Command, EngineerContext, Toolchain
from verify_dag.models.triage import Gating, TriageResult

__all__ = [
    "ALL_OTHER_FILES",
    "CaseCounts",
    "CaseResult",
    "Command",
    "Deferred",
    "Diagnosis",
    "EngineerContext",
    "ExcludedFile",
    "FileChange",
    "Finding",
    "GateResult",
    "Gating",
    "Inventory",
    "Ledger",
    "LedgerFinding",
    "LineRange",
    "Location",
    "Reaffirmed",
    "Reopened",
    "RepoSource",
    "Report",
    "ReportResult",
    "RunState",
    "Scope",
    "ScopeError",
    "SkillOutcome",
    "Snapshot",
    "SuiteEvidence",
    "Toolchain",
    "TriageResult",
    "Verification",
    "VerifyRequest",
    "parse_source",
]
