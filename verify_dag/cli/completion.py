"""``verify-dag completion RUN_ID``: the completion-criterion verifier. See docs/completion.md.

The run directory's ``parsed_scope.json`` names one bash command line, its ``completion``
criterion; four tasks (extract, execute, classify, report) run it with a time limit and capped
output and give a deterministic pass or fail, on the embedded worker or on a broker's workers.
Before anything else the mode gate (verify_dag/completion/gate.py) settles full or quick.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from verify_dag import exitcodes
from verify_dag.cli import args as cli_args
from verify_dag.errors import EXIT_ISSUES, EXIT_OK, UsageError

if TYPE_CHECKING:  # the parser is built on every call, before Celery or pydantic is needed
    from verify_dag.completion.models import CompletionResult, Mode, ModeChoice

DESCRIPTION = """Run the completion criterion of the run directory DIR/RUN_ID (the
"completion" field of its parsed_scope.json, one bash command line) and give a
deterministic pass or fail, with an audit trail and VERIFY_REPORT.md.

mode gate: every run is full or quick, and the mode is never guessed. Without
--mode the command first asks at the terminal, before it looks at the run
directory, with each mode's dispatch count and expected time (Ctrl-C there runs
nothing). With nobody attached to answer (stdin or stdout not a terminal, or CI
set) it refuses (exit 2): pass --mode. With --mode it never asks.
"""

EXIT_CODES_HELP = exitcodes.COMPLETION.help()
RUNS_HELP = (
    "directory of run directories (default: $VERIFY_DAG_RUNS_DIR, else "
    "$XDG_DATA_HOME/verify-dag/completion-runs, i.e. "
    "~/.local/share/verify-dag/completion-runs)"
)
MODE_HELP = (
    "full (recommended): four tasks, one per step, each audited; quick: one task that "
    "writes the same artifacts, only when short of time, counted as quick in the report's "
    "mode usage (default: ask at a terminal; required with nobody attached)"
)
# Seconds to wait for the outcome: the criterion itself is limited to 30 s, the rest is queueing.
WAIT_TIMEOUT = 600.0


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    c = sub.add_parser(
        "completion",
        help="run a run's completion criterion: deterministic pass or fail",
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.set_defaults(handler=cmd_completion)
    c.add_argument("run_id", metavar="RUN_ID", help="the run directory's name in the runs dir")
    c.add_argument("--runs-dir", metavar="DIR", help=RUNS_HELP)
    # No default: an absent --mode is what sends the run through the question (the mode gate).
    c.add_argument("--mode", choices=["full", "quick"], default=None, help=MODE_HELP)
    cli_args.add_broker(c)
    cli_args.add_no_sandbox(c)


def verify(
    run_id: str,
    *,
    runs_dir: str | None = None,
    mode: Mode | ModeChoice = "full",
    broker: str | None = None,
    timeout: float | None = None,
    wait: float = WAIT_TIMEOUT,
    no_sandbox: bool = False,
) -> CompletionResult:
    """Run one iteration on ``DIR/RUN_ID`` and return its outcome. ``mode`` is the mode gate's
    choice, or a bare mode that counts as given with --mode; nothing here asks. ``timeout`` is
    the criterion's budget (default: 30 s, docs/completion.md; tests lower it)."""
    from verify_dag import client
    from verify_dag.completion import artifacts, flow
    from verify_dag.completion.models import CompletionJob, CompletionResult, ModeChoice
    from verify_dag.phases.exerciser import criterion
    from verify_dag.tasks import workflow
    from verify_dag.tasks.app import configure

    directory = artifacts.run_dir(runs_dir, run_id)
    if not directory.is_dir():
        raise UsageError(
            f"no run directory {directory}",
            hint="create it with a parsed_scope.json, or pass --runs-dir",
        )
    if not (directory / artifacts.PARSED_SCOPE).is_file():
        raise UsageError(
            f"{artifacts.PARSED_SCOPE} not found in {directory}",
            hint='write it first: a JSON object whose "completion" field is one bash command line',
        )
    choice = mode if isinstance(mode, ModeChoice) else ModeChoice(mode=mode, chosen_by="given")
    configure(broker)
    if client.embedded():
        cli_args.refuse_unsandboxed(no_sandbox)
    with artifacts.locked(directory):
        iteration, extract = flow.plan_iteration(directory)
        job = CompletionJob(
            run_id=run_id,
            run_dir=str(directory),
            iteration=iteration,
            mode=choice.mode,
            mode_chosen_by=choice.chosen_by,
            unattended=choice.unattended,
            timeout=criterion.DEFAULT_TIMEOUT if timeout is None else timeout,
            no_sandbox=no_sandbox,
        )
        result = client.run_plan(
            workflow.completion_plan(job, extract=extract),
            timeout=wait,
            progress=client.Progress(client.progress_stream(False)),
            name_failed_phase=True,
        )
    return CompletionResult.model_validate(result)


def cmd_completion(args: argparse.Namespace) -> int:
    from verify_dag.completion import gate

    # The specification's order: the mode is settled before step 0 looks at the run directory.
    choice = gate.choose(args.mode)
    out = verify(
        args.run_id,
        runs_dir=args.runs_dir,
        mode=choice,
        broker=args.broker,
        no_sandbox=args.no_sandbox,
    )
    print(
        f"{out.verdict}: {out.reason} (run {out.run_id}, iteration {out.iteration}, "
        f"mode {out.mode})"
    )
    print(f"report: {out.report}")
    return EXIT_OK if out.verdict == "pass" else EXIT_ISSUES
