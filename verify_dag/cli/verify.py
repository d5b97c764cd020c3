"""``verify-dag verify``: verify a change and write one report (docs/verify.md, docs/report.md)."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from typing import TYPE_CHECKING, Any

from verify_dag import envvars, exitcodes
from verify_dag.cli import args as cli_args
from verify_dag.cli.verify_request import build_request
from verify_dag.errors import EXIT_ERROR, EXIT_INCOMPLETE, UsageError
from verify_dag.report import formats

if TYPE_CHECKING:  # the parser is built on every call, before pydantic is needed
    from verify_dag.models import Report

MODE_NOTE = (
    "interactive (default): after the report, triage every issue at the terminal, then plan and "
    "apply the chosen fixes (runs as report-only with nobody attached: no terminal, or CI set); "
    "report-only: the report and stop; auto-fix: fix every issue at or above "
    "--auto-fix-threshold, re-check the fixes, no prompts. Nothing is ever committed; "
    "`verify-dag restore RUN_ID` puts the fixed files back (docs/fixes.md)"
)
EXIT_CODES_HELP = exitcodes.VERIFY.help()


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    v = sub.add_parser(
        "verify",
        help="verify a change and write one report",
        epilog=EXIT_CODES_HELP + "\n" + envvars.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.set_defaults(handler=cmd_verify)
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
        "--head",
        metavar="REF",
        help="verify the range --base..REF without checking it out (default HEAD); only with "
        "--scope=branch",
    )
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
        help="light: tester + one judgement reviewer; deep: every reviewer, triage "
        "Job B, changed-line coverage and comment rules (default: the repository's "
        "[tool.verify-dag] depth, else light)",
    )
    v.add_argument(
        "--mode",
        choices=["interactive", "report-only", "auto-fix"],
        default="interactive",
        help=MODE_NOTE,
    )
    v.add_argument(
        "--format",
        choices=list(formats.FORMATS),
        default=formats.DEFAULT,
        help=formats.help_text(),
    )
    v.add_argument(
        "--output",
        metavar="PATH",
        help="write the report here (never overwritten), - for stdout; required with "
        + formats.documents(),
    )
    v.add_argument(
        "--fail-on",
        type=cli_args.severity,
        metavar="N",
        help="exit 1 when an issue has severity >= N (default: the repository's fail-on, else 7)",
    )
    v.add_argument(
        "--allow-incomplete",
        action="store_true",
        default=None,
        help="exit 0, not 4, when no issue fails the run but checks of the composition did not "
        "run (NOT_RUN or BLOCKED; the report still lists them)",
    )
    v.add_argument(
        "--new-only",
        action="store_true",
        help="exit 1 only for issues the change introduced: not for lint the same tool found at "
        "the base, nor a test the debugger saw fail there (the report lists them all)",
    )
    v.add_argument(
        "--fail-under",
        type=cli_args.percent,
        metavar="PCT",
        help="exit 1 when the changed lines' coverage is below PCT (the suite measures it, at "
        "light too)",
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
    cli_args.add_no_sandbox(v)
    v.add_argument(
        "--skip-visual",
        action="store_true",
        help="skip visual-verify (deep) or the exerciser's visual lens (light)",
    )
    v.add_argument(
        "--auto-fix-threshold",
        type=cli_args.severity,
        default=3,
        metavar="N",
        help="auto-fix fixes the issues of this severity or more (default 3)",
    )
    v.add_argument(
        "--test-timeout",
        type=cli_args.seconds(),
        metavar="SECONDS",
        help="time limit of the test suite run (default: the repository's test-timeout, else 1800)",
    )
    v.add_argument(
        "--per-test-timeout",
        type=cli_args.seconds(),
        metavar="SECONDS",
        help="time limit of each test (pytest-timeout; default: the repository's "
        "per-test-timeout, else 300): a hanging test fails alone and the rest still counts",
    )
    v.add_argument(
        "--tool-timeout",
        type=cli_args.seconds(),
        metavar="SECONDS",
        help="time limit of each linter or type checker run (default: the repository's "
        "tool-timeout, else 600)",
    )
    v.add_argument(
        "--timeout",
        type=float,
        default=7200.0,
        metavar="SECONDS",
        help="stop waiting for the report after this long (exit 3): with a broker the run goes "
        "on and lands in the store (verify-dag wait RUN); in-process it is stopped, its "
        "commands killed, and recorded as cancelled in the store",
    )
    v.add_argument(
        "--max-review-tokens",
        type=cli_args.positive,
        metavar="N",
        help="the judgement reviewers' model calls stop at N tokens in and out together: a "
        "reviewer whose call could pass it is NOT_RUN with the reason budget",
    )
    v.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (by default: live on a terminal, a line per phase "
        "elsewhere); with the Markdown report on stdout, print only the verdict and the issues "
        "at the gate, one line each, as a git hook does",
    )
    v.add_argument(
        "--no-wait",
        action="store_true",
        help="submit to the broker, print the run id and return (needs a broker)",
    )
    v.add_argument(
        "--no-cache",
        action="store_true",
        help="compute everything again: take nothing from the result cache of earlier runs "
        "and store nothing in it ($VERIFY_DAG_RESULT_CACHE, see docs/verify.md)",
    )
    cli_args.add_broker(v)
    cli_args.add_store(v)


def _early_checkout(args: argparse.Namespace) -> str | None:
    """The id of a run whose checkout is already being made, or None. A branch scope on the
    in-process worker verifies HEAD (or --head), known before anything else: its checkout is
    begun here, before this process imports Celery and the phases, and written while it does
    (``workspace.prefetch``; the client would otherwise begin it only as its worker starts).
    Anything else, or anything unsure (a broker named anywhere, a path that is not a
    repository, a ref that names no commit), is left to the run, which says why in its words."""
    from verify_dag import git, workspace

    broker = (envvars.BROKER_ENV, envvars.BROKER_FILE_ENV, envvars.CELERY_BROKER_ENV)
    if args.broker or any(os.environ.get(name, "").strip() for name in broker):
        return None
    if args.no_wait or not os.path.isdir(args.path):
        return None
    try:
        repo = git.toplevel(args.path)
    except UsageError:
        return None
    run_id = str(uuid.uuid4())
    ahead = workspace.check_out_ahead(
        run_id, repo, scope=args.scope, narrowed=bool(args.files) or args.module is not None,
        head=args.head, base=args.base,
    )  # fmt: skip
    return run_id if ahead else None


def cmd_verify(args: argparse.Namespace) -> int:
    from verify_dag import outside
    from verify_dag.cli import replay

    entry = replay.key(args)
    answered = replay.lookup(entry) if entry is not None else None
    if answered is not None:
        return replay.answer(args, answered)
    calls = outside.calls()
    early = _early_checkout(args)
    try:
        from verify_dag import client, report
        from verify_dag.fixes import flow
        from verify_dag.tasks.app import configure

        configure(args.broker)
        embedded_run = client.embedded()
        if args.no_wait and embedded_run:
            raise UsageError(
                "--no-wait needs a broker: the in-process default worker would die with "
                "this process; pass --broker URL or set VERIFY_DAG_BROKER_URL"
            )
        request = build_request(args)
        if args.no_wait:
            submitted = client.submit(request)
            client.release(submitted)
            print(submitted.run_id)
            return 0
        if embedded_run:
            from verify_dag import sandbox

            # This host runs the repository's code: refuse now rather than half-way through.
            sandbox.check_required(request.require_sandbox, request.no_sandbox)
        if request.mode == "auto-fix" and request.source.remote:
            raise UsageError("--mode=auto-fix needs a local checkout to fix, not a URL")
        progress = client.verify_progress(args.quiet)
        # Phase 9 talks to the person on stdout unless the report itself goes there.
        report_on_stdout = request.output == "-" or (
            not request.output and formats.for_machines_on_stdout(request.format)
        )
        sent = client.submit(request, run_id=early)
    except BaseException:
        if early is not None:
            from verify_dag import workspace

            workspace.release(early)  # nothing was sent that will
        raise
    try:
        raw = client.collect(sent, timeout=args.timeout, progress=progress)
    finally:
        progress.close()
    result = client.report_result(raw)
    if result.store_errors:
        print(f"verify-dag: warning: {'; '.join(result.store_errors)}", file=sys.stderr)
    doc = result.report
    # Nothing to verify is one line and a stop, not a report of skills that all SKIPPED.
    nothing = doc.scope.nothing_to_verify and request.format == formats.DEFAULT
    if (nothing and not request.output) or not flow.wanted(request):
        wrote: tuple[str, bool, str]
        if nothing and not request.output:
            notes = "; ".join(doc.scope.notes) or "no changes in the selected scope"
            wrote = (f"Nothing to verify: {notes}\n", False, "")
            sys.stdout.write(wrote[0])
        elif args.quiet and not request.output and request.format == formats.DEFAULT:
            wrote = (report.summary_lines(doc, request.fail_on), False, "")
            sys.stdout.write(wrote[0])
        else:
            wrote = _emit(request, doc, result.markdown)
        code, said = _verdict_line(doc, request.fail_on)
        if said:
            print(said, file=sys.stderr)
        # A run that started nothing but git and called no model was decided by its commits,
        # its settings and the result cache: the next identical request is answered with it.
        settled = outside.calls() == calls and not result.store_errors
        if entry is not None and embedded_run and settled and doc.status != "error":
            replay.remember(
                entry,
                replay.Answer(doc.run.id, replay.now(), code, *wrote, said=(said,) if said else ()),
            )
        return code
    # Phase 9: the person reads the report first, then triage (or auto-fix) and its summary.
    if not request.output:
        _emit(request, doc, result.markdown)
        sys.stdout.flush()
    ctx = flow.Context(
        request=request,
        shipped=sent.request or request,
        report=doc,
        timeout=args.timeout,
        out=flow.out_stream(report_on_stdout),
        verified=result.verified_commit,
        compared=result.compared_commit,
    )
    done = flow.run(ctx)
    doc, fixed = done.verified, done.fixed
    if fixed is not doc:
        from verify_dag import store

        kept = store.record(doc.run.id, done.shipped, fixed, report.markdown(fixed))
        if "storeError" in kept:
            print(f"verify-dag: warning: {kept['storeError']}", file=sys.stderr)
    if request.output:
        _emit(request, fixed, report.markdown(fixed))
    # The verdict is on what was verified: fixes made after it do not change it (run again).
    return _verdict(doc, request.fail_on)


def _verdict(doc: Report, fail_on: int | None) -> int:
    """The run's exit code, and for 3 and 4 the one line on stderr that says why: a CI log
    shows it even when the report went to a file."""
    code, said = _verdict_line(doc, fail_on)
    if said:
        print(said, file=sys.stderr)
    return code


def _verdict_line(doc: Report, fail_on: int | None) -> tuple[int, str | None]:
    from verify_dag import report
    from verify_dag.report.verdict import not_run

    code = report.exit_code(doc, fail_on)
    if code == EXIT_ERROR:
        why = doc.error.message if doc.error is not None else "no analysis completed"
        said = "failed" if doc.status == "error" else doc.status
        return code, f"verify-dag: error: verification {said}: {why}"
    if code == EXIT_INCOMPLETE:
        missing = ", ".join(f"{skill} ({status})" for skill, status, _ in not_run(doc))
        return code, (
            f"verify-dag: incomplete: no issue fails the run, but these checks did not run: "
            f"{missing}; --allow-incomplete accepts that (exit 0)"
        )
    return code, None


def _emit(request: Any, doc: Report, markdown: str) -> tuple[str, bool, str]:
    """Write the report where the request says: what was written, whether into a file, and
    the format's name for it."""
    # The worker's Markdown is the one it stored; any other format is rendered here from the model.
    fmt = formats.FORMATS[request.format]
    text = markdown if fmt.name == formats.DEFAULT else fmt.render(doc)
    if not request.output:
        sys.stdout.write(text)
    else:
        cli_args.write_report(request.output, text, fmt.what)
    return text, bool(request.output) and request.output != cli_args.STDOUT, fmt.what
