"""``verify-dag restore``: put back the files the fixes of a run changed (docs/fixes.md)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    r = sub.add_parser(
        "restore",
        help="put the files a run's fixes changed back as they were before (HEAD, the index "
        "and the stash are not touched)",
    )
    r.set_defaults(handler=cmd_restore)
    r.add_argument("run_id", metavar="RUN_ID", help="the run whose fixes to undo")
    r.add_argument(
        "path", nargs="?", default=".", help="the repository (default: the current directory)"
    )


def cmd_restore(args: argparse.Namespace) -> int:
    from verify_dag import git, store
    from verify_dag.fixes import backup

    repo = git.toplevel(args.path)
    paths = backup.restore(repo, store.check_run_id(args.run_id))
    if not paths:
        print(f"Nothing to restore: the fixes of run {args.run_id} changed no file.")
        return 0
    print(f"Restored {len(paths)} file(s) from {backup.ref(args.run_id)}:")
    for p in paths:
        print(f"  {p}")
    return 0
