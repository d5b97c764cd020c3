"""What the tester observed, per test, for the evidence bundle (``verify_dag.evidence``).

It travels from the test task to the report task inside the tester's outcome, so it holds only
repo-relative node ids and short, redacted reasons: never a path of the worker's checkout.
"""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen

# pytest's outcomes as its junit report records them; an xpass that is not strict is "passed".
CaseOutcome = Literal["passed", "failed", "error", "skipped", "xfailed"]


class CaseResult(Frozen):
    nodeid: str  # repo-relative pytest node id: tests/test_x.py::TestK::test_p[REQ-003]
    outcome: CaseOutcome
    reason: str | None = None  # skip / xfail reason as the test declared it
    # REQ ids the test declared with record_property("requirements", "REQ-001 REQ-002").
    requirements: tuple[str, ...] = ()


class CaseCounts(Frozen):
    """Counts over every test of the run, including any a truncated bundle left out."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    xfailed: int = 0


class Inventory(Frozen):
    """The environment the suite ran in; its canonical hash is the arbiter's inventory_hash."""

    tier: int  # 0-2, declared by the worker's operator (VERIFY_DAG_INVENTORY_TIER)
    tier_source: str
    python: str
    platform: str
    runner: str  # "pytest 9.0.3", "npm", ...
    environment: str  # what the suite's dependencies came from


class SuiteEvidence(Frozen):
    runner: str  # "pytest", or the executable of another test command
    runner_version: str | None  # None when the runner does not say (non-pytest commands)
    command: str
    returncode: int | None
    per_test: bool  # False: a runner that only gives an exit status
    tests: tuple[CaseResult, ...] = ()
    counts: CaseCounts = CaseCounts()
    truncated: bool = (
        False  # more tests ran than a bundle keeps (phases/tester/records.py, MAX_TESTS)
    )
    inventory: Inventory
