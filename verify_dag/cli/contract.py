"""``verify-dag contract``, ``verify-dag gates run`` and ``verify-dag floor-guard``.

See docs/contract.md and docs/gates.md. ``floor-guard`` has its own exit codes (a usage error is
3, not the shared parser's 2; cli/exits.py), so ``cli.main`` hands it the command line before the
shared parser sees it. Everything heavy is imported inside the handlers: the parser is built on
every call.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from verify_dag import exitcodes
from verify_dag.cli import args as cli_args
from verify_dag.errors import FatalError, UsageError

FLOOR_HELP = "find weakenings (skips, removed asserts, suppressions, ...) in BASE...HEAD"


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    fmt = argparse.RawDescriptionHelpFormatter
    c = sub.add_parser(
        "contract",
        help="verify a diff against a CONTRACT file (report-only)",
        epilog=exitcodes.CONTRACT.help(),
        formatter_class=fmt,
    )
    c.set_defaults(handler=cmd_contract)
    c.add_argument("--contract", required=True, metavar="PATH", help="the CONTRACT file")
    c.add_argument(
        "--diff",
        required=True,
        metavar="RANGE",
        help="A..B, A...B (from their merge base), or A (against the work tree)",
    )
    c.add_argument(
        "--test",
        metavar="CMD",
        help="a test command, run (bash) in a throwaway checkout of the diff's new "
        "side; a failure is a gap",
    )
    c.add_argument("--test-timeout", type=float, default=1800.0, metavar="SECONDS")
    c.add_argument("--format", choices=["text", "json"], default="text")
    c.add_argument(
        "--repo", default=".", metavar="DIR", help="the repository (default: the current directory)"
    )
    cli_args.add_no_sandbox(c)

    g = sub.add_parser("gates", help="run a contract's CHECK oracles and write its EVIDENCE")
    gsub = g.add_subparsers(dest="gates_command", metavar="run", required=True)
    r = gsub.add_parser(
        "run",
        help="run each CHECK, compare with EXPECT, write EVIDENCE",
        epilog=exitcodes.GATES.help(),
        formatter_class=fmt,
    )
    r.set_defaults(handler=cmd_gates)
    r.add_argument("contract", metavar="CONTRACT", help="the CONTRACT file (rewritten in place)")
    r.add_argument(
        "--repo",
        default=".",
        metavar="DIR",
        help="the repository the checks run in (default: the current directory)",
    )
    r.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="time limit per CHECK (default 120)",
    )
    cli_args.add_no_sandbox(r)

    sub.add_parser("floor-guard", help=FLOOR_HELP, add_help=False)


def cmd_contract(args: argparse.Namespace) -> int:
    from verify_dag import sandbox
    from verify_dag.contract_tool import render
    from verify_dag.reviewers.contract.verify import verify_contract

    if args.test:
        cli_args.refuse_unsandboxed(args.no_sandbox)
    with sandbox.tracking(unsandboxed=args.no_sandbox):
        verdict = verify_contract(
            Path(args.repo),
            Path(args.contract),
            args.diff,
            test=args.test,
            test_timeout=args.test_timeout,
            shown_path=args.contract,
        )
    cli_args.write_utf8(render.to_json(verdict) if args.format == "json" else render.text(verdict))
    if verdict.verdict == "ERROR":
        raise FatalError(verdict.error or "the contract could not be verified")
    return exitcodes.CONTRACT.code(verdict.verdict)


def cmd_gates(args: argparse.Namespace) -> int:
    """A contract that cannot be read is a usage error here (cli/exits.py)."""
    from verify_dag import git, sandbox
    from verify_dag.contract_tool import gates_run

    repo = git.toplevel(Path(args.repo))
    cli_args.refuse_unsandboxed(args.no_sandbox)
    with sandbox.tracking(unsandboxed=args.no_sandbox):
        outcomes = gates_run.run(Path(args.contract), repo, args.timeout)
    if not outcomes:
        cli_args.write_utf8("GATES: nothing to run: no criterion has a CHECK line\n")
        return 0
    failed = sum(o.status != "MET" for o in outcomes)
    lines = [f"GATE {o.number} {o.value}" for o in outcomes]
    lines.append(
        f"GATES: {len(outcomes)} checked, {len(outcomes) - failed} MET, {failed} NOT-MET;"
        f" EVIDENCE written to {args.contract}"
    )
    cli_args.write_utf8("\n".join(lines) + "\n")
    return 1 if failed else 0


# --- floor-guard: its own parser and exit codes -----------------------------------------------


def _floor_parser() -> argparse.ArgumentParser:
    p = cli_args.Parser(
        prog="verify-dag floor-guard",
        usage="%(prog)s [--contract PATH] BASE [-- PATHSPEC...]",
        description=FLOOR_HELP,
        epilog=exitcodes.FLOOR_GUARD.help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("base", metavar="BASE", help="the branch's base (develop; main for a hotfix)")
    p.add_argument(
        "--contract",
        metavar="PATH",
        help="the contract whose CLARIFICATIONS may waive findings (default: "
        "$VERIFY_DAG_CONTRACT; neither: no waivers)",
    )
    return p


def floor_guard(argv: list[str]) -> int:
    from verify_dag import git
    from verify_dag.reviewers.contract import floor, parse

    before, sep, after = (
        (argv[: argv.index("--")], True, argv[argv.index("--") + 1 :])
        if "--" in argv
        else (argv, False, [])
    )
    args = _floor_parser().parse_args(before)
    if sep and not after:
        raise UsageError("no PATHSPEC after --")
    cwd = Path.cwd()
    top = git.toplevel(cwd)
    if not git.valid_ref(args.base):
        raise UsageError(f"invalid BASE {args.base!r}")
    base = git.verify_commit(top, args.base)
    if base is None:
        raise UsageError(f"unknown BASE {args.base!r}: not a commit in {top}")
    head = git.verify_commit(top, "HEAD")
    if head is None:
        raise UsageError("HEAD does not name a commit (an empty repository?)")
    old = git.merge_base(top, base, head)
    if old is None:
        raise UsageError(f"BASE {args.base!r} and HEAD have no merge base")
    for spec in after:
        if not (git.pathspec_matches(cwd, old, spec) or git.pathspec_matches(cwd, head, spec)):
            raise UsageError(f"pathspec {spec!r} matches no file at BASE or HEAD")
    source = args.contract or os.environ.get("VERIFY_DAG_CONTRACT")
    clarifications = parse.read(Path(source)).clarifications if source else ""
    report = floor.guard(cwd, old, head, after, magic=True, clarifications=clarifications)
    cli_args.write_utf8("\n".join([f"FLOOR GUARD: {report.summary()}", *report.lines()]) + "\n")
    return exitcodes.FLOOR_GUARD.code("findings" if report.gaps else "clean")
