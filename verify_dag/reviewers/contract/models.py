"""The contract verdict and the floor report: what crosses a task boundary or reaches output.

The JSON form (``ContractVerdict.to_json``) is validated against
schemas/contract-verdict.schema.json; field names are camelCase like the v1 report's.
"""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen

Status = Literal["MET", "NOT-MET", "UNVERIFIABLE", "ABANDONED"]
Source = Literal["oracle", "model", "none", "abandon"]
VerdictName = Literal["CONFORME", "ECARTS", "ABANDONED", "ERROR"]


class FloorRow(Frozen):
    kind: str
    file: str
    line: int
    snippet: str
    waived: bool = False
    authorisedBy: str | None = None  # the CLARIFICATIONS sentence that waives it

    def text(self) -> str:
        if self.waived:
            return (
                f"WAIVED {self.kind} {self.file}:{self.line} {self.snippet} \u2014 "
                f'"{self.authorisedBy}"'
            )
        return f"FLOOR {self.kind} {self.file}:{self.line} {self.snippet}"


class FloorReport(Frozen):
    rows: tuple[FloorRow, ...] = ()

    @property
    def findings(self) -> int:
        return len(self.rows)

    @property
    def waived(self) -> int:
        return sum(1 for r in self.rows if r.waived)

    @property
    def gaps(self) -> int:
        return self.findings - self.waived

    def summary(self) -> str:
        """``clean`` or ``<n> finding(s), <m> waived`` (n counts the waived ones too)."""
        return "clean" if not self.rows else f"{self.findings} finding(s), {self.waived} waived"

    def lines(self) -> list[str]:
        """The FLOOR rows, then the WAIVED rows."""
        return [r.text() for r in self.rows if not r.waived] + [
            r.text() for r in self.rows if r.waived
        ]


class OracleReport(Frozen):
    check: str
    expect: str
    evidence: str | None  # the EVIDENCE value as gates run wrote it; None: no EVIDENCE line
    checkLine: int
    evidenceLine: int | None = None
    vacuous: str | None = None  # why the oracle proves nothing, when it does not


class CriterionResult(Frozen):
    number: int
    text: str
    status: Status
    source: Source
    evidence: str  # what the CRITERIA line prints after the status
    expected: str | None = None
    actual: str | None = None
    location: str | None = None
    oracle: OracleReport | None = None


class ScopeResult(Frozen):
    declared: bool
    globs: tuple[str, ...] = ()
    inScope: tuple[str, ...] = ()
    outOfScope: tuple[str, ...] = ()


class Ran(Frozen):
    command: str
    result: str


class Proof(Frozen):
    filesRead: int
    ran: tuple[Ran, ...] = ()
    checked: int
    total: int


class TestRun(Frozen):
    command: str
    exitCode: int | None
    passed: bool
    timedOut: bool = False
    output: str = ""


class DiffInfo(Frozen):
    range: str
    base: str | None = None
    head: str | None = None
    workTree: bool = False


class Gaps(Frozen):
    notMet: int = 0
    unverifiable: int = 0
    outOfScope: int = 0
    floor: int = 0
    test: int = 0

    @property
    def total(self) -> int:
        return self.notMet + self.unverifiable + self.outOfScope + self.floor + self.test


class ContractVerdict(Frozen):
    verdict: VerdictName
    count: int | None = None  # n of ECARTS(n) / ABANDONED(n)
    error: str | None = None
    contract: str
    diff: DiffInfo | None = None
    request: str | None = None
    criteria: tuple[CriterionResult, ...] = ()
    abandoned: tuple[int, ...] = ()
    scope: ScopeResult | None = None
    floor: FloorReport | None = None
    test: TestRun | None = None
    gaps: Gaps | None = None
    proof: Proof | None = None

    @property
    def line(self) -> str:
        label = {
            "ECARTS": f"ECARTS({self.count})",
            "ABANDONED": f"ABANDONED({self.count})",
            "ERROR": f"ERROR({self.error})",
        }.get(self.verdict, self.verdict)
        return f"VERIFY \u2014 VERDICT: {label}"
