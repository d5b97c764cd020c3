"""The one client path of every command: submit a plan, wait for its result showing progress
phase by phase, release what sending it opened."""

# Long module: sending, waiting through outages and lost runs, and checking what comes back are
# one path; every read of the result store goes through its _meta, which the fault tests replace.

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from celery import states, uuid
from celery.exceptions import BackendError

from verify_dag.errors import FatalError, UsageError, VerifyDagError
from verify_dag.models import ReportResult, VerifyRequest
from verify_dag.models.fixes import FixJob, Proposals
from verify_dag.models.report import ReportIssue
from verify_dag.progress import Progress as Progress  # the commands build it; wait feeds it
from verify_dag.tasks import stash
from verify_dag.tasks.app import CANCELLED, app, sentinel_id
from verify_dag.tasks.workflow import Expected, Plan, fix_plan, plan

OUTAGE_ENV = "VERIFY_DAG_OUTAGE_LIMIT"
# Seconds the result store (Redis) may stay unreachable while a client waits for a run; then the
# client gives up with exit 3. Documented in ops/README.md, "Faults and recovery".
DEFAULT_OUTAGE_LIMIT = 60.0
# How often an unreachable result store is asked again.
OUTAGE_RETRY = 0.5
# Seconds between two looks at a waiting run's sentinel: a run the result store lost is said so
# within about this long (ops/README.md, "Faults and recovery").
LOST_CHECK = 2.0
# A custom state: never a ready one, which Celery's backends cache in the process and would go
# on answering from memory after the store lost it.
SUBMITTED = "SUBMITTED"
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def embedded() -> bool:
    """Whether runs go to this process's own worker: no broker is configured (memory://)."""
    return str(app.conf.broker_url).startswith("memory://")


def run_plan(
    work: VerifyRequest | Plan,
    *,
    timeout: float,
    progress: Progress | None = None,
    name_failed_phase: bool = False,
) -> dict[str, Any]:
    """Run ``work`` and return its result: a verify request is submitted (``submit``), a built
    plan (completion, shadow) is sent as it is, then ``collect`` waits for it. With
    ``name_failed_phase`` a FatalError names the first phase that failed instead: a chain marks
    every task after a failed one failed too."""
    p = submit(work) if isinstance(work, VerifyRequest) else _send(work)
    try:
        return collect(p, timeout=timeout, progress=progress)
    except FatalError as exc:
        if not name_failed_phase:
            raise
        raise FatalError(_first_failure(p) or exc.message, hint=exc.hint) from exc


def submit(request: VerifyRequest, run_id: str | None = None) -> Plan:
    """Send a verify run with the records that let a client follow and trust it.

    With a broker, a local repository is first pinned and bundled into the store
    (``repos.prepare``): workers may be on other hosts. The run is recorded as PENDING on the
    result backend before its canvas is sent (after, it could overwrite a worker's STARTED): an
    id the backend never saw also reads PENDING, and ``status`` could not tell a queued run from
    a mistyped id. Either way its sentinel (``announce``) is left beside it, so that a result
    store that loses the run can be told from one still running it.

    ``run_id``: the in-process run's id when the caller began its checkout already
    (``workspace.prefetch``); else the checkout of a branch scope is begun here.
    """
    from verify_dag import git, repos, workspace

    if embedded():
        if run_id is None:
            run_id = uuid()
            if not request.source.remote:
                workspace.check_out_ahead(
                    run_id, request.repo, scope=request.scope,
                    narrowed=bool(request.files) or request.module is not None,
                    head=request.head, base=request.base,
                )  # fmt: skip
        built = plan(request, run_id)
        if built.expect is not None and not request.source.remote:
            # The in-process worker reads the repository where it is, just after this; a range's
            # end (--head) is the commit the request names.
            head = request.head or git.head(request.repo)
            built = dataclasses.replace(built, expect=dataclasses.replace(built.expect, head=head))
        return _send(announce(built))
    run_id = uuid()
    built = plan(repos.prepare(request, run_id), run_id)
    with _unreachable_broker_is_fatal():
        app.backend.store_result(built.run_id, None, states.PENDING)
        built = announce(built)
    return _send(built)


def fix_options(job: FixJob, issues: Sequence[ReportIssue], *, timeout: float) -> list[Proposals]:
    """Phase 9: the workers' fix options for ``issues``, one propose task each (docs/fixes.md)."""
    if not issues:
        return []
    result = run_plan(fix_plan(job, issues), timeout=timeout, name_failed_phase=True)
    return [Proposals.model_validate(r) for r in result]


def _send(p: Plan) -> Plan:
    if embedded():
        from verify_dag.tasks import embedded as worker

        worker.ensure_worker()  # once per process
    with _unreachable_broker_is_fatal():
        for key, value in p.records:
            stash.put(key, value)
        p.canvas.apply_async()
    return p


def collect(p: Plan, *, timeout: float, progress: Progress | None = None) -> dict[str, Any]:
    """Wait for a sent plan's result (``wait``), then release its result subscriptions."""
    local = embedded()
    try:
        return wait(p, timeout=timeout, progress=progress, interval=0.005 if local else 0.05)
    finally:
        if not local:
            release(p)


@contextmanager
def _unreachable_broker_is_fatal() -> Iterator[None]:
    # A broker that does not answer is a run that could not start (exit 3), not an internal error.
    from kombu.exceptions import OperationalError

    from verify_dag import git

    unreachable: tuple[type[BaseException], ...] = (OperationalError, *outage_errors())
    try:
        yield
    except unreachable as exc:
        url = git.display_source(str(app.conf.broker_url))
        reason = one_line(exc).rstrip(".")
        raise FatalError(
            f"cannot reach the broker or result store at {url}: {reason} (is it running?)"
        ) from None


def _first_failure(p: Plan) -> str | None:
    """``<phase> failed: <its result>`` for the first phase of ``p`` that failed, if one did."""
    for ref in p.phases:
        meta = _meta(ref.task_id)
        if meta.get("status") == states.FAILURE:
            return f"{ref.label} failed: {meta.get('result')!r}"
    return None


def announce(p: Plan) -> Plan:
    """Leave a record of the run in the result backend, before its canvas is sent.

    No worker ever writes it, so while the run's other records come and go it stays until the
    backend's own expiry (``result_expires``); when it is gone the backend lost everything it
    held (a Redis restarted without persistence, a flush) and the run cannot finish: its chord
    counts and pending messages went with it. ``wait`` and ``verify-dag status`` look for it.
    """
    sid = sentinel_id(p.run_id)
    # The run's task ids too: `wait`, `status` and `cancel` follow a run they did not submit.
    record = {"runId": p.run_id, "tasks": [ref.task_id for ref in p.phases], "final": p.final_id}
    app.backend.store_result(sid, record, SUBMITTED)
    return dataclasses.replace(p, sentinel=sid)


def lost(p: Plan) -> bool:
    """Whether the result backend no longer has the run's sentinel (a missing id reads PENDING);
    a run cancelled meanwhile (``verify-dag cancel``) ends the wait with a FatalError."""
    if p.sentinel is None:
        return False
    state = str(_meta(p.sentinel)["status"])
    if state == CANCELLED:
        raise FatalError(f"run {p.run_id} was cancelled (verify-dag cancel)")
    return bool(state == states.PENDING)


def cancel_record(run_id: str) -> dict[str, Any] | None:
    """Mark the run cancelled in its sentinel; returns the sentinel's record (its task ids), or
    None when the result backend does not know the run."""
    sid = sentinel_id(run_id)
    meta = read_meta(sid)
    if not meta.get("task_id") or not isinstance(meta.get("result"), dict):
        return None
    record: dict[str, Any] = dict(meta["result"])
    app.backend.store_result(sid, record, CANCELLED)
    return record


def wait(
    p: Plan,
    *,
    timeout: float,
    progress: Progress | None = None,
    interval: float = 0.005,
    sweep: float = 0.25,
    outage: float | None = None,
    lost_check: float = LOST_CHECK,
) -> dict[str, Any]:
    """Wait for the report task.

    The final result is polled every ``interval``; every ``sweep`` seconds the other phases are
    looked at too, for the progress display and so that a phase task that failed outright (it
    should not: phases record errors on the state) ends the wait instead of hanging it. Every
    ``lost_check`` seconds the run's sentinel is looked for (``announce``): when it is gone the
    run's report is taken from the report store if it landed there, else the wait ends with a
    FatalError. A verify run's report is checked against the run (``check_report``).

    A result store that cannot be reached (Redis restarting) is asked again every 0.5 s for up
    to ``outage`` seconds in a row (default: ``$VERIFY_DAG_OUTAGE_LIMIT``, else 60), then the
    wait ends with a FatalError; ``timeout`` bounds the whole wait either way.
    """
    limit = outage_limit() if outage is None else outage
    start = time.monotonic()
    next_sweep = start + sweep
    next_look = start + lost_check
    down_since: float | None = None
    while True:
        attempt = time.monotonic()
        try:
            result = _poll(p, progress, sweep=attempt >= next_sweep)
            if result is None and attempt >= next_look:
                next_look = attempt + lost_check
                if lost(p):
                    result = _lost(p)
        except outage_errors() as exc:
            # An attempt can take a while to fail (a connect timeout): it counts.
            now = time.monotonic()
            down_since = attempt if down_since is None else down_since
            if now - down_since >= limit:
                raise FatalError(
                    f"the result store was unreachable for {limit:.0f} s in a row (limit "
                    f"{OUTAGE_ENV}) while waiting for run {p.run_id}: {one_line(exc)}",
                    hint=f"the run goes on if the workers reconnect; ask `verify-dag status "
                    f"{p.run_id}` once Redis is back",
                ) from exc
            _check_timeout(p, start, timeout)
            time.sleep(OUTAGE_RETRY)
            continue
        down_since = None
        if result is not None:
            return result
        now = time.monotonic()
        if now >= next_sweep:
            next_sweep = now + sweep
        _check_timeout(p, start, timeout)
        time.sleep(_pause(interval, now - start))


# The wait's polls grow apart as the run goes on, up to POLL_MAX apart: a run is seen to end at
# most POLL_SHARE of its time late, a quick one (an unchanged re-verify) within ``interval``,
# and a long one is not asked about 200 times a second. Each look costs the client's thread
# the interpreter's lock, which the embedded worker's phases in the same process need: polled
# every 5 ms, they were a sixth of that process's Python time in an 8 s run.
POLL_SHARE = 0.02
POLL_MAX = 0.05


def _pause(interval: float, elapsed: float) -> float:
    return max(interval, min(POLL_MAX, elapsed * POLL_SHARE))


def _poll(p: Plan, progress: Progress | None, *, sweep: bool) -> dict[str, Any] | None:
    """One look at the run: its report when ready, else None; a failed phase raises."""
    final = _meta(p.final_id)
    if final["status"] in states.READY_STATES:
        if progress is not None:
            progress.update(p, _meta)
        carried = _carried_report(final)
        if final["status"] != states.SUCCESS and carried is None:
            raise FatalError(f"the report task failed: {final.get('result')!r}")
        result: dict[str, Any] = carried if carried is not None else final["result"]
        check_report(p, result)
        return result
    if sweep:
        if progress is not None:
            progress.update(p, _meta)
        failed = _first_failure(p)
        if failed is not None:
            if _meta(p.final_id)["status"] in states.READY_STATES:
                # The report task ended between the first look and this one (a run that
                # errored ends it FAILED, carrying its report): that report is the answer.
                return _poll(p, progress, sweep=False)
            # A result store that lost the run also lost the state its next phase reads
            # (tasks/stash.py), which fails that phase: the loss is what to tell.
            if lost(p):
                return _lost(p)
            raise FatalError(f"phase {failed}")
    return None


def _carried_report(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The ReportResult a failed report task carries: a run that errored or was blocked ends
    its report task with RunFailed (tasks/base.py), after storing the report."""
    exc = meta.get("result")
    if meta.get("status") != states.FAILURE or type(exc).__name__ != "RunFailed":
        return None
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    carried = args[1] if len(args) >= 2 else None
    return carried if isinstance(carried, dict) else None


def _lost(p: Plan) -> dict[str, Any]:
    """The run's report from the report store, when the result store lost the run after the
    report landed; else the FatalError that says the run is lost.

    Shaped as the report task's ReportResult is in JSON, and held to the same check before
    anything believes it: the store's copy is read as untrusted as the result store's."""
    from verify_dag import store

    if p.expect is not None:
        try:
            doc, markdown, _ = store.load(p.expect.store, p.run_id)
        except VerifyDagError:
            pass  # not there (or unreadable): the run is lost either way
        else:
            found = {
                "report": doc,
                "markdown": markdown,
                "stored": str(store.resolve(p.expect.store) / p.run_id),
            }
            check_report(p, found)
            return found
    raise FatalError(
        f"the broker lost run {p.run_id} (its records vanished from the result store: a restart "
        "without persistence or a flush?)",
        hint="submit it again; a broker that must survive restarts needs Redis persistence, "
        'see ops/README.md, "Faults and recovery"',
    )


def report_result(result: dict[str, Any]) -> ReportResult:
    """A verify run's result (``wait`` checked it is this run's report) as the model; one of
    another shape (a worker of another version) is a FatalError, not a traceback."""
    from pydantic import ValidationError

    try:
        return ReportResult.model_validate(result)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the result"
        raise FatalError(
            f"the report task's result is not one this client reads ({where}: {first['msg']})",
            hint="are the workers running this version of verify-dag?",
        ) from None


def check_report(p: Plan, result: object) -> None:
    """A FatalError unless ``result`` is the report of the run ``p`` asked for.

    Read from the raw JSON, before it is validated into a ReportResult: a result of any shape
    is refused with the reason it is not this run's."""
    if p.expect is None:
        return
    report = result.get("report") if isinstance(result, dict) else None
    wrong = mismatch(report, p.run_id, p.expect)
    if wrong is not None:
        raise FatalError(
            f"the report in the result store is not this run's ({wrong})",
            hint="something other than the run's own report task wrote its result; "
            "do not trust this run, verify again",
        )


def mismatch(report: object, run_id: str, expect: Expected) -> str | None:
    """What in ``report`` says it is not the report of run ``run_id``, or None when it is.

    Checked: the run id, the repository and the head SHA. The head is known to the client for a
    local repository (the snapshot it pinned, or the HEAD the in-process worker will read); for
    a URL the scope phase resolves it on a worker, so only its shape is checked. An error report
    may have no head (the scope phase never resolved one); it fails the run anyway.
    """
    if not isinstance(report, dict):
        return f"no report, expected run id {run_id}"
    run, scope = (
        part if isinstance(part := report.get(key), dict) else {} for key in ("run", "scope")
    )
    got_id, got_repo, head = run.get("id"), run.get("repo"), scope.get("headSha")
    if got_id != run_id:
        return f"run id {got_id}, expected {run_id}"
    if got_repo != expect.repo:
        return f"repository {got_repo}, expected {expect.repo}"
    if head is None and report.get("status") == "error":
        return None
    if expect.head is not None and head != expect.head:
        return f"head {head}, expected {expect.head}"
    if not (isinstance(head, str) and _SHA.fullmatch(head)):
        return f"head {head!r}, expected a commit SHA"
    return None


def _check_timeout(p: Plan, start: float, timeout: float) -> None:
    """``--timeout`` bounds the wait. On a broker the run goes on and its report lands in the
    store; in-process it would die with this process half-way, so it is stopped here and
    recorded as cancelled in the store (``stop_here``)."""
    if time.monotonic() - start <= timeout:
        return
    if embedded():
        where = stop_here(p, f"stopped at --timeout={timeout:g} s")
        raise FatalError(
            f"no report after {timeout:g} s (run {p.run_id}): the run was stopped and recorded "
            f"as cancelled{where}"
        )
    raise FatalError(
        f"no report after {timeout:g} s (run {p.run_id}); the run goes on, and its report will "
        "land in the store",
        hint=f"`verify-dag wait {p.run_id}` waits for it; is a worker consuming the git, static, "
        "review, test and exercise queues?",
    )


def stop_here(p: Plan, reason: str) -> str:
    """Stop an in-process run: its later phases skip themselves (the sentinel says CANCELLED),
    every command it runs now or would start is killed, and the store records why. Returns
    where that record went, for the message (empty when it could not be written)."""
    from verify_dag import processes, store

    with contextlib.suppress(*outage_errors(), VerifyDagError):
        cancel_record(p.run_id)
    processes.stop_run(p.run_id)
    try:
        path = store.mark_cancelled(p.expect.store if p.expect else None, p.run_id, reason)
    except (OSError, VerifyDagError):
        return ""
    return f" in {path.parent}"


def read_meta(task_id: str, *, outage: float | None = None) -> dict[str, Any]:
    """One task's meta from the result store (``verify-dag status``), asking an unreachable store
    again every 0.5 s for up to ``outage`` seconds (default as for ``wait``)."""
    limit = outage_limit() if outage is None else outage
    start = time.monotonic()
    while True:
        try:
            return _meta(task_id)
        except outage_errors() as exc:
            if time.monotonic() - start >= limit:
                raise FatalError(
                    f"the result store was unreachable for {limit:.0f} s in a row (limit "
                    f"{OUTAGE_ENV}) while reading {task_id}: {one_line(exc)}",
                    hint="try again once Redis is back",
                ) from exc
            time.sleep(OUTAGE_RETRY)


def outage_limit() -> float:
    """Seconds the result store may stay unreachable: ``$VERIFY_DAG_OUTAGE_LIMIT`` or 60."""
    text = os.environ.get(OUTAGE_ENV, "").strip()
    if not text:
        return DEFAULT_OUTAGE_LIMIT
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{OUTAGE_ENV}: expected seconds, got {text!r}") from None
    if not value > 0:
        raise UsageError(f"{OUTAGE_ENV}: must be more than 0 seconds, got {text!r}")
    return value


def outage_errors() -> tuple[type[BaseException], ...]:
    """What a result store that went away raises: its connection errors, and Celery's
    BackendError once the backend's own retries are spent. kombu counts KeyError among Redis's
    connection errors; here it would only hide a bug."""
    errors = getattr(app.backend, "connection_errors", ()) or ()
    return (BackendError, *(e for e in errors if not issubclass(e, LookupError)))


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, BackendError) and cause is not None:
        text += f" ({' '.join(str(cause).split()) or type(cause).__name__})"
    return text


def release(p: Plan) -> None:
    """Cancel the result subscriptions that sending the canvas opened (Redis pub/sub).

    The client reads results with ``_meta`` and never needs them. Left open, each is cancelled
    from AsyncResult.__del__ during interpreter shutdown, which prints a traceback. With the
    result store unreachable they are only forgotten: unsubscribing would first retry the
    connection for about 20 s, and the process is about to exit anyway.
    """
    consumer = getattr(app.backend, "result_consumer", None)
    if consumer is None:
        return
    # RuntimeError: what Celery's pub/sub consumer raises when it cannot reconnect.
    unreachable: tuple[type[BaseException], ...] = (RuntimeError, *outage_errors())
    try:
        app.backend.client.ping()
        for ref in p.phases:
            consumer.cancel_for(ref.task_id)
    except unreachable:
        subscribed = getattr(consumer, "subscribed_to", None)
        if isinstance(subscribed, set):
            subscribed.clear()


def _meta(task_id: str) -> dict[str, Any]:
    # Plain reads of the result store. AsyncResult would subscribe to Redis pub/sub and try to
    # unsubscribe from __del__ while the interpreter shuts down, printing a traceback.
    meta: dict[str, Any] = app.backend.get_task_meta(task_id)
    return meta


def verify_progress(quiet: bool) -> Progress:
    """verify's display on stderr: live on a terminal, plain lines in a log, none with --quiet."""
    return Progress(None if quiet else sys.stderr, live=sys.stderr.isatty())


def progress_stream(json_output: bool) -> TextIO | None:
    """Progress goes to stderr, and only when stdout is a terminal and the output is not JSON."""
    if json_output or not sys.stdout.isatty():
        return None
    return sys.stderr
