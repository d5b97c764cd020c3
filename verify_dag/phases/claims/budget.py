"""A claim verifier's budget: wall-clock seconds, counted from the moment it starts.

Every command a verifier runs gets at most what is left, so a verifier cannot outlive its budget
by more than one command's clean-up. A verifier whose command was cut short by the budget (not
by its own time limit), or whose model backend timed out or was rate-limited, has no verdict:
it is UNVERIFIABLE [budget-exhausted] (a CONFIRMED reached on a capped run is never merged as one).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

DEFAULT_BUDGET = 300.0  # seconds per claim: a test re-run with its environment, or a model call


class BudgetExhausted(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass
class Budget:
    seconds: float
    start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.start)

    def spent(self) -> bool:
        return self.left() <= 0

    def used(self) -> float:
        return time.monotonic() - self.start

    def limit(self, cap: float = math.inf) -> float:
        """The time limit for the next command: its own cap, or what is left if that is less.
        Raises BudgetExhausted when nothing is left."""
        left = self.left()
        if left <= 0:
            raise BudgetExhausted(f"the {self.seconds:g} s budget was spent before the next step")
        return min(cap, left)

    def cut(self, timeout: float, cap: float, what: str) -> None:
        """Called when a command given ``timeout`` timed out: the budget's doing (raise), or the
        command's own cap ``cap`` (return, for the caller to report)."""
        if timeout < cap:
            raise BudgetExhausted(f"{what} was stopped when the {self.seconds:g} s budget ran out")
