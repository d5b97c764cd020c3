"""The ``verify-dag`` command line: ``main(argv) -> int``, and ``entry()``, the console script's
way in, which ends the process with main's code.

One module per command group, each building its own parser and holding its handlers; what they
share is in ``args``; every error that ends a command is mapped to its exit code by ``exits``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from verify_dag.cli import exits
from verify_dag.errors import UsageError

# Commands that parse their own command line: their specifications fix exit codes for usage
# errors (3) that the shared parser's (2) would override.
OWN_PARSER = ("arbiter", "floor-guard")


def _own_parser(command: str) -> Callable[[list[str]], int]:
    from verify_dag.cli import arbiter, contract

    return arbiter.main if command == "arbiter" else contract.floor_guard


def build_parser() -> argparse.ArgumentParser:
    # The command groups are imported here, not with the package: `--version` needs none.
    from verify_dag.cli import (
        arbiter,
        completion,
        config,
        contract,
        fixes,
        fleet,
        metrics,
        runs,
        shadow,
        verify,
        worker,
    )
    from verify_dag.cli.args import Parser

    parser = Parser(
        prog="verify-dag",
        description="Verify a code change before calling it done.",
        epilog=verify.EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=Parser, metavar="COMMAND"
    )
    # In this order in `verify-dag --help`.
    for group in (
        verify,
        fixes,
        worker,
        runs,
        config,
        metrics,
        fleet,
        completion,
        arbiter,
        contract,
        shadow,
    ):
        group.add_parsers(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("verify-dag")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    return exits.run(argv[0] if argv else None, lambda: _dispatch(argv))


def entry() -> NoReturn:
    """``verify-dag`` and ``python -m verify_dag.cli``: main() on the process's arguments, then
    the process ends without Python's teardown (:func:`exits.leave`). Tests call main()."""
    exits.leave(main())


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in OWN_PARSER:
        return _own_parser(argv[0])(argv[1:])
    if argv == ["--version"]:
        # What the parser would print, without importing every command group to build it.
        print(f"verify-dag {_version()}")
        return 0
    parser = build_parser()
    if not argv:
        raise UsageError(
            "no command given: try `verify-dag verify` in a repository, or "
            "`verify-dag --help` for every command"
        )
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)
