"""What the user asked for: parsed CLI flags, validated once, passed to every task."""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen
from verify_dag.models.carry import Ledger

ScopeMode = Literal["staged", "unstaged", "branch", "all", "files", "module"]
Depth = Literal["light", "deep"]
Mode = Literal["interactive", "report-only", "auto-fix"]
Format = Literal["markdown", "json"]


class VerifyRequest(Frozen):
    repo: str  # absolute path of the repository's top level
    scope: ScopeMode | None = None  # None: auto-detect
    base: str | None = None
    files: tuple[str, ...] = ()  # repo-relative, already checked to stay inside the repo
    module: str | None = None  # repo-relative directory or file
    depth: Depth = "light"
    mode: Mode = "interactive"
    format: Format = "markdown"
    output: str | None = None
    fail_on: int = 7
    since: str | None = None
    ledger: str | None = None
    no_carry_forward: bool = False
    skip_ux: bool = False
    skip_visual: bool = False
    plan_file: str | None = None
    epic_context: str | None = None
    auto_fix_threshold: int = 3
    # The contents of --ledger, --epic-context and --plan-file, read by the client: workers share
    # nothing with it but the broker.
    ledger_data: Ledger | None = None
    epic_text: str | None = None
    plan_text: str | None = None
    test_timeout: float = 1800.0
    tool_timeout: float = 600.0
    # The report store directory the report task writes to; None: the worker's default
    # (verify_dag.store.default_dir on the worker's host).
    store: str | None = None
    submitted: str | None = None  # ISO 8601 UTC, set by the client when it submits the run
