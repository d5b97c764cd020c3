"""History, hunks and searches at a commit, for shadow verification (verify_dag/shadow)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from verify_dag.errors import CalledProcessError
from verify_dag.git.core import DIFF_OPTS, GIT_TIMEOUT, pathspec, run_git
from verify_dag.git.parse import parse_grep_z, parse_hunk_pairs, valid_ref


def last_change(
    repo: str | Path, commit: str, path: str, timeout: float = GIT_TIMEOUT
) -> str | None:
    """The newest commit reachable from ``commit`` that touched ``path`` (added, changed or
    deleted it), or None when no commit ever did: the path never existed in that history."""
    if not valid_ref(commit):
        return None
    res = run_git(
        repo, "log", "-1", "--format=%H", commit, "--", path, check=False, timeout=timeout
    )
    return res.stdout.strip() or None if res.returncode == 0 else None


def hunk_pairs(
    repo: str | Path, old: str, new: str, path: str, timeout: float = GIT_TIMEOUT
) -> list[tuple[int, int, int, int]]:
    """``(old_start, old_count, new_start, new_count)`` of every ``-U0`` hunk of ``path``
    between two commits (renames are not followed: a moved file is a deletion here)."""
    out = run_git(
        repo, "diff", "-U0", "--no-renames", *DIFF_OPTS, old, new, "--", path, timeout=timeout
    ).stdout
    return parse_hunk_pairs(out)


def grep_word(
    repo: str | Path,
    commit: str,
    word: str,
    paths: Sequence[str] = (),
    timeout: float = GIT_TIMEOUT,
) -> list[tuple[str, int, str]]:
    """``(path, line, text)`` of every whole-word, fixed-string match of ``word`` in the text
    files of ``commit`` (``git grep -w -F -I``), optionally only under ``paths``."""
    if not valid_ref(commit) or not word:
        return []
    res = run_git(
        repo,
        "grep",
        "-n",
        "-z",
        "-w",
        "-F",
        "-I",
        "--no-color",
        "-e",
        word,
        commit,
        *pathspec(paths) or ["--"],
        check=False,
        timeout=timeout,
    )
    if res.returncode == 1:  # git grep: 1 means "no match"
        return []
    if res.returncode != 0:
        raise CalledProcessError(["git", "grep", word], res.returncode, res.stderr)
    return parse_grep_z(res.stdout, commit)
