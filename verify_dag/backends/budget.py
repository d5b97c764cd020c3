"""Review-token budgets: a run's (``--max-review-tokens``) and a fleet audit's (its fleet file's
``max-review-tokens``), counted across every worker that runs a reviewer of it.

Reviewers run side by side, on several hosts, so the count lives where they all reach: the
result backend (tasks/tally.py gives a ``Tally`` over it to each review task; this module never
imports the Celery side). Before a model call a reviewer *holds* what the call could cost at
most: its prompt's tokens, estimated at four characters each, plus the reply's allowance
(``max-output-tokens``). When the hold would take a budget past its limit, the call is not made
and the reviewer is NOT_RUN with a reason that begins "budget:". After the call the hold is
replaced by the tokens the backend reported; a backend that reports none (codex, a command
template) keeps its hold as what it cost. So a budget is passed only by as much as the prompts
in flight were underestimated, and a call is never cut off halfway.

A reply taken from the result cache costs nothing and needs no hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from verify_dag.models.base import Frozen
from verify_dag.models.findings import TokenUsage
from verify_dag.models.state import RunState

CHARS_PER_TOKEN = 4
REASON = "budget"


class Tally(Protocol):
    def add(self, key: str, tokens: int) -> int:
        """Add ``tokens`` (which may be negative) to the counter ``key``; its new value."""
        ...


class Uncountable(Exception):
    """The tally has nowhere to count (a result backend that keeps no counters)."""


class Limit(Frozen):
    key: str  # the counter's name where the tally keeps it
    tokens: int
    what: str  # "the run's", "the fleet audit's": how a NOT_RUN reason names it


class Hold(Frozen):
    limits: tuple[Limit, ...] = ()
    tokens: int = 0


_tally: ContextVar[Tally | None] = ContextVar("verify_dag_token_tally", default=None)


@contextmanager
def counting(tally: Tally) -> Iterator[None]:
    """Count this context's model calls with ``tally`` (a review task's whole body)."""
    token = _tally.set(tally)
    try:
        yield
    finally:
        _tally.reset(token)


def limits(state: RunState) -> tuple[Limit, ...]:
    req = state.request
    out = []
    if req.max_review_tokens is not None:
        out.append(
            Limit(key=f"{state.run_id}-review-tokens", tokens=req.max_review_tokens, what="run's")
        )
    if req.audit_budget is not None:
        out.append(
            Limit(
                key=f"fleet-{req.audit_budget.audit}-review-tokens",
                tokens=req.audit_budget.tokens,
                what="fleet audit's",
            )
        )
    return tuple(out)


def estimate(prompt: str, max_output_tokens: int) -> int:
    return len(prompt) // CHARS_PER_TOKEN + 1 + max_output_tokens


def hold(limits: Sequence[Limit], tokens: int) -> Hold | str:
    """Hold ``tokens`` against every limit, or the NOT_RUN reason when one would be passed."""
    if not limits:
        return Hold()
    tally = _tally.get()
    if tally is None:
        return f"{REASON}: no tally to count review tokens in on this worker"
    taken: list[Limit] = []
    try:
        for limit in limits:
            total = tally.add(limit.key, tokens)
            taken.append(limit)
            if total > limit.tokens:
                for t in taken:
                    tally.add(t.key, -tokens)
                return (
                    f"{REASON}: the {limit.what} review-token budget ({limit.tokens}) is spent: "
                    f"{total - tokens} used or held by calls in flight, and this call could "
                    f"use {tokens}"
                )
    except Uncountable as exc:
        return f"{REASON}: review tokens cannot be counted here: {exc}"
    return Hold(limits=tuple(limits), tokens=tokens)


def settle(held: Hold, usage: TokenUsage | None) -> None:
    """Replace the hold by what the call cost, where the backend said: nothing when no call
    was made (no usage at all), the hold itself when the backend reports no tokens."""
    tally = _tally.get()
    spent = usage.spent() if usage is not None else 0
    if tally is None or spent is None or not held.limits:
        return
    for limit in held.limits:
        tally.add(limit.key, spent - held.tokens)
