"""Phase 3 Job B: per-skill file assignments and gating decisions (TRIAGE_RESULT)."""

from __future__ import annotations

from pydantic import Field

from verify_dag.models.base import Frozen


class Gating(Frozen):
    applies: bool
    reason: str  # factual, content-based: "CLI help text modified in src/cli.py"
    files: tuple[str, ...] = ()  # the files that made it apply


class TriageResult(Frozen):
    # skill -> scoped files it should focus on. At light (Job B does not run) every skill of the
    # composition gets the full scoped file list and gating is empty.
    skill_assignments: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    gating: dict[str, Gating] = Field(default_factory=dict)
    job_b: bool = False  # whether Job B ran (deep) or the light defaults were filled in
