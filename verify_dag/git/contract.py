"""Diffs for the contract verifier and the floor guard (reviewers/contract/).

`floor-guard BASE -- PATHSPEC...` takes git pathspecs as git itself does (globs, `:(exclude)`,
relative to the directory it runs in), unlike the literal file lists of the pipeline; they still
only ever follow "--". Failures are raised with git's own reason, for one clean line on stderr."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from verify_dag.errors import UsageError
from verify_dag.git.core import DIFF_OPTS, command_env, first_fatal, pathspec, run_git
from verify_dag.git.parse import Delta, parse_name_status
from verify_dag.git.tree import empty_tree


def _spec_env(magic: bool) -> dict[str, str]:
    return command_env({"GIT_LITERAL_PATHSPECS": "0"}) if magic else command_env()


def _diff_or_raise(
    repo: str | Path, args: Sequence[str], pathspecs: Sequence[str], magic: bool
) -> str:
    res = run_git(
        repo, "diff", *args, *DIFF_OPTS, *pathspec(pathspecs), check=False, env=_spec_env(magic)
    )
    if res.returncode != 0:
        raise UsageError(f"git diff failed: {first_fatal(res, 'diff')}")
    return res.stdout


def unified_diff(
    repo: str | Path,
    old: str,
    new: str,
    pathspecs: Sequence[str] = (),
    *,
    magic: bool = False,
    context: int = 0,
) -> str:
    """The text patch ``old..new`` (renames followed, binary files named only)."""
    return _diff_or_raise(
        repo,
        [f"-U{context}", "-M", "--src-prefix=a/", "--dst-prefix=b/", old, new],
        pathspecs,
        magic,
    )


def changed_paths(
    repo: str | Path, old: str, new: str, pathspecs: Sequence[str] = (), *, magic: bool = False
) -> list[Delta]:
    """``git diff --name-status -M old new -- pathspecs``."""
    return parse_name_status(
        _diff_or_raise(repo, ["--name-status", "-z", "-M", old, new], pathspecs, magic)
    )


def pathspec_matches(repo: str | Path, commit: str, pathspec: str) -> bool:
    """Whether any file of ``commit`` matches ``pathspec`` (a git pathspec, magic allowed)."""
    res = run_git(
        repo,
        "diff",
        "--quiet",
        "--no-renames",
        *DIFF_OPTS,
        empty_tree(repo),
        commit,
        "--",
        pathspec,
        check=False,
        env=_spec_env(True),
    )
    if res.returncode in (0, 1):
        return res.returncode == 1
    raise UsageError(f"pathspec {pathspec!r}: {first_fatal(res, 'diff')}")
