"""The report store: one directory per run, keyed by run id.

``<store>/<run_id>/`` holds ``report.json`` (the v1 report exactly as ``--format=json`` writes it),
``report.md`` and ``meta.json``, with ``evidence.json`` (the evidence bundle) and, at deep,
``coverage.xml`` (qa's coverage data). The report task writes it on the worker, so a run
submitted with ``--no-wait`` lands here too; on a fleet the store must be a directory every
git-queue worker and every reader share (or each worker's own default, read on that host).

Every file is written to a temporary file and moved into place with ``os.replace``, and
``meta.json`` is written last: a run whose ``meta.json`` exists is complete, so readers never see
half a run.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from verify_dag.errors import FatalError, UsageError
from verify_dag.files import write_atomic
from verify_dag.models.base import Frozen
from verify_dag.models.report import Report
from verify_dag.models.request import VerifyRequest

STORE_ENV = "VERIFY_DAG_STORE"
REPORT_JSON = "report.json"
REPORT_MD = "report.md"
META_JSON = "meta.json"
EVIDENCE_JSON = "evidence.json"
COVERAGE_XML = "coverage.xml"

# Run ids are Celery task ids (uuid4). Anything that could name another path is refused before
# it is joined to the store directory.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


class RunMeta(Frozen):
    """What ``verify-dag runs`` lists and ``status`` reports, without reading the report."""

    run_id: str
    repo: str
    mode: str | None  # the resolved scope mode; None when scope never resolved one
    depth: str
    base: str | None
    head_sha: str | None
    submitted: str | None  # ISO 8601 UTC; None when the client did not say
    finished: str  # ISO 8601 UTC, when the report task wrote the report
    status: str  # ok | error | blocked
    result: str  # pass | issues-found | error | blocked
    fail_on: int
    exit_code: int


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def default_dir() -> Path:
    """``$VERIFY_DAG_STORE``, else ``$XDG_DATA_HOME/verify-dag/runs`` (``~/.local/share``)."""
    explicit = os.environ.get(STORE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "verify-dag" / "runs"


def resolve(store_dir: str | os.PathLike[str] | None) -> Path:
    return Path(store_dir).expanduser() if store_dir else default_dir()


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.fullmatch(run_id):
        raise UsageError(f"not a run id: {run_id!r}")
    return run_id


def save(
    store_dir: str | os.PathLike[str] | None,
    run_id: str,
    document: dict[str, Any],
    markdown: str,
    meta: RunMeta,
) -> Path:
    """Write one run's three files; returns the run's directory. ``document`` is the report's
    JSON v1 document (``Report.model_dump(mode="json")``), as :func:`load` gives it back."""
    from verify_dag.report import json_text

    run_dir = resolve(store_dir) / check_run_id(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / REPORT_JSON, json_text(document).encode("utf-8"))
    write_atomic(run_dir / REPORT_MD, markdown.encode("utf-8"))
    write_atomic(run_dir / META_JSON, (meta.model_dump_json(indent=2) + "\n").encode("utf-8"))
    return run_dir


def load(
    store_dir: str | os.PathLike[str] | None, run_id: str
) -> tuple[dict[str, Any], str, RunMeta]:
    """The stored report, Markdown and meta of one run; UsageError when there is no such run.

    The report is the JSON v1 document as stored, not a Report: ``verify-dag report`` prints it
    as it was written, whichever version wrote it. A caller that reads its fields validates it
    into the model (``Report.model_validate``).
    """
    store = resolve(store_dir)
    run_dir = store / check_run_id(run_id)
    if not (run_dir / META_JSON).is_file():
        raise UsageError(f"no run {run_id} in {store}")
    try:
        meta = RunMeta.model_validate_json((run_dir / META_JSON).read_bytes())
        report: dict[str, Any] = json.loads((run_dir / REPORT_JSON).read_bytes())
        markdown = (run_dir / REPORT_MD).read_bytes().decode("utf-8")
    except (OSError, ValueError) as exc:  # ValidationError and JSONDecodeError are ValueErrors
        raise FatalError(f"run {run_id} in {store} is unreadable: {exc}") from None
    return report, markdown, meta


def runs(store_dir: str | os.PathLike[str] | None) -> list[RunMeta]:
    """Every complete run in the store, newest first. A missing store holds no runs."""
    store = resolve(store_dir)
    found: list[RunMeta] = []
    try:
        entries = list(store.iterdir())
    except FileNotFoundError:
        return []
    for entry in entries:
        try:
            found.append(RunMeta.model_validate_json((entry / META_JSON).read_bytes()))
        except (OSError, ValidationError):
            # Not a run directory, or one whose meta.json is not there yet (it is written last).
            continue
    found.sort(key=lambda m: (m.finished, m.run_id), reverse=True)
    return found


CANCELLED_JSON = "cancelled.json"


def mark_cancelled(
    store_dir: str | os.PathLike[str] | None, run_id: str, reason: str = "verify-dag cancel"
) -> Path:
    """Record in the store that ``run_id`` was cancelled, and why: ``verify-dag cancel``, or an
    in-process run stopped at its ``--timeout``."""
    run_dir = resolve(store_dir) / check_run_id(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / CANCELLED_JSON
    record = {"runId": run_id, "cancelled": now(), "reason": reason}
    write_atomic(path, (json.dumps(record) + "\n").encode())
    return path


def cancel_reason(store_dir: str | os.PathLike[str] | None, run_id: str) -> str | None:
    """Why the run was cancelled, when the store says it was (a record without a reason is
    ``verify-dag cancel``'s)."""
    path = resolve(store_dir) / check_run_id(run_id) / CANCELLED_JSON
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "verify-dag cancel"
    reason = record.get("reason") if isinstance(record, dict) else None
    return str(reason) if reason else "verify-dag cancel"


def meta_for(run_id: str, request: VerifyRequest, report: Report) -> RunMeta:
    """The meta of a finished run, from its request and its report."""
    from verify_dag.report import exit_code

    scope = report.scope
    return RunMeta(
        run_id=run_id,
        repo=request.source.shown,
        mode=scope.mode or request.scope,
        depth=request.depth,
        base=scope.base_ref,
        head_sha=scope.head_sha,
        submitted=request.submitted,
        finished=now(),
        status=report.status,
        result=report.overall.result,
        fail_on=request.fail_on,
        exit_code=exit_code(report, request.fail_on),
    )


def record(run_id: str, request: VerifyRequest, report: Report, markdown: str) -> dict[str, str]:
    """Persist a finished run from the report task.

    The report is the product: a store that cannot be written must not lose the report the
    waiting client is about to print, so the failure is returned (the CLI shows it) instead of
    raised: ``{"stored": the run's directory}`` or ``{"storeError": why}``, as every write of a
    run's files here returns; the report task gathers them into its ReportResult.
    """
    try:
        meta = meta_for(run_id, request, report)
        where = save(request.store, run_id, report.model_dump(mode="json"), markdown, meta)
    except OSError as exc:
        return {"storeError": f"report not stored in {resolve(request.store)}: {exc}"}
    return {"stored": str(where)}


def record_coverage(run_id: str, request: VerifyRequest, xml: str | None) -> dict[str, str]:
    """Keep qa's coverage data (Cobertura XML of the scoped files) as ``coverage.xml``, so that
    ``diff-cover coverage.xml --compare-branch=<mergeBase>`` in the repository re-checks the
    changed-line figure. A failure is returned, like :func:`record`'s."""
    if xml is None:
        return {}
    return _keep(run_id, request, COVERAGE_XML, xml, "coverage", "coverage data")


def record_evidence(
    run_id: str, request: VerifyRequest, bundle: dict[str, Any] | None
) -> dict[str, str]:
    """Persist a run's evidence bundle (``verify_dag.evidence``) as ``evidence.json``: indented
    JSON, whose hash the arbiter recomputes from the parsed document's canonical form. Called
    before :func:`record`, so the bundle is in place when ``meta.json`` marks the run complete.
    A failure is returned, like :func:`record`'s."""
    if bundle is None:
        return {}
    text = json.dumps(bundle, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return _keep(run_id, request, EVIDENCE_JSON, text, "evidence", "evidence bundle")


def _keep(
    run_id: str, request: VerifyRequest, name: str, text: str, key: str, what: str
) -> dict[str, str]:
    """One more file of a run, written before meta.json; ``{key: path}``, or the failure."""
    try:
        run_dir = resolve(request.store) / check_run_id(run_id)
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / name, text.encode("utf-8"))
    except OSError as exc:
        return {"storeError": f"{what} not stored in {resolve(request.store)}: {exc}"}
    return {key: str(run_dir / name)}
