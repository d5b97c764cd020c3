"""``verify-dag fleet run|beat FLEET.toml``: audit every repository a fleet file lists, now or on a
schedule. See docs/fleet.md; the file format and the index are in ``verify_dag.fleet``, one fleet
run in ``verify_dag.fleet.audit``, the summary in ``verify_dag.fleet.summary``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from verify_dag.cli import args as cli_args
from verify_dag.cli import exits
from verify_dag.errors import UsageError

if TYPE_CHECKING:  # the parser is built on every call, before the fleet's modules are needed
    from verify_dag.fleet import Entry

DEFAULT_CRON = "0 2 * * *"

EXIT_CODES_HELP = """exit codes:
  0  every repository passed, or was reused, with no issue at or above --fail-on
  1  some repository has issues at or above --fail-on
  2  usage error (bad flags, a missing or invalid fleet file)
  3  some repository's audit errored or was blocked (its head could not be read included)
fleet beat exits with the worst code of its audits (3 over 1 over 0) once --runs are done.
"""


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
    from verify_dag.fleet import audit

    return audit.run(
        entries,
        fleet_file=args.fleet_file,
        store_dir=args.store,
        fail_on=args.fail_on,
        timeout=args.timeout,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

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


def _cron(expr: str, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Any:
    """A celery crontab read in UTC; ``clock`` is its idea of now (tests fix it)."""
    from celery.schedules import crontab

    fields = expr.split()
    if len(fields) != 5:
        raise UsageError(
            f"--cron: expected five fields (minute hour day month weekday), got {expr!r}"
        )
    minute, hour, day, month, weekday = fields
    try:
        return crontab(
            minute=minute,
            hour=hour,
            day_of_month=day,
            month_of_year=month,
            day_of_week=weekday,
            nowfun=clock,
        )
    except ValueError as exc:
        raise UsageError(f"--cron: {expr!r}: {exc}") from None


def _night(args: argparse.Namespace) -> int:
    from pathlib import Path

    from verify_dag import fleet
    from verify_dag.fleet import summary as fleet_summary

    summary = _audit(args, fleet.load(args.fleet_file))
    code: int = summary["exitCode"]
    where = Path(summary["summaryDir"]) / fleet_summary.SUMMARY_MD
    print(f"fleet audit: {where} (exit {code})", flush=True)
    return code


def cmd_beat(args: argparse.Namespace) -> int:
    from verify_dag import fleet

    fleet.load(args.fleet_file)  # a bad file is a usage error now, not at 2 a.m.
    cron = None if args.every else _cron(args.cron or DEFAULT_CRON)
    worst, done = 0, 0
    next_at = time.monotonic()  # --every: the first audit at once
    while args.runs is None or done < args.runs:
        if cron is not None:
            now = datetime.now(UTC)
            wait = cron.remaining_estimate(now).total_seconds()
            due = now + timedelta(seconds=wait)
            print(
                f"verify-dag: next fleet audit at {due:%Y-%m-%d %H:%M:%S} UTC",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(max(wait, 0.0))
        else:
            time.sleep(max(next_at - time.monotonic(), 0.0))
            next_at = time.monotonic() + args.every
        try:
            code = _night(args)
        except Exception as exc:  # noqa: BLE001  # a scheduler outlives one failed night
            code = exits.report(exits.FLEET_AUDIT, exc)
        # 3 (errors) outranks 2 (a bad fleet file) outranks 1 (issues) outranks 0.
        worst = max(worst, code)
        done += 1
    return worst
