"""One fleet run: audit every repository of a fleet file, remember the completed audits in the
index and write the run's summary into the store. docs/fleet.md is the user-facing description."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from verify_dag import client, git, store
from verify_dag.errors import VerifyDagError
from verify_dag.fleet import Entry, record, reusable
from verify_dag.fleet import summary as fleet_summary
from verify_dag.fleet.summary import RepoAudit
from verify_dag.models import Report, VerifyRequest
from verify_dag.models.request import AuditBudget
from verify_dag.phases import scope

HEAD_READERS = 8  # git ls-remote calls at once: most of their time is network


@dataclass(frozen=True)
class _Pending:
    entry: Entry
    head: str
    request: VerifyRequest
    plan: Any  # the submitted run (verify_dag.tasks.workflow.Plan)


def run(
    entries: list[Entry],
    *,
    fleet_file: str,
    store_dir: str | None,
    fail_on: int,
    timeout: float,
    max_review_tokens: int | None = None,
) -> dict[str, Any]:
    """Audit ``entries`` and return the summary, already written to its new directory of the
    store (``summary.json``, ``summary.md``). ``max_review_tokens`` is the whole audit's
    review-token budget, which every run it submits draws from."""
    where = store.resolve(store_dir).resolve()
    started = store.now()
    shared = None
    if max_review_tokens is not None:
        shared = AuditBudget(audit=uuid.uuid4().hex, tokens=max_review_tokens)
    outcomes = _audit(entries, where, fail_on, timeout, shared)
    summary = fleet_summary.build(
        outcomes,
        fleet_file=str(Path(fleet_file).resolve()),
        store_dir=where,
        summary_dir=fleet_summary.new_dir(where),
        started=started,
        fail_on=fail_on,
        max_review_tokens=max_review_tokens,
    )
    fleet_summary.write(summary)
    return summary


def _head(entry: Entry) -> str | VerifyDagError:
    try:
        return git.remote_head(entry.url)
    except VerifyDagError as exc:
        return exc


def _request(
    entry: Entry, store_dir: Path, fail_on: int, shared: AuditBudget | None
) -> VerifyRequest:
    request = VerifyRequest(
        source=entry.source,
        scope=entry.scope,
        base=entry.base,
        depth=entry.depth,
        mode="report-only",
        format="json",
        fail_on=fail_on,
        allow_incomplete=entry.allow_incomplete,
        store=str(store_dir),
        submitted=store.now(),
        audit_budget=shared,
    )
    # A URL is resolved by the workers (each keeps its own mirror); a path is checked here,
    # exactly as `verify` checks it.
    return request if entry.source.remote else scope.validate_request(request)


def _audit(
    entries: list[Entry],
    store_dir: Path,
    fail_on: int,
    timeout: float,
    shared: AuditBudget | None,
) -> list[RepoAudit]:
    """Every run is submitted before any is waited for, so the fleet's workers take them all."""
    with ThreadPoolExecutor(max_workers=HEAD_READERS) as pool:
        heads = list(pool.map(_head, entries))
    outcomes: dict[int, RepoAudit] = {}
    pending: list[_Pending] = []
    for entry, head in zip(entries, heads, strict=True):
        if isinstance(head, VerifyDagError):
            outcomes[entry.number] = RepoAudit(entry, "error", error=_shown(entry, head))
            continue
        last = _reusable(store_dir, entry, head)
        if last is not None:
            doc, meta = last
            outcomes[entry.number] = RepoAudit(
                entry,
                "reused",
                head=head,
                run_id=meta.run_id,
                report=doc,
                report_dir=store_dir / meta.run_id,
                audited_at=meta.finished,
            )
            continue
        try:
            request = _request(entry, store_dir, fail_on, shared)
            plan = client.submit(request)
        except VerifyDagError as exc:
            outcomes[entry.number] = RepoAudit(entry, "error", head=head, error=_shown(entry, exc))
            continue
        pending.append(_Pending(entry, head, request, plan))
    deadline = time.monotonic() + timeout
    audited: list[tuple[Entry, str, str, str]] = []
    for p in pending:
        outcome = _collect(p, store_dir, deadline)
        outcomes[p.entry.number] = outcome
        if outcome.report is not None and outcome.report.status == "ok":
            # Only completed audits are remembered: an error or a block is retried next time.
            audited.append(
                (p.entry, outcome.head or p.head, p.plan.run_id, outcome.audited_at or store.now())
            )
    record(store_dir, audited)
    return [outcomes[e.number] for e in entries]


def _collect(p: _Pending, store_dir: Path, deadline: float) -> RepoAudit:
    run_id = p.plan.run_id
    try:
        # Past the deadline each remaining run still gets one look at its result.
        raw = client.collect(p.plan, timeout=max(deadline - time.monotonic(), 0.1))
        result = client.report_result(raw)
    except VerifyDagError as exc:
        return RepoAudit(p.entry, "error", head=p.head, run_id=run_id, error=_shown(p.entry, exc))
    doc = result.report
    error = doc.error
    run_dir: Path | None = store_dir / run_id
    meta: store.RunMeta | None = None
    note = None
    try:
        _, _, meta = store.load(store_dir, run_id)
    except VerifyDagError:
        # The worker that wrote the report does not share this store (another host or
        # container): keep a copy here, where the index and the summary point.
        try:
            meta = store.meta_for(run_id, p.request, doc)
            store.save(store_dir, run_id, doc.model_dump(mode="json"), result.markdown, meta)
        except OSError as exc:
            run_dir, note = None, f"report not stored in {store_dir}: {exc}"
    message = f"{error.code}: {error.message}" if error else note
    return RepoAudit(
        p.entry,
        doc.overall.result,
        head=doc.scope.head_sha or p.head,
        error=_shown(p.entry, message) if message else None,
        run_id=run_id,
        report=doc,
        report_dir=run_dir,
        audited_at=meta.finished if meta is not None else None,
    )


def _reusable(store_dir: Path, entry: Entry, head: str) -> tuple[Report, store.RunMeta] | None:
    """The last completed audit of ``entry`` when it saw ``head``. Its stored report is read
    into the model: one that no longer reads as a Report (an earlier version's) is audited
    again rather than summarised from fields it may not have."""
    last = reusable(store_dir, entry, head)
    if last is None:
        return None
    doc, meta = last
    try:
        return Report.model_validate(doc), meta
    except ValidationError:
        return None


def _shown(entry: Entry, error: VerifyDagError | str) -> str:
    text = error if isinstance(error, str) else error.message
    return text.replace(entry.url, entry.shown)
