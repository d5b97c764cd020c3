"""``verify-dag`` subcommands. ``main(argv) -> int``; every error is mapped to an exit code here."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from verify_dag import (
    cli_arbiter,
    cli_completion,
    cli_contract,
    cli_fleet,
    cli_runs,
    cli_shadow,
)
from verify_dag.errors import EXIT_ERROR, UsageError, VerifyDagError

MODE_NOTE = (
    "interactive and auto-fix are accepted, but only report-only is built yet: every run is "
    "report-only and the report says so"
)

# The worker pools verify-dag supports (celery's gevent/eventlet need extra packages) and the log
# levels celery accepts.
WORKER_POOLS = ("prefork", "threads", "solo")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")

EXIT_CODES_HELP = """exit codes:
  0  no issue at or above --fail-on
  1  issues at or above --fail-on
  2  usage error
  3  the verification itself errored or was blocked
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _severity(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a severity: {text!r}") from None
    if not 1 <= value <= 10:
        raise argparse.ArgumentTypeError(f"severity must be 1-10, got {value}")
    return value


def _add_broker(p: argparse.ArgumentParser, default: str = "else in-process") -> None:
    p.add_argument(
        "--broker",
        metavar="URL",
        help=f"Celery broker URL (default: $VERIFY_DAG_BROKER_URL, {default})",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="verify-dag",
        description="Verify a code change before calling it done.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND"
    )

    v = sub.add_parser(
        "verify",
        help="verify a change and write one report",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument(
        "path",
        nargs="?",
        default=".",
        help="repository: a path (default: the current directory) or a URL the "
        "workers mirror (with --scope=all or --scope=branch)",
    )
    v.add_argument(
        "--scope",
        choices=["staged", "unstaged", "branch", "all"],
        help="what to verify (default: auto-detect staged, then unstaged, then branch)",
    )
    v.add_argument("--base", metavar="REF", help="exact baseline ref; only with --scope=branch")
    v.add_argument(
        "--files",
        metavar="F1,F2",
        help="verify these files only (comma-separated; relative to the current "
        "directory inside the repository, else to its top)",
    )
    v.add_argument(
        "--module",
        metavar="PATH",
        help="verify this directory or file only (relative like --files)",
    )
    v.add_argument(
        "--depth",
        choices=["light", "deep"],
        default="light",
        help="light: tester + one judgement reviewer; deep: every reviewer, triage "
        "Job B, changed-line coverage and comment rules (default light)",
    )
    v.add_argument(
        "--mode",
        choices=["interactive", "report-only", "auto-fix"],
        default="interactive",
        help=MODE_NOTE,
    )
    v.add_argument(
        "--format",
        choices=["markdown", "json"],
        default="markdown",
        help="markdown on stdout (default) or JSON v1 (needs --output)",
    )
    v.add_argument(
        "--output",
        metavar="PATH",
        help="write the report here (required with --format=json; never overwritten)",
    )
    v.add_argument(
        "--fail-on",
        type=_severity,
        default=7,
        metavar="N",
        help="exit 1 when an issue has severity >= N (default 7)",
    )
    v.add_argument("--since", metavar="SHA", help="head the last approved run saw; needs --ledger")
    v.add_argument("--ledger", metavar="PATH", help="run ledger to read (read-only)")
    v.add_argument(
        "--no-carry-forward",
        action="store_true",
        help="report the --ledger's findings but review as a first run",
    )
    v.add_argument(
        "--epic-context",
        metavar="PATH",
        help="the epic this change is one issue of; deferrals go to deferredToEpic",
    )
    v.add_argument(
        "--plan-file",
        metavar="PATH",
        help="a plan the change implements; plan completeness checks it",
    )
    v.add_argument(
        "--contract",
        metavar="PATH",
        help="a CONTRACT (docs/contract.md) the change is verified against, in the "
        "review chord: criteria, FILE SCOPE and the floor guard",
    )
    v.add_argument(
        "--completion",
        metavar="CMD",
        help="a completion criterion: one bash line the exerciser runs in the "
        "verified commit (30 s, capped output); pass only if it exits 0",
    )
    v.add_argument("--skip-ux", action="store_true", help="skip ux-reviewer (deep only)")
    v.add_argument(
        "--require-sandbox",
        action="store_true",
        help="refuse to run repository code without a full (bubblewrap) sandbox on "
        "the host that runs it (workers: $VERIFY_DAG_REQUIRE_SANDBOX=1); see "
        "docs/security.md",
    )
    v.add_argument(
        "--skip-visual",
        action="store_true",
        help="skip visual-verify (deep) or the exerciser's visual lens (light)",
    )
    v.add_argument(
        "--auto-fix-threshold",
        type=_severity,
        default=3,
        metavar="N",
        help="minimum severity auto-fix mode would fix (accepted; auto-fix is not built yet)",
    )
    v.add_argument(
        "--test-timeout",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="time limit of the test suite run (default 1800)",
    )
    v.add_argument(
        "--timeout",
        type=float,
        default=7200.0,
        metavar="SECONDS",
        help="give up waiting for the report after this long",
    )
    v.add_argument(
        "--no-wait",
        action="store_true",
        help="submit to the broker, print the run id and return (needs a broker)",
    )
    _add_broker(v)
    cli_runs.add_store(v)

    w = sub.add_parser("worker", help="start a Celery worker for the pipeline's queues")
    _add_broker(w, default="required")
    # Defaults are resolved in cmd_worker from the environment, so a container image can choose
    # its queue set without a command line (worker.Dockerfile).
    w.add_argument(
        "--queues",
        metavar="Q1,Q2",
        help="queues to consume (default: $VERIFY_DAG_QUEUES, else all)",
    )
    w.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="child processes or threads (default: $VERIFY_DAG_CONCURRENCY, else one per CPU)",
    )
    w.add_argument(
        "--pool",
        choices=WORKER_POOLS,
        help="default: $VERIFY_DAG_POOL, else prefork (time limits need prefork)",
    )
    w.add_argument("--loglevel", help="default: $VERIFY_DAG_LOGLEVEL, else INFO")
    w.add_argument("--hostname", metavar="NAME")
    cli_runs.add_parsers(sub, _add_broker)
    cli_fleet.add_parsers(sub, _add_broker, _severity)
    cli_completion.add_parser(sub, _add_broker)
    cli_arbiter.add_parser(sub)
    cli_contract.add_parsers(sub)
    cli_shadow.add_parser(sub, _add_broker)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("verify-dag")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _existing_file(value: str | None, flag: str) -> str | None:
    if value is None:
        return None
    path = Path(value)
    if not path.is_file():
        raise UsageError(f"{flag}: no such file: {value}")
    return str(path.resolve())


def _read_text(path: str | None, flag: str) -> str | None:
    """The contents of a read-only input file: workers get the text, not a path on this host."""
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{flag}: {path} is not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror}") from None


def _repo_arg(value: str) -> str:
    """PATH as an absolute path, or a repository URL as written (workers mirror it) once it is
    known to carry no credentials."""
    from verify_dag import git, repos

    repos.refuse_credentials(value)
    return value if git.is_url(value) else str(Path(value).resolve())


def _comment_density() -> str | None:
    """$VERIFY_DAG_COMMENT_DENSITY, checked here so a bad value is a usage error, not a
    comment-review that did not run on some worker."""
    from verify_dag.reviewers import comments

    text = os.environ.get(comments.DENSITY_ENV, "").strip()
    if not text:
        return None
    comments.parse_density(text, f"environment {comments.DENSITY_ENV}")
    return text


def _request(args: argparse.Namespace) -> Any:
    from verify_dag import ledger, store
    from verify_dag.models import VerifyRequest
    from verify_dag.phases import scope

    if args.skip_ux and args.depth == "light":
        raise UsageError("--skip-ux is only valid with --depth=deep (light runs no ux-reviewer)")
    if args.no_wait and args.output:
        raise UsageError(
            "--output cannot be written by a --no-wait run; fetch the report later "
            "with: verify-dag report RUN_ID --output=PATH"
        )
    if args.output is not None and not args.output.strip():
        raise UsageError("--output: empty path")
    if args.format == "json" and not args.output:
        raise UsageError("--format=json requires --output=PATH")
    output = cli_runs.new_output(args.output) if args.output else None
    files = tuple(f.strip() for f in args.files.split(",") if f.strip()) if args.files else ()
    if args.files is not None and not files:
        raise UsageError("--files: no file names given")
    ledger_path = _existing_file(args.ledger, "--ledger")
    epic_path = _existing_file(args.epic_context, "--epic-context")
    plan_path = _existing_file(args.plan_file, "--plan-file")
    contract_path = _existing_file(args.contract, "--contract")
    request = VerifyRequest(
        repo=_repo_arg(args.path),
        scope=args.scope,
        base=args.base,
        files=files,
        module=args.module,
        depth=args.depth,
        mode=args.mode,
        format=args.format,
        output=output,
        fail_on=args.fail_on,
        since=args.since,
        ledger=ledger_path,
        no_carry_forward=args.no_carry_forward,
        epic_context=epic_path,
        plan_file=plan_path,
        ledger_data=ledger.load(ledger_path) if ledger_path else None,
        epic_text=_read_text(epic_path, "--epic-context"),
        plan_text=_read_text(plan_path, "--plan-file"),
        skip_ux=args.skip_ux,
        contract=contract_path,
        contract_text=_read_text(contract_path, "--contract"),
        skip_visual=args.skip_visual,
        require_sandbox=args.require_sandbox,
        auto_fix_threshold=args.auto_fix_threshold,
        test_timeout=args.test_timeout,
        completion=cli_completion.criterion(args.completion),
        comment_density=_comment_density(),
        store=str(Path(args.store).expanduser().resolve()) if args.store else None,
        submitted=store.now(),
    )
    return scope.validate_request(request)


def cmd_verify(args: argparse.Namespace) -> int:
    from verify_dag import client, report
    from verify_dag.tasks.app import configure

    app = configure(args.broker)
    embedded_run = str(app.conf.broker_url).startswith("memory://")
    if args.no_wait and embedded_run:
        raise UsageError(
            "--no-wait needs a broker: the in-process default worker would die with "
            "this process; pass --broker URL or set VERIFY_DAG_BROKER_URL"
        )
    request = _request(args)
    progress = client.Progress(client.progress_stream(request.format == "json"))
    if embedded_run:
        from verify_dag import sandbox
        from verify_dag.tasks import embedded

        # This host runs the repository's code: refuse now rather than half-way through.
        sandbox.check_required(request.require_sandbox)
        embedded.ensure_worker()
        result = client.wait(client.submit(request), timeout=args.timeout, progress=progress)
    elif args.no_wait:
        submitted = cli_runs.submit(request)
        client.release(submitted)
        print(submitted.run_id)
        return 0
    else:
        submitted = cli_runs.submit(request)
        try:
            result = client.wait(submitted, timeout=args.timeout, progress=progress, interval=0.05)
        finally:
            client.release(submitted)
    if "storeError" in result:
        print(f"verify-dag: warning: {result['storeError']}", file=sys.stderr)
    doc: dict[str, Any] = result["report"]
    if doc["scope"].get("nothingToVerify") and request.format == "markdown" and not request.output:
        # The seed's "report 'nothing to verify' and STOP": one line, not eleven SKIPPED rows.
        notes = "; ".join(doc["scope"].get("notes") or []) or "no changes in the selected scope"
        print(f"Nothing to verify: {notes}")
        return report.exit_code(doc, request.fail_on)
    _emit(request, doc, result["markdown"])
    return report.exit_code(doc, request.fail_on)


def _emit(request: Any, doc: dict[str, Any], markdown: str) -> None:
    from verify_dag import report

    text = report.to_json(doc) if request.format == "json" else markdown
    if request.output:
        _write_new(request.output, text, request.format)
    else:
        sys.stdout.write(text)


def _write_new(path: str, text: str, fmt: str) -> None:
    try:
        # "x": never overwrite, even if the file appeared while the run was going.
        with open(path, "x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        raise UsageError(f"--output: {path} already exists; not overwritten") from None
    kind = "JSON report" if fmt == "json" else "Markdown report"
    print(f"{kind} written to {path}")


def cmd_status(args: argparse.Namespace) -> int:
    print(cli_runs.status(args.run_id, args.store, args.broker))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from verify_dag import report, store

    output = cli_runs.new_output(args.output) if args.output else None
    doc, markdown, _ = store.load(args.store, args.run_id)
    text = report.to_json(doc) if args.format == "json" else markdown
    if output:
        _write_new(output, text, args.format)
    else:
        sys.stdout.write(text)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    sys.stdout.write(cli_runs.listing(args.store, args.limit))
    return 0


def _worker_setting(flag_value: str | None, flag: str, env: str, default: str) -> tuple[str, str]:
    """A worker setting and where it came from: the flag, else the environment, else a default."""
    if flag_value is not None:
        return flag_value, flag
    from_env = os.environ.get(env, "").strip()
    if from_env:
        return from_env, env
    return default, flag


def cmd_worker(args: argparse.Namespace) -> int:
    from verify_dag import repos
    from verify_dag.tasks.app import BROKER_ENV, BROKER_FILE_ENV, QUEUES, broker_url, configure

    secret = repos.credentials(args.broker) if args.broker else None
    if secret is not None:
        # Unlike a client's, a worker's command line lives as long as the worker, and any
        # process on the host reads it (/proc/<pid>/cmdline, ps), repository code included.
        raise UsageError(
            f"--broker {repos.hide_credentials(args.broker)}: {secret} on a worker's command "
            "line is readable by every process on this host",
            hint=f"put the URL in {BROKER_ENV} or in a file named by {BROKER_FILE_ENV}, "
            'see ops/README.md "Broker credentials"',
        )
    url = broker_url(args.broker)
    if url.startswith("memory://"):
        raise UsageError("a worker needs a broker: pass --broker URL or set VERIFY_DAG_BROKER_URL")
    from verify_dag import sandbox

    # A host set to require the sandbox and unable to give it serves nobody, loudly.
    sandbox.check_required(False)
    text, source = _worker_setting(args.queues, "--queues", "VERIFY_DAG_QUEUES", ",".join(QUEUES))
    queues = [q.strip() for q in text.split(",") if q.strip()]
    if not queues:
        raise UsageError(f"{source}: no queue names given; known: {', '.join(QUEUES)}")
    unknown = sorted(set(queues) - set(QUEUES))
    if unknown:
        raise UsageError(
            f"{source}: unknown queue(s) {', '.join(unknown)}; known: {', '.join(QUEUES)}"
        )
    flag_concurrency = None if args.concurrency is None else str(args.concurrency)
    text, source = _worker_setting(flag_concurrency, "--concurrency", "VERIFY_DAG_CONCURRENCY", "")
    concurrency = None
    if text:
        if not text.isdigit() or int(text) < 1:
            raise UsageError(f"{source}: expected a positive number of processes, got {text!r}")
        concurrency = int(text)
    pool, source = _worker_setting(args.pool, "--pool", "VERIFY_DAG_POOL", "prefork")
    if pool not in WORKER_POOLS:
        raise UsageError(f"{source}: unknown pool {pool!r}; known: {', '.join(WORKER_POOLS)}")
    loglevel, source = _worker_setting(args.loglevel, "--loglevel", "VERIFY_DAG_LOGLEVEL", "INFO")
    if loglevel.upper() not in LOG_LEVELS:
        raise UsageError(
            f"{source}: unknown log level {loglevel!r}; known: {', '.join(LOG_LEVELS)}"
        )
    app = configure(url)
    argv = ["worker", "-Q", ",".join(queues), "--pool", pool, "--loglevel", loglevel.upper(), "-E"]
    if concurrency:
        argv += ["--concurrency", str(concurrency)]
    if args.hostname:
        argv += ["--hostname", args.hostname]
    app.worker_main(argv=argv)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["arbiter"]:  # the seed's exit codes (3, 4) and usage errors: its own parser
        return cli_arbiter.main(argv[1:])
    if argv[:1] == ["floor-guard"]:  # the seed's exit codes (2 findings, 3 usage): its own parser
        return _guarded(
            lambda: cli_contract.floor_guard(argv[1:]), error_code=cli_contract.EXIT_FLOOR_USAGE
        )
    return _guarded(lambda: _dispatch(argv))


def _dispatch(argv: list[str]) -> int:
    parser = build_parser()
    if not argv:
        raise UsageError(
            "no command given: try `verify-dag verify` in a repository, or "
            "`verify-dag --help` for every command"
        )
    args = parser.parse_args(argv)
    handler = {
        "verify": cmd_verify,
        "worker": cmd_worker,
        "status": cmd_status,
        "report": cmd_report,
        "runs": cmd_runs,
        "fleet": cli_fleet.cmd_fleet,
        "completion": cli_completion.cmd_completion,
        "contract": cli_contract.cmd_contract,
        "gates": cli_contract.cmd_gates,
        "shadow": cli_shadow.cmd_shadow,
    }[args.command]
    return handler(args)


def _guarded(body: Callable[[], int], error_code: int | None = None) -> int:
    """Run a command, mapping errors to one stderr line and an exit code: the one place.

    ``error_code`` replaces the error's own code for commands whose specification fixes it.
    """
    try:
        return body()
    except VerifyDagError as exc:
        print(exc.line(), file=sys.stderr)
        return exc.exit_code if error_code is None else error_code
    except KeyboardInterrupt:
        print("verify-dag: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("VERIFY_DAG_DEBUG"):
            raise
        print(f"verify-dag: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
