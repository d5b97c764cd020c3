"""The user's work is never lost: before Phase 9 changes a file, the work tree and the index are
kept as a commit under ``refs/verify-dag/backups/<run id>`` (parents HEAD and the staged state, as
``git stash create`` makes them, but no stash entry), and ``verify-dag restore <run id>`` puts the
files the fixes touched back as they were. HEAD, the index and the stash are never touched."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from verify_dag import git
from verify_dag.errors import UsageError

PREFIX = "refs/verify-dag/backups/"
_TOUCHED = "Touched: "


def ref(run_id: str) -> str:
    return PREFIX + run_id


def keep(repo: Path, run_id: str) -> str:
    """Make the backup of ``repo``'s work tree and index; returns its ref."""
    sha = git.backup_commit(repo, f"verify-dag: backup before the fixes of run {run_id}")
    git.update_ref(repo, ref(run_id), sha)
    return ref(run_id)


def note_touched(repo: Path, run_id: str, paths: Sequence[str]) -> None:
    """Record in the backup which files the fixes wrote: ``restore`` puts back those only."""
    sha = _backup(repo, run_id)
    said = touched(repo, run_id)
    new = [p for p in paths if p not in said]
    if not new:
        return
    message = git.commit_message(repo, sha).rstrip("\n")
    lines = "\n".join(_TOUCHED + p for p in new)
    sep = "\n" if said else "\n\n"
    git.update_ref(repo, ref(run_id), git.recommit(repo, sha, f"{message}{sep}{lines}\n"))


def touched(repo: Path, run_id: str) -> list[str]:
    message = git.commit_message(repo, _backup(repo, run_id))
    return [line[len(_TOUCHED) :] for line in message.splitlines() if line.startswith(_TOUCHED)]


def restore(repo: Path, run_id: str) -> list[str]:
    """Put the files the fixes of ``run_id`` touched back as the backup has them; returns them."""
    paths = touched(repo, run_id)
    git.restore_worktree(repo, _backup(repo, run_id), paths)
    return paths


def restore_paths(repo: Path, run_id: str, paths: list[str]) -> None:
    git.restore_worktree(repo, _backup(repo, run_id), paths)


def _backup(repo: Path, run_id: str) -> str:
    sha = git.verify_commit(repo, ref(run_id))
    if sha is None:
        raise UsageError(
            f"no backup of run {run_id} in {repo} ({ref(run_id)}): only a run that changed "
            "files keeps one"
        )
    return sha
