"""Diffs between two commits of the scope's literal file lists."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from verify_dag.git.core import DIFF_OPTS, pathspec, run_git
from verify_dag.git.parse import (
    Delta,
    parse_file_hunks,
    parse_hunk_pairs,
    parse_hunks,
    parse_name_status,
    parse_numstat_binary,
)
from verify_dag.git.tree import empty_tree


def _renames(renames: bool) -> str:
    return "-M" if renames else "--no-renames"


def name_status(
    repo: str | Path, old: str, new: str, paths: Sequence[str] = (), renames: bool = True
) -> list[Delta]:
    out = run_git(
        repo,
        "diff",
        "--name-status",
        "-z",
        _renames(renames),
        *DIFF_OPTS,
        old,
        new,
        *pathspec(paths),
    ).stdout
    return parse_name_status(out)


def binary_paths(
    repo: str | Path, old: str, new: str, paths: Sequence[str] = (), renames: bool = True
) -> set[str]:
    """New-side paths that ``git diff --numstat`` reports as binary (``-\\t-``)."""
    out = run_git(
        repo, "diff", "--numstat", "-z", _renames(renames), *DIFF_OPTS, old, new, *pathspec(paths)
    ).stdout
    return parse_numstat_binary(out)


def line_ranges(
    repo: str | Path, old: str, new: str, paths: Sequence[str] = (), renames: bool = True
) -> dict[str, list[tuple[int, int]]]:
    out = run_git(
        repo,
        "diff",
        "-U0",
        _renames(renames),
        *DIFF_OPTS,
        "--src-prefix=a/",
        "--dst-prefix=b/",
        old,
        new,
        *pathspec(paths),
    ).stdout
    return parse_hunks(out)


def diff_stat(
    repo: str | Path, old: str, new: str, paths: Sequence[str] = (), renames: bool = True
) -> str:
    return run_git(
        repo, "diff", "--stat=200", _renames(renames), *DIFF_OPTS, old, new, *pathspec(paths)
    ).stdout


def patch(repo: str | Path, old: str | None, new: str, paths: Sequence[str]) -> str:
    """The exact patch of ``paths`` between two commits (``old`` None: from the empty tree)."""
    base = old if old is not None else empty_tree(repo)
    return run_git(
        repo, "diff", "--binary", "--full-index", "-M", *DIFF_OPTS, base, new, *pathspec(paths)
    ).stdout


def file_hunks(
    repo: str | Path, old: str, old_path: str, new: str, new_path: str
) -> list[tuple[int, int, int, int]]:
    """``(old_start, old_count, new_start, new_count)`` of every ``-U0`` hunk between
    ``old_path`` at ``old`` and ``new_path`` at ``new``: git's alignment of the two files' lines,
    the one the scope's changed lines come from, whatever their names (a rename is compared with
    its source). Both are compared as text (``--text``), as their lines are read."""
    out = run_git(
        repo, "diff", "-U0", "--text", *DIFF_OPTS, f"{old}:{old_path}", f"{new}:{new_path}"
    ).stdout
    return parse_hunk_pairs(out)


def path_hunks(
    repo: str | Path, old: str, new: str, paths: Sequence[str]
) -> dict[str, list[tuple[int, int, int, int]]]:
    """The ``-U0`` hunks of each of ``paths`` between two commits, each compared with itself
    (no renames) as text, in one git process: ``file_hunks`` for every path at once."""
    if not paths:
        return {}
    out = run_git(
        repo,
        "diff",
        "-U0",
        "--text",
        "--no-renames",
        *DIFF_OPTS,
        "--src-prefix=a/",
        "--dst-prefix=b/",
        old,
        new,
        *pathspec(paths),
    ).stdout
    found = parse_file_hunks(out)
    return {p: found.get(p, []) for p in paths}
