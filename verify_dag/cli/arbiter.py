"""``verify-dag arbiter``: the verification arbiter as a subcommand. See docs/arbiter.md.

It has its own exit codes (0 a verdict, 3 usage/environment, 4 AUDIT_UNAVAILABLE; cli/exits.py)
and its own argument parsing, so ``cli.main`` hands it the command line before the shared parser
(whose usage errors exit 2) sees it. It writes nothing but the verdict on stdout and one line on
stderr when it exits 3 or 4.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import Any, NoReturn

from verify_dag import exitcodes
from verify_dag.arbiter import (
    EXIT_VERDICT,
    RUBRIC_VERSION,
    VERDICT_SCHEMA,
    InputError,
    Unavailable,
    inputs,
)
from verify_dag.cli import args as cli_args

HELP = "score an evidence bundle against a frozen test plan; one verdict JSON on stdout"
EPILOG = f"""\
Implements rubric {RUBRIC_VERSION}; see docs/arbiter.md.

{exitcodes.ARBITER.help()}
environment:
  AUDIT_CLAUDE_BIN      the model arm's Claude CLI (default claude, on PATH; missing: exit 4)
  AUDIT_CLAUDE_MODEL    its model (default claude-opus-4-6[1m])
  AUDIT_CLAUDE_TIMEOUT  seconds it may take (default 180)
"""


class _Parser(argparse.ArgumentParser):
    """A usage error of this subcommand is one line and exit 3 (docs/arbiter.md), not argparse's
    2."""

    def error(self, message: str) -> NoReturn:
        raise InputError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="verify-dag arbiter",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for name in inputs.ARGUMENTS:
        parser.add_argument(name)
    return parser


def add_parsers(sub: Any) -> None:
    """List the subcommand in ``verify-dag --help``; ``main`` parses its arguments itself."""
    sub.add_parser("arbiter", help=HELP, add_help=False)


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    request = inputs.parse([getattr(args, name) for name in inputs.ARGUMENTS])
    from verify_dag import jsonschemas
    from verify_dag.arbiter import model_arm, rubric

    bundle = inputs.read(request.bundle_path, "bundle_path")
    plan = inputs.read(request.plan_path, "plan_path")
    assessment = rubric.evaluate(request, bundle, plan)
    verdict = model_arm.apply(assessment.verdict, assessment, request, os.environ)
    problems = sorted(jsonschemas.validator(VERDICT_SCHEMA).iter_errors(verdict), key=str)
    if problems or {k: verdict[k] for k in inputs.TUPLE} != request.echo():
        why = problems[0].message if problems else "the tuple was not echoed verbatim"
        raise Unavailable(f"the arbiter's own verdict is invalid: {why}")
    cli_args.write_utf8(json.dumps(verdict, indent=2, ensure_ascii=False) + "\n")
    if verdict["verdict"] != "AUDIT_UNAVAILABLE":
        return EXIT_VERDICT
    arm = verdict["model_arm"]
    # The verdict is on stdout; the error says why there is no trustworthy one (exit 4).
    raise Unavailable(
        f"model arm: {arm['reason']}"
        if arm["status"] == "unavailable"
        else f"security evidence required but unavailable: {verdict['security_verdict']['reason']}"
    )
