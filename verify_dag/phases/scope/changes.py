"""The file changes between two commits, as a Scope lists them: status, rename source, binary
or not, and the added or modified line ranges; and the --since delta of a ledger run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from verify_dag import git
from verify_dag.models.scope import FileChange, FileStatus, LineRange, Scope, ScopeError

_STATUS: dict[str, FileStatus] = {
    "A": "added",
    "M": "modified",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "type-changed",
}
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def between(
    repo: str, old: str, new: str, paths: Sequence[str] = (), renames: bool = True
) -> tuple[FileChange, ...]:
    """What changed from ``old`` to ``new`` (under ``paths``), one FileChange per file."""
    deltas = git.name_status(repo, old, new, paths, renames)
    if not deltas:
        return ()
    binary = git.binary_paths(repo, old, new, paths, renames)
    ranges = git.line_ranges(repo, old, new, paths, renames)
    out = []
    for d in deltas:
        status = _STATUS.get(d.status, "modified")
        lines: tuple[LineRange, ...] | None
        if status == "deleted":
            lines = ()
        elif status in ("added", "type-changed"):
            lines = None  # the entire new file is new code
        else:
            lines = tuple(LineRange(start=a, end=b) for a, b in ranges.get(d.path, ()))
        out.append(
            FileChange(
                path=d.path,
                status=status,
                old_path=d.old_path,
                binary=d.path in binary,
                lines=lines,
            )
        )
    return tuple(out)


def path_filter(changes: Sequence[FileChange]) -> tuple[str, ...]:
    # Old paths of renames belong in the filter: without them `git diff -- paths` shows an add.
    paths = [c.path for c in changes] + [c.old_path for c in changes if c.old_path]
    return tuple(dict.fromkeys(paths))


def with_delta(repo: str, scope: Scope, since: str) -> Scope:
    """``scope`` with the files changed since the ledger's ``since`` commit."""
    if scope.error or scope.nothing_to_verify:
        return scope
    resolved = git.verify_commit(repo, since)
    if resolved is None:
        error = ScopeError(code="INVALID_SINCE", message=f"--since {since!r} is not a commit")
        return scope.model_copy(update={"error": error})
    return scope.model_copy(
        update={
            "delta_base_sha": since if _FULL_SHA.fullmatch(since) else resolved,
            "delta_files": between(repo, resolved, scope.new_commit),
        }
    )
