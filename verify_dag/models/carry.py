"""Carry-forward inputs and outputs: the run ledger, and what reviewers say about it."""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen

Disposition = Literal["open", "accepted", "deferred", "wontfix", "fixed"]


class LedgerFinding(Frozen):
    id: str  # F-3
    skill: str
    title: str
    severity: int
    disposition: Disposition
    location: str | None = None  # "path:line" as the earlier run reported it
    root_cause: str = ""
    reason: str = ""


class Ledger(Frozen):
    """Our run-ledger format (schemas/ledger.schema.json), read-only for verify."""

    findings: tuple[LedgerFinding, ...] = ()

    def known(self) -> tuple[LedgerFinding, ...]:
        """The KNOWN FINDINGS table: every ledger finding that is not fixed."""
        return tuple(f for f in self.findings if f.disposition != "fixed")


class Reaffirmed(Frozen):
    id: str
    skill: str
    reason: str
    new_harm_evidence: bool = False


class Reopened(Frozen):
    id: str
    skill: str
    reason: str
    evidence: str


class Deferred(Frozen):
    issue: str
    item: str
    source: str
