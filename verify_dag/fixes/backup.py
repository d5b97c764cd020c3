"""The user's work is never lost: before Phase 9 changes a file, the work tree and the index are
kept as a commit under ``refs/verify-dag/backups/<run id>`` (parents HEAD and the staged state, as
``git stash create`` makes them, but no stash entry), and ``verify-dag restore <run id>`` puts the
files the fixes touched back as they were, in the index too where the fixes of a staged change
staged them. HEAD and the stash are never touched."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from verify_dag import git
from verify_dag.errors import UsageError

PREFIX = "refs/verify-dag/backups/"
_TOUCHED = "Touched: "
_STAGED = "Staged: "


def ref(run_id: str) -> str:
    return PREFIX + run_id


def keep(repo: Path, run_id: str) -> str:
    """Make the backup of ``repo``'s work tree and index; returns its ref."""
    sha = git.backup_commit(repo, f"verify-dag: backup before the fixes of run {run_id}")
    git.update_ref(repo, ref(run_id), sha)
    return ref(run_id)


def note_touched(repo: Path, run_id: str, paths: Sequence[str], staged: Sequence[str] = ()) -> None:
    """Record in the backup which files the fixes wrote, and which of them they staged (a
    staged change's fixes): ``restore`` puts back those only."""
    sha = _backup(repo, run_id)
    said = _listed(repo, run_id)
    new = [_TOUCHED + p for p in paths] + [_STAGED + p for p in staged]
    new = [line for line in new if line not in said]
    if not new:
        return
    message = git.commit_message(repo, sha).rstrip("\n")
    sep = "\n" if said else "\n\n"
    lines = "\n".join(new)
    git.update_ref(repo, ref(run_id), git.recommit(repo, sha, f"{message}{sep}{lines}\n"))


def _listed(repo: Path, run_id: str) -> list[str]:
    message = git.commit_message(repo, _backup(repo, run_id))
    return [line for line in message.splitlines() if line.startswith((_TOUCHED, _STAGED))]


def touched(repo: Path, run_id: str) -> list[str]:
    return [line[len(_TOUCHED) :] for line in _listed(repo, run_id) if line.startswith(_TOUCHED)]


def staged(repo: Path, run_id: str) -> list[str]:
    return [line[len(_STAGED) :] for line in _listed(repo, run_id) if line.startswith(_STAGED)]


def restore(repo: Path, run_id: str) -> list[str]:
    """Put the files the fixes of ``run_id`` touched back as the backup has them (in the index
    too, for those the fixes staged); returns them."""
    paths = touched(repo, run_id)
    restore_paths(repo, run_id, paths)
    return paths


def restore_paths(repo: Path, run_id: str, paths: list[str]) -> None:
    sha = _backup(repo, run_id)
    git.restore_worktree(repo, sha, paths)
    in_index = [p for p in staged(repo, run_id) if p in paths]
    if in_index:
        # The backup's second parent is the index as it was (the first, HEAD, when nothing
        # was staged then).
        source = git.verify_commit(repo, f"{sha}^2") or f"{sha}^1"
        git.restore_index(repo, source, in_index)


def _backup(repo: Path, run_id: str) -> str:
    sha = git.verify_commit(repo, ref(run_id))
    if sha is None:
        raise UsageError(
            f"no backup of run {run_id} in {repo} ({ref(run_id)}): only a run that changed "
            "files keeps one"
        )
    return sha
