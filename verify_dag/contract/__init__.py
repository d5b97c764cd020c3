"""The contract verifier (seed 002): CONTRACT files, ``gates run``, floor guard, verdicts.

See docs/contract.md. Entry points: :func:`verify_contract` (the verdict, never raises for bad
input), :func:`gates_run.run` (the only writer of a contract), :func:`floor.guard`.
"""

from __future__ import annotations

from verify_dag.contract.models import ContractVerdict, FloorReport, FloorRow
from verify_dag.contract.verify import verify_contract

__all__ = ["ContractVerdict", "FloorReport", "FloorRow", "verify_contract"]
