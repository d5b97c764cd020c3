"""What crosses a task boundary in shadow verification besides claims and verdicts: the job,
dispatches, settled verdicts and a round's result.

Claims and verdicts are the claim verifier's own models, in
:mod:`verify_dag.phases.claims.models`.
"""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen
from verify_dag.phases.claims.models import Claim, ClaimVerdict

# What the merge can make of a verdict: the guards add the two UNVERIFIED-* verdicts.
MergedVerdict = Literal[
    "CONFIRMED",
    "REFUTED",
    "STALE",
    "UNVERIFIABLE",
    "UNVERIFIED-COMPOSITION",
    "UNVERIFIED-ECHO-CHAMBER",
]


class ShadowJob(Frozen):
    """What every claim task of one shadow run shares."""

    run_id: str
    repo: str  # the repository: a local path (the worker localizes it)
    commit: str  # the commit verified: "the repository at the ref"
    label: str  # how evidence names that commit ("HEAD 1a2b3c4d5e6f", "the work tree ...")
    goal: str  # the user's original goal, as the report states it
    surface: tuple[str, ...] = ()  # the inventory the original investigation touched
    budget: float  # seconds per claim verifier (claims.budget.DEFAULT_BUDGET)
    store: str | None = None  # with a broker: the report store holding the bundle
    bundle: str | None = None  # with a broker: the git bundle that holds ``commit``
    # --no-sandbox: a host that offers no sandbox re-runs tests anyway (else it refuses).
    no_sandbox: bool = False


class Dispatch(Frozen):
    """One claim sent to one verifier in one round."""

    claim: Claim
    round: int = 1
    # Echo-chamber re-dispatch: the verifier must read outside this artifact before concluding.
    outside: str | None = None
    # Budget re-dispatch: the search surface narrowed to the claim's own artifacts.
    narrow: bool = False


class Settled(Frozen):
    """A claim's verdict after the merge rules and the guards."""

    claim_id: str
    verdict: MergedVerdict
    tags: tuple[str, ...] = ()
    note: str = ""  # the merge rule applied ("validated", "do not act until resolved", ...)
    escalated: bool = False  # unresolved after the round cap: the operator decides


class Redispatch(Frozen):
    claim_id: str
    outside: str | None = None
    narrow: bool = False
    reason: str = ""


class RoundResult(Frozen):
    """What a round's chord body returns: every verdict so far, settled, and what goes next."""

    round: int
    verdicts: tuple[ClaimVerdict, ...]
    settled: tuple[Settled, ...]
    redispatch: tuple[Redispatch, ...] = ()
