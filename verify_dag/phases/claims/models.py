"""What a claim verifier reads and answers: a :class:`Claim` and its :class:`ClaimVerdict`.

A claim is the normalised form ``[CLAIM_ID] subject :: predicate :: evidence_ref`` plus the few
structured fields a deterministic verifier needs (the tool and rule of a static finding, a test's
node id, the symbol of an "unused" claim). It never holds the finding's description, severity or
confidence language: a verifier gets the claim and the search surface, never the original
reasoning (docs/shadow.md).
"""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen

Kind = Literal["static", "test", "unused", "untested", "size", "judgement"]
VerifierVerdict = Literal["CONFIRMED", "REFUTED", "STALE", "UNVERIFIABLE"]
EvidenceBase = Literal["independent-rederivation", "artifact-internal"]
Method = Literal["anchor", "static", "test", "search", "size", "model", "none"]
StopReason = Literal["completed", "budget-exhausted"]
Route = Literal["static", "test", "search", "judge"]  # also the claim task's name


class Claim(Frozen):
    id: str
    subject: str
    predicate: str
    evidence_ref: str  # a file path (with lines), a git ref, a config key or an endpoint
    kind: Kind
    path: str | None = None  # the cited file, when the evidence_ref names one
    line: int | None = None
    end_line: int | None = None
    ref: str | None = None  # the commit the claim was made against, when known
    tool: str | None = None  # static: the analyser and its rule
    rule: str | None = None
    nodeid: str | None = None  # test: the pytest node id
    symbol: str | None = None  # unused / untested: the name searched for
    limit: int | None = None  # size: the line count the file is said to exceed
    local: bool = False  # unused: a local variable or parameter (searched in its file only)

    def text(self) -> str:
        return (
            f"[{self.id}] {self.subject} :: {self.predicate} :: "
            f"{self.evidence_ref or '(no evidence_ref)'}"
        )

    def route(self) -> Route:
        """Which verifier re-derives it: a deterministic one when the fields it needs are
        there, else the model arm ("judge")."""
        if self.kind == "static" and self.path and self.line and self.tool and self.rule:
            return "static"
        if self.kind == "test" and self.nodeid:
            return "test"
        if (self.kind in ("unused", "untested") and self.symbol) or (
            self.kind == "size" and self.path and self.limit is not None
        ):
            return "search"
        return "judge"

    def artifacts(self) -> tuple[str, ...]:
        """The in-repo files the claim itself names: its own, narrowest search surface."""
        paths = [self.path, self.nodeid.split("::", 1)[0] if self.nodeid else None]
        return tuple(dict.fromkeys(p for p in paths if p))


class ClaimVerdict(Frozen):
    """One verifier's answer: ``{claim_id, verifier_verdict, evidence_pointer, evidence_base}``
    (docs/shadow.md), with what shadow's merge and guards need to judge it."""

    claim_id: str
    verdict: VerifierVerdict
    evidence_pointer: str
    evidence_base: EvidenceBase
    method: Method
    detail: str  # what was done and seen, in a sentence or two
    corrected: str | None = None  # REFUTED / STALE: the corrected or updated finding
    artifact: str | None = None  # the in-repo file that is the verdict's primary evidence
    # Why the composition and echo-chamber guards do not apply (the scope guard): an
    # external referent (a tool's rule, a test run) or a purely local fact. None: they apply.
    scope_guard: str | None = None
    boundary_checked: bool = False  # a composition-boundary read was made (artifact-internal)
    boundary: tuple[str, ...] = ()  # what it found outside the artifact: "path:line" references
    stop_reason: StopReason = "completed"
    round: int = 1
    seconds: float = 0.0
