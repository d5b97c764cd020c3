"""What the rubric and its arms (coverage, security) record against a bundle: one list of
concerns, each with a severity; the verdict is computed from them (docs/arbiter.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["blocker", "high", "medium", "warning"]


@dataclass
class Concerns:
    items: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self,
        severity: Severity,
        detail: str,
        requirement_id: str | None = None,
        source: str = "rubric",
    ) -> None:
        item: dict[str, Any] = {"severity": severity, "detail": detail, "source": source}
        if requirement_id is not None:
            item["requirement_id"] = requirement_id
        self.items.append(item)
