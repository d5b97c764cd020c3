"""``verify-dag fleet run|beat FLEET.toml``: audit every repository a fleet file lists, now or on a
schedule. See docs/fleet.md; the file format and the index are in ``fleet``, the summary in
``fleet_summary``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verify_dag import cli_runs
from verify_dag.errors import EXIT_ERROR, UsageError, VerifyDagError

if TYPE_CHECKING:  # the parser is built on every call, before Celery is needed
    from verify_dag.fleet import Entry
    from verify_dag.fleet.summary import Outcome
    from verify_dag.models import VerifyRequest

DEFAULT_CRON = "0 2 * * *"
HEAD_READERS = 8  # git ls-remote calls at once: most of their time is network

EXIT_CODES_HELP = """exit codes:
  0  every repository passed, or was reused, with no issue at or above --fail-on
  1  some repository has issues at or above --fail-on
  2  usage error (bad flags, a missing or invalid fleet file)
  3  some repository's audit errored or was blocked (its head could not be read included)
fleet beat exits with the worst code of its audits (3 over 1 over 0) once --runs are done.
"""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def add_parsers(
    sub: Any, add_broker: Callable[[argparse.ArgumentParser], None], severity: Callable[[str], int]
) -> None:
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
    beat = actions.add_parser(
        "beat",
        help="audit the fleet on a schedule (nightly by default)",
        epilog=EXIT_CODES_HELP,
        formatter_class=fmt,
    )
    for p in (run, beat):
        p.add_argument("fleet_file", metavar="FLEET.toml")
        p.add_argument(
            "--fail-on",
            type=severity,
            default=7,
            metavar="N",
            help="exit 1 when an issue has severity >= N (default 7)",
        )
        p.add_argument(
            "--timeout",
            type=_seconds,
            default=7200.0,
            metavar="SECONDS",
            help="give up on reports not in after this long, per fleet run (default 7200)",
        )
        add_broker(p)
        cli_runs.add_store(p)
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
        type=_seconds,
        metavar="SECONDS",
        help="audit at once, then every SECONDS instead of on --cron",
    )
    beat.add_argument(
        "--runs",
        type=cli_runs._positive,
        metavar="N",
        help="stop after N audits (default: run until stopped)",
    )


def cmd_fleet(args: argparse.Namespace) -> int:
    if args.fleet_command == "beat":
        return _beat(args)
    return _run(args, print_summary=True)


# --- one fleet run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pending:
    entry: Entry
    head: str
    request: VerifyRequest
    plan: Any  # verify_dag.tasks.workflow.Plan


def _run(args: argparse.Namespace, print_summary: bool) -> int:
    from verify_dag import fleet, store
    from verify_dag.fleet import summary as fleet_summary
    from verify_dag.tasks.app import configure

    entries = fleet.load(args.fleet_file)
    output = cli_runs.new_output(args.output) if getattr(args, "output", None) else None
    store_dir = store.resolve(args.store).resolve()
    started = store.now()
    embedded = str(configure(args.broker).conf.broker_url).startswith("memory://")
    outcomes = _audit(entries, store_dir, embedded, args.fail_on, args.timeout)
    summary_dir = fleet_summary.new_dir(store_dir)
    summary = fleet_summary.build(
        outcomes,
        fleet_file=str(Path(args.fleet_file).resolve()),
        store_dir=store_dir,
        summary_dir=summary_dir,
        started=started,
        fail_on=args.fail_on,
    )
    fleet_summary.write(summary)
    code: int = summary["exitCode"]
    if not print_summary:
        print(f"fleet audit: {summary_dir / fleet_summary.SUMMARY_MD} (exit {code})", flush=True)
        return code
    fmt = getattr(args, "format", "markdown")
    text = (
        fleet_summary.markdown(summary)
        if fmt == "markdown"
        else ((summary_dir / fleet_summary.SUMMARY_JSON).read_text(encoding="utf-8"))
    )
    if output is None:
        sys.stdout.write(text)
        return code
    try:
        with open(output, "x", encoding="utf-8") as fh:  # never overwrite
            fh.write(text)
    except FileExistsError:
        raise UsageError(f"--output: {output} already exists; not overwritten") from None
    print(output)
    return code


def _head(entry: Entry) -> str | VerifyDagError:
    from verify_dag import git

    try:
        return git.remote_head(entry.url)
    except VerifyDagError as exc:
        return exc


def _request(entry: Entry, store_dir: Path, fail_on: int) -> VerifyRequest:
    from verify_dag import store
    from verify_dag.models import VerifyRequest
    from verify_dag.phases import scope

    request = VerifyRequest(
        repo=entry.url,
        scope=entry.scope,
        base=entry.base,
        depth=entry.depth,
        mode="report-only",
        format="json",
        fail_on=fail_on,
        store=str(store_dir),
        submitted=store.now(),
    )
    # A URL is resolved by the workers (each keeps its own mirror); a path is checked here,
    # exactly as `verify` checks it.
    return request if entry.is_url else scope.validate_request(request)


def _audit(
    entries: list[Entry], store_dir: Path, embedded: bool, fail_on: int, timeout: float
) -> list[Outcome]:
    """Every run is submitted before any is waited for, so the fleet's workers take them all."""
    from verify_dag import client, fleet, store
    from verify_dag.fleet.summary import Outcome

    with ThreadPoolExecutor(max_workers=HEAD_READERS) as pool:
        heads = list(pool.map(_head, entries))
    outcomes: dict[int, Outcome] = {}
    pending: list[_Pending] = []
    for entry, head in zip(entries, heads, strict=True):
        if isinstance(head, VerifyDagError):
            outcomes[entry.number] = Outcome(entry, "error", error=_shown(entry, head))
            continue
        last = fleet.reusable(store_dir, entry, head)
        if last is not None:
            doc, meta = last
            outcomes[entry.number] = Outcome(
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
            request = _request(entry, store_dir, fail_on)
            if embedded:
                from verify_dag.tasks import embedded as worker

                worker.ensure_worker()  # once per process; not at all when everything is reused
            plan = client.submit(request) if embedded else cli_runs.submit(request)
        except VerifyDagError as exc:
            outcomes[entry.number] = Outcome(entry, "error", head=head, error=_shown(entry, exc))
            continue
        pending.append(_Pending(entry, head, request, plan))
    deadline = time.monotonic() + timeout
    audited: list[tuple[Entry, str, str, str]] = []
    for p in pending:
        outcome = _collect(p, store_dir, embedded, deadline)
        outcomes[p.entry.number] = outcome
        if outcome.report is not None and outcome.report["status"] == "ok":
            # Only completed audits are remembered: an error or a block is retried next time.
            audited.append(
                (p.entry, outcome.head or p.head, p.plan.run_id, outcome.audited_at or store.now())
            )
    fleet.record(store_dir, audited)
    return [outcomes[e.number] for e in entries]


def _collect(p: _Pending, store_dir: Path, embedded: bool, deadline: float) -> Outcome:
    from verify_dag import client, store
    from verify_dag.fleet.summary import Outcome

    run_id = p.plan.run_id
    try:
        # Past the deadline each remaining run still gets one look at its result.
        remaining = max(deadline - time.monotonic(), 0.1)
        result = (
            client.wait(p.plan, timeout=remaining)
            if embedded
            else client.wait(p.plan, timeout=remaining, interval=0.05)
        )
    except VerifyDagError as exc:
        return Outcome(p.entry, "error", head=p.head, run_id=run_id, error=_shown(p.entry, exc))
    finally:
        if not embedded:
            client.release(p.plan)
    doc: dict[str, Any] = result["report"]
    error = doc["error"]
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
            store.save(store_dir, run_id, doc, result["markdown"], meta)
        except OSError as exc:
            run_dir, note = None, f"report not stored in {store_dir}: {exc}"
    message = f"{error['code']}: {error['message']}" if error else note
    return Outcome(
        p.entry,
        doc["overall"]["result"],
        head=doc["scope"].get("headSha") or p.head,
        error=_shown(p.entry, message) if message else None,
        run_id=run_id,
        report=doc,
        report_dir=run_dir,
        audited_at=meta.finished if meta is not None else None,
    )


def _shown(entry: Entry, error: VerifyDagError | str) -> str:
    text = error if isinstance(error, str) else error.message
    return text.replace(entry.url, entry.shown)


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


def _beat(args: argparse.Namespace) -> int:
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
            code = _run(args, print_summary=False)
        except VerifyDagError as exc:
            # The file may be edited between audits: a bad night is reported, the schedule
            # goes on.
            print(exc.line(), file=sys.stderr, flush=True)
            code = exc.exit_code
        except Exception as exc:  # noqa: BLE001  # a scheduler outlives one failed night
            print(
                f"verify-dag: fleet audit failed: {type(exc).__name__}: {exc}",
                file=sys.stderr,
                flush=True,
            )
            code = EXIT_ERROR
        # 3 (errors) outranks 2 (a bad fleet file) outranks 1 (issues) outranks 0.
        worst = max(worst, code)
        done += 1
    return worst
