"""``verify-dag fleet run|beat FLEET.toml``: audit every repository a fleet file lists, now or on a
schedule. See docs/fleet.md; the file format and the index are in ``verify_dag.fleet``, one fleet
run in ``verify_dag.fleet.audit``, the summary in ``verify_dag.fleet.summary``."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verify_dag import exitcodes
from verify_dag.cli import args as cli_args
from verify_dag.cli import exits

# The same as verify_dag/fleet/schedule.py's, which is not imported to build the parser (the
# fleet package pulls in pydantic, and the parser is built on every command).
DEFAULT_CRON = "0 2 * * *"

if TYPE_CHECKING:  # the parser is built on every call, before the fleet's modules are needed
    from verify_dag.fleet import Entry


EXIT_CODES_HELP = exitcodes.FLEET.help()


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    fmt = argparse.RawDescriptionHelpFormatter
    f = sub.add_parser(
        "fleet",
        help="audit every repository of a fleet file, now or nightly",
        epilog=EXIT_CODES_HELP,
        formatter_class=fmt,
    )
    actions = f.add_subparsers(dest="fleet_command", required=True, parser_class=type(f))
    run = actions.add_parser(
        "run",
        help="audit every repository once, all in parallel",
        epilog=EXIT_CODES_HELP,
        formatter_class=fmt,
    )
    run.set_defaults(handler=cmd_run)
    beat = actions.add_parser(
        "beat",
        help="audit the fleet on a schedule (nightly by default)",
        epilog=EXIT_CODES_HELP,
        formatter_class=fmt,
    )
    beat.set_defaults(handler=cmd_beat)
    for p in (run, beat):
        p.add_argument("fleet_file", metavar="FLEET.toml")
        p.add_argument(
            "--fail-on",
            type=cli_args.severity,
            default=7,
            metavar="N",
            help="exit 1 when an issue has severity >= N (default 7)",
        )
        p.add_argument(
            "--timeout",
            type=cli_args.seconds(),
            default=7200.0,
            metavar="SECONDS",
            help="give up on reports not in after this long, per fleet run (default 7200)",
        )
        p.add_argument(
            "--max-review-tokens",
            type=cli_args.positive,
            metavar="N",
            help="the review-token budget of each audit, shared by all its runs (default: the "
            "fleet file's max-review-tokens, else none)",
        )
        cli_args.add_broker(p)
        cli_args.add_store(p)
    run.add_argument(
        "--format",
        choices=["markdown", "json"],
        default="markdown",
        help="the summary printed or written with --output (both are stored)",
    )
    run.add_argument(
        "--output",
        metavar="PATH",
        help="write the summary here and print only its path (never overwritten)",
    )
    when = beat.add_mutually_exclusive_group()
    when.add_argument(
        "--cron",
        metavar="EXPR",
        help=f"five-field cron expression in UTC (default {DEFAULT_CRON!r})",
    )
    when.add_argument(
        "--every",
        type=cli_args.seconds(),
        metavar="SECONDS",
        help="audit at once, then every SECONDS instead of on --cron",
    )
    beat.add_argument(
        "--runs",
        type=cli_args.positive,
        metavar="N",
        help="stop after N audits (default: run until stopped)",
    )


def _audit(args: argparse.Namespace, entries: list[Entry]) -> dict[str, Any]:
    """One fleet run of ``entries``; returns its summary, already stored."""
    from verify_dag.tasks.app import configure

    configure(args.broker)
    from verify_dag import fleet
    from verify_dag.fleet import audit

    return audit.run(
        entries,
        fleet_file=args.fleet_file,
        store_dir=args.store,
        fail_on=args.fail_on,
        timeout=args.timeout,
        max_review_tokens=args.max_review_tokens or fleet.max_review_tokens(args.fleet_file),
    )


def cmd_run(args: argparse.Namespace) -> int:

    from verify_dag import files, fleet
    from verify_dag.fleet import summary as fleet_summary

    entries = fleet.load(args.fleet_file)
    output = cli_args.new_output(args.output) if args.output else None
    summary = _audit(args, entries)
    code: int = summary["exitCode"]
    text = (
        fleet_summary.markdown(summary)
        if args.format == "markdown"
        else (Path(summary["summaryDir"]) / fleet_summary.SUMMARY_JSON).read_text(encoding="utf-8")
    )
    if output is None:
        sys.stdout.write(text)
        return code
    files.write_new(output, text, "--output")
    print(output)
    return code


# --- on a schedule -----------------------------------------------------------------------------


def cmd_beat(args: argparse.Namespace) -> int:
    """Celery beat in this process sends the audit task on the schedule; the audits run on a
    worker of the fleet queue (in-process with no broker), and each is printed as it ends."""
    import queue
    import tempfile

    from celery import signals
    from celery.beat import EmbeddedService

    from verify_dag import client, fleet
    from verify_dag.fleet import schedule
    from verify_dag.tasks.app import configure

    fleet.load(args.fleet_file)  # a bad file is a usage error now, not at 2 a.m.
    when = schedule.every(args.every) if args.every else schedule.cron(args.cron or DEFAULT_CRON)
    app = configure(args.broker)
    fleet_file = str(Path(args.fleet_file).resolve())
    app.conf.beat_schedule = {
        schedule.ENTRY: schedule.entry(
            fleet_file, args.store, args.fail_on, args.timeout, when, args.max_review_tokens
        )
    }
    if client.embedded():
        from verify_dag.tasks import embedded

        embedded.ensure_worker()  # it consumes the fleet queue too
    sent: queue.Queue[str] = queue.Queue()

    def published(
        sender: str | None = None, headers: dict[str, Any] | None = None, **_: Any
    ) -> None:
        if sender == schedule.TASK and headers:
            sent.put(str(headers["id"]))

    signals.after_task_publish.connect(published, weak=False)
    worst, done = 0, 0
    with tempfile.TemporaryDirectory(prefix="verify-dag-beat-") as tmp:
        beat = EmbeddedService(
            app,
            thread=True,
            scheduler_cls="celery.beat:Scheduler",
            schedule_filename=str(Path(tmp) / "schedule"),
        )
        beat.start()
        try:
            while args.runs is None or done < args.runs:
                _announce(when)
                code = _audit_outcome(sent.get(), args.timeout)
                if code is None:
                    continue  # its turn came while the last audit still ran: skipped
                worst = exitcodes.FLEET.worst((worst, code))
                done += 1
        finally:
            beat.stop()
            signals.after_task_publish.disconnect(published)
            # Turns beat sent that no worker took yet are not audits anyone waits for now.
            with app.connection_for_write() as conn:
                conn.default_channel.queue_purge(schedule.QUEUE)
    return worst


def _announce(when: Any) -> None:
    due = datetime.now(UTC) + when.remaining_estimate(datetime.now(UTC))
    print(
        f"verify-dag: next fleet audit at {due:%Y-%m-%d %H:%M:%S} UTC", file=sys.stderr, flush=True
    )


def _audit_outcome(task_id: str, timeout: float) -> int | None:
    """Wait for one audit task; print its line and return its exit code (None: skipped)."""
    from celery import states

    from verify_dag.client import read_meta
    from verify_dag.fleet import summary as fleet_summary

    deadline = time.monotonic() + timeout + 60
    while True:
        meta = read_meta(task_id)
        if meta.get("status") in states.READY_STATES:
            break
        if time.monotonic() > deadline:
            return exits.report(
                exits.FLEET_AUDIT, TimeoutError(f"the audit {task_id} gave no result in time")
            )
        time.sleep(0.2)
    result = meta.get("result")
    if meta["status"] != states.SUCCESS or not isinstance(result, dict):
        error = result if isinstance(result, BaseException) else RuntimeError(str(result))
        return exits.report(exits.FLEET_AUDIT, error)
    if "skipped" in result:
        return None
    code = int(result["exitCode"])
    where = Path(result["summaryDir"]) / fleet_summary.SUMMARY_MD
    print(f"fleet audit: {where} (exit {code})", flush=True)
    return code
