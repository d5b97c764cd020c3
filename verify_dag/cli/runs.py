"""``verify-dag status``, ``report`` and ``runs``: what became of submitted runs, from the report
store and, for a run not in it yet, the result backend."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from verify_dag.cli import args as cli_args
from verify_dag.errors import UsageError
from verify_dag.report import formats

if TYPE_CHECKING:  # the parser is built on every call, before pydantic is needed
    from verify_dag.store import RunMeta

# What ``status`` says of a run whose records the result backend lost (client.announce).
LOST = "LOST"
CANCELLED = "CANCELLED"
ORPHANED = "ORPHANED"
# The states after which no report will come.
ENDED = (LOST, CANCELLED, ORPHANED)
WAIT_LOOK = 3.0  # seconds between two looks at whether a waited-for run can still finish


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    s = sub.add_parser(
        "status", help="one line: the state of a run (PENDING, STARTED, SUCCESS, LOST)"
    )
    s.set_defaults(handler=cmd_status)
    s.add_argument("run_id", metavar="RUN_ID")
    cli_args.add_store(s)
    cli_args.add_broker(s)

    r = sub.add_parser("report", help="print or write the stored report of a run")
    r.set_defaults(handler=cmd_report)
    r.add_argument("run_id", metavar="RUN_ID")
    r.add_argument("--format", choices=list(formats.FORMATS), default=formats.DEFAULT)
    r.add_argument("--output", metavar="PATH", help="write the report here (never overwritten)")
    cli_args.add_store(r)

    w = sub.add_parser(
        "wait",
        help="wait for a submitted run's report, print it and exit with its code",
        epilog="exit codes: the run's own (0, 1, 3); 3 when it was cancelled, lost, orphaned "
        "or not finished within --timeout; 2 usage error",
    )
    w.set_defaults(handler=cmd_wait)
    w.add_argument("run_id", metavar="RUN_ID")
    w.add_argument("--timeout", type=cli_args.seconds(), default=7200.0, metavar="SECONDS")
    w.add_argument("--format", choices=list(formats.FORMATS), default=formats.DEFAULT)
    w.add_argument("--output", metavar="PATH", help="write the report here (never overwritten)")
    cli_args.add_store(w)
    cli_args.add_broker(w)

    c = sub.add_parser(
        "cancel", help="cancel a submitted run: revoke its tasks and mark it cancelled"
    )
    c.set_defaults(handler=cmd_cancel)
    c.add_argument("run_id", metavar="RUN_ID")
    cli_args.add_store(c)
    cli_args.add_broker(c)

    n = sub.add_parser("runs", help="list the runs in the report store, newest first")
    n.set_defaults(handler=cmd_runs)
    n.add_argument(
        "--limit",
        type=cli_args.positive,
        default=20,
        metavar="N",
        help="show the N newest runs (default 20)",
    )
    cli_args.add_store(n)


def cmd_status(args: argparse.Namespace) -> int:
    print(status(args.run_id, args.store, args.broker))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from verify_dag import store

    output = cli_args.new_output(args.output) if args.output else None
    doc, markdown, _ = store.load(args.store, args.run_id)
    _print_stored(doc, markdown, args.format, output)
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    """Poll the report store for the run; every few seconds ask whether it can still finish."""
    import time

    from verify_dag import store
    from verify_dag.errors import FatalError

    store.check_run_id(args.run_id)
    output = cli_args.new_output(args.output) if args.output else None
    deadline = time.monotonic() + args.timeout
    next_look = time.monotonic()
    while True:
        try:
            doc, markdown, meta = store.load(args.store, args.run_id)
        except UsageError:
            pass
        else:
            _print_stored(doc, markdown, args.format, output)
            return meta.exit_code
        now = time.monotonic()
        if now >= next_look:
            said = status(args.run_id, args.store, args.broker)
            if said.split()[1] in ENDED:
                raise FatalError(f"no report will come: {said}")
            next_look = now + WAIT_LOOK
        if now >= deadline:
            raise FatalError(
                f"no report of run {args.run_id} after {args.timeout:g} s",
                hint=f"the run goes on; `verify-dag wait {args.run_id}` again",
            )
        time.sleep(0.5)


def cmd_cancel(args: argparse.Namespace) -> int:
    from verify_dag import client, store
    from verify_dag.tasks.app import app, broker_url, configure

    store.check_run_id(args.run_id)
    try:
        store.load(args.store, args.run_id)
    except UsageError:
        pass
    else:
        raise UsageError(f"run {args.run_id} has finished: its report is in the store")
    if broker_url(args.broker).startswith("memory://"):
        raise UsageError("cancel needs the broker the run was sent to: --broker URL")
    configure(args.broker)
    record = client.cancel_record(args.run_id)
    if record is None:
        raise UsageError(f"run {args.run_id} is not known to the result backend")
    tasks = [str(t) for t in record.get("tasks") or [args.run_id]]
    # terminate: a phase already running (a test suite, say) is stopped, not left to finish.
    app.control.revoke(tasks, terminate=True, signal="SIGTERM")
    store.mark_cancelled(args.store, args.run_id)
    print(f"{args.run_id} CANCELLED ({len(tasks)} task(s) revoked; running ones are stopped)")
    return 0


def _print_stored(doc: Any, markdown: str, format_name: str, output: str | None) -> None:
    """A stored report as ``report`` and ``wait`` print it: the stored document and Markdown as
    they were written (a run stored by an earlier version still prints), other formats rendered
    from the model."""
    from verify_dag import report
    from verify_dag.models.report import Report

    fmt = formats.FORMATS[format_name]
    if fmt.name == "json":
        text = report.json_text(doc)
    elif fmt.name == formats.DEFAULT:
        text = markdown
    else:
        text = fmt.render(Report.model_validate(doc))
    if output is None:
        sys.stdout.write(text)
        return
    cli_args.write_report(output, text, fmt.what)


def cmd_runs(args: argparse.Namespace) -> int:
    sys.stdout.write(listing(args.store, args.limit))
    return 0


def status(run_id: str, store_dir: str | None, broker: str | None) -> str:
    """One line: a stored run is SUCCESS; any other run is asked of the result backend, when a
    broker is configured."""
    from verify_dag import store
    from verify_dag.tasks.app import broker_url, configure

    store.check_run_id(run_id)
    try:
        _, _, meta = store.load(store_dir, run_id)
    except UsageError:
        why = store.cancel_reason(store_dir, run_id)
        if why is not None:
            return f"{run_id} {CANCELLED} ({why}; no report will come)"
        if broker_url(broker).startswith("memory://"):
            raise
        configure(broker)
        state = _backend_state(run_id)
        if state is None and (store.resolve(store_dir) / run_id).is_dir():
            # A run submitted from here (its bundle is in the store) that the backend forgot.
            state = LOST
        if state is None:
            raise UsageError(
                f"no run {run_id} in {store.resolve(store_dir)} and none known to "
                "the result backend (a run it lost looks the same)"
            ) from None
        if state == LOST:
            return (
                f"{run_id} LOST (its records vanished from the result store: a restart "
                "without persistence or a flush?)"
            )
        from verify_dag.cli import tracking

        if tracking.cancelled(run_id):
            return f"{run_id} {CANCELLED} (verify-dag cancel; no report will come)"
        if tracking.orphaned(run_id):
            return (
                f"{run_id} {ORPHANED} (no worker and no queue holds its unfinished tasks: "
                "purged, or lost by the broker; it will not finish)"
            )
        return f"{run_id} {state}"
    return f"{run_id} SUCCESS result={meta.result} exit={meta.exit_code} finished={meta.finished}"


def _backend_state(run_id: str) -> str | None:
    """The run's state from the result backend, or None when the backend does not know it.

    The run id is its root (scope) task's id. The report task's id is not derivable from it, so
    once the root task is done the run is reported STARTED until its report is in the store.
    """
    from celery import states

    from verify_dag.client import read_meta
    from verify_dag.tasks.app import sentinel_id

    # A Redis that is restarting is waited for (up to VERIFY_DAG_OUTAGE_LIMIT), as verify does.
    meta = read_meta(run_id)
    sentinel = read_meta(sentinel_id(run_id))
    if not meta.get("task_id"):  # what the backend answers for an id nobody stored
        return None
    if not sentinel.get("task_id"):
        # Known to the backend (a task still running when it was flushed wrote its result
        # again) but its sentinel is gone: nothing will finish the run.
        return LOST
    state = str(meta["status"])
    return states.STARTED if state == states.SUCCESS else state


def listing(store_dir: str | None, limit: int) -> str:
    """The newest ``limit`` runs as a table, newest first."""
    from verify_dag import store

    metas = store.runs(store_dir)[:limit]
    if not metas:
        return f"no runs in {store.resolve(store_dir)}\n"
    return table(metas)


def table(metas: Sequence[RunMeta]) -> str:
    head = ("RUN ID", "FINISHED (UTC)", "REPO", "MODE", "DEPTH", "RESULT", "EXIT")
    rows = [head] + [
        (
            m.run_id,
            m.finished[:19].replace("T", " "),
            m.repo,
            m.mode or "-",
            m.depth,
            m.result,
            str(m.exit_code),
        )
        for m in metas
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in rows
    )
