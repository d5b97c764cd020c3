"""What the user asked for: parsed CLI flags, validated once, passed to every task."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from verify_dag.models.base import Frozen
from verify_dag.models.carry import Ledger
from verify_dag.models.source import RepoSource, parse_source

ScopeMode = Literal["staged", "unstaged", "branch", "all", "files", "module"]
Depth = Literal["light", "deep"]
Mode = Literal["interactive", "report-only", "auto-fix"]


class Snapshot(Frozen):
    """The states of a local repository a client pinned as commits before shipping the run to a
    fleet: the workers never see the user's work tree, only these."""

    head: str
    index: str  # the staged state; ``head`` when nothing is staged
    worktree: str  # the work tree with untracked files, parent ``index``; ``index`` when equal
    untracked: tuple[str, ...] = ()  # untracked paths, in the work tree snapshot but not the diff


class AuditBudget(Frozen):
    """A fleet audit's review-token budget, shared by every run it submits."""

    audit: str  # the audit's id: its runs count their tokens under it
    tokens: int


class VerifyRequest(Frozen):
    # The repository as the run names it, decided once where the run was built; never rewritten.
    source: RepoSource
    # This host's copy of the repository, where git reads it: ``source.location`` until a
    # worker's task points it at its own mirror or unbundled copy (verify_dag.repos.localize).
    repo: str = ""
    scope: ScopeMode | None = None  # None: auto-detect
    base: str | None = None
    head: str | None = None  # --head: the range's new end, verified without a checkout
    files: tuple[str, ...] = ()  # repo-relative, already checked to stay inside the repo
    module: str | None = None  # repo-relative directory or file
    depth: Depth = "light"
    mode: Mode = "interactive"
    # Why an interactive run runs as report-only, set by the client: nobody is attached to answer
    # (stdin or stdout not a terminal, or CI set). None: the mode runs as asked.
    unattended: str | None = None
    # One of report.formats.FORMATS, checked by the CLI (models sit below report/, which renders).
    format: str = "markdown"
    output: str | None = None
    fail_on: int = 7
    # --new-only: only issues the change introduced fail the run (docs/report.md, "Exit codes").
    new_only: bool = False
    # --allow-incomplete: checks that did not run (NOT_RUN, BLOCKED) do not turn exit 0 into 4.
    allow_incomplete: bool = False
    # --fail-under=PCT: changed-line coverage below PCT fails the run; the suite measures it.
    fail_under: float | None = None
    since: str | None = None
    ledger: str | None = None
    no_carry_forward: bool = False
    skip_ux: bool = False
    skip_visual: bool = False
    # --require-sandbox: repository code runs under bubblewrap or the run is an error.
    require_sandbox: bool = False
    # --no-sandbox: a host that offers no sandbox runs repository code anyway (else it refuses).
    no_sandbox: bool = False
    # --no-cache: nothing is taken from the result cache or stored in it (resultcache.py).
    no_cache: bool = False
    plan_file: str | None = None
    epic_context: str | None = None
    auto_fix_threshold: int = 3
    # The contents of --ledger, --epic-context and --plan-file, read by the client: workers share
    # nothing with it but the broker.
    ledger_data: Ledger | None = None
    epic_text: str | None = None
    plan_text: str | None = None
    test_timeout: float = 1800.0
    per_test_timeout: float = 300.0  # pytest-timeout's limit on each test of the suite
    # $VERIFY_DAG_COMMENT_DENSITY as the client saw it: a run's own setting travels with the run,
    # so a worker on another host applies it too (it wins over the worker's environment).
    comment_density: str | None = None
    # verify --completion: one bash line the exerciser runs as a completion criterion
    # (docs/completion.md), validated by the client before it is sent.
    completion: str | None = None
    # verify --contract: the CONTRACT (docs/contract.md) as the client read it, and its path for
    # display.
    contract: str | None = None
    contract_text: str | None = None
    tool_timeout: float = 600.0
    # The report store directory the report task writes to; None: the worker's default
    # (verify_dag.store.default_dir on the worker's host).
    store: str | None = None
    submitted: str | None = None  # ISO 8601 UTC, set by the client when it submits the run
    # A local repository shipped to a fleet: the pinned states, and the git bundle (stored with
    # the run in the report store) that holds them with the repository's refs.
    snapshot: Snapshot | None = None
    bundle: str | None = None
    # --max-review-tokens: the judgement reviewers' model calls stop at this many tokens
    # (verify_dag/backends/budget.py); and the fleet audit's budget this run shares, if any.
    max_review_tokens: int | None = None
    audit_budget: AuditBudget | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_source(cls, data: Any) -> Any:
        # A request given only ``repo`` (a run stored before ``source`` existed, or an in-process
        # caller naming a path or URL) is parsed here, once, by the same rule as the CLI's.
        if not isinstance(data, dict):
            return data
        if data.get("source") is None and data.get("repo"):
            data = {**data, "source": parse_source(str(data["repo"]))}
        if not data.get("repo") and data.get("source") is not None:
            source = data["source"]
            location = source.location if isinstance(source, RepoSource) else source["location"]
            data = {**data, "repo": location}
        return data
