"""The fix plan (Phase 9): the order the chosen fixes are applied in, the files each touches, and
the fixes that conflict, written beside the run's report before anything is applied."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verify_dag import store
from verify_dag.files import write_atomic
from verify_dag.models.fixes import FixOption
from verify_dag.models.report import ReportIssue
from verify_dag.report.markdown_text import cell, path_text

PLAN_FILE = "fix-plan.md"


@dataclass(frozen=True)
class Step:
    issue: ReportIssue
    option: FixOption


def ordered(steps: Sequence[Step]) -> list[Step]:
    """Deterministic fixes (the tools' own) first, then the model's; most severe first in each."""
    return sorted(steps, key=lambda s: (s.option.origin != "ruff", -s.issue.severity))


def render(run_id: str, steps: Sequence[Step], blocked: dict[str, str]) -> str:
    lines = [
        f"# Fix plan of run {run_id}",
        "",
        "Applied in this order to the work tree only: nothing is staged or committed, and the "
        f"files are kept first under refs/verify-dag/backups/{run_id} "
        f"(`verify-dag restore {run_id}` puts them back).",
        "",
        "| # | Issue | Severity | Fix | Files | Note |",
        "|---|---|---|---|---|---|",
    ]
    for n, s in enumerate(steps, start=1):
        files = ", ".join(path_text(p) for p in s.option.files)
        note = blocked.get(s.issue.id, "")
        fix = f"{s.option.label} ({s.option.origin}): {s.option.description}"
        lines.append(
            f"| {n} | {s.issue.id} | {s.issue.severity} | {cell(fix)} | {files} | {cell(note)} |"
        )
    return "\n".join(lines) + "\n"


def write(store_dir: str | None, run_id: str, text: str) -> Path:
    """The plan beside the run's report in the store."""
    run_dir = store.resolve(store_dir) / store.check_run_id(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / PLAN_FILE
    write_atomic(path, text.encode("utf-8"))
    return path
