"""Uncommitted states captured as commits, throwaway checkouts of commits, and the diff-only
workspace the codex reviewer reads.

Snapshots use a temporary index file, so the user's index and work tree are never written."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from verify_dag.errors import CalledProcessError, FatalError
from verify_dag.git.core import DIFF_OPTS, IDENTITY, command_env, pathspec, run_git
from verify_dag.git.parse import valid_ref
from verify_dag.git.refs import head, rev_parse


@contextmanager
def temp_index(repo: str | Path) -> Iterator[dict[str, str]]:
    """An environment whose GIT_INDEX_FILE is a throwaway copy of the user's index: the one git
    itself is using when verify-dag runs inside a git hook (``git commit -a`` and ``git commit
    PATHS`` hand their hooks a temporary index of what is being committed, in GIT_INDEX_FILE),
    else the repository's own."""
    src = Path(run_git(repo, "rev-parse", "--git-path", "index").stdout.strip())
    src = src if src.is_absolute() else Path(repo) / src
    hooked = _hook_index(repo)
    src = hooked if hooked is not None else src
    with tempfile.TemporaryDirectory(prefix="verify-dag-index-") as tmp:
        copy = Path(tmp) / "index"
        if src.exists():
            # copy2 keeps the index's mtime: git treats an entry as "racily clean" (and compares
            # content, not just stat data) by comparing file mtimes with the index's own. A fresh
            # mtime would hide a same-size edit made in the second of the last index write.
            shutil.copy2(src, copy)
        yield command_env({"GIT_INDEX_FILE": str(copy), **IDENTITY})


def _hook_index(repo: str | Path) -> Path | None:
    """The index GIT_INDEX_FILE names, when it is one of ``repo``'s (inside its git directory,
    where git puts the ones it hands its hooks); a path is read from the current directory, as
    git reads it."""
    named = os.environ.get("GIT_INDEX_FILE", "").strip()
    if not named:
        return None
    path = Path(named).resolve()
    git_dir = Path(run_git(repo, "rev-parse", "--absolute-git-dir").stdout.strip()).resolve()
    return path if path.is_file() and path.is_relative_to(git_dir) else None


def commit_tree(repo: str | Path, tree: str, parent: str, message: str) -> str:
    # An unchanged state is the parent itself: callers can then compare SHAs to find "no change".
    if rev_parse(repo, f"{parent}^{{tree}}") == tree:
        return parent
    env = command_env(IDENTITY)
    return run_git(repo, "commit-tree", tree, "-p", parent, "-m", message, env=env).stdout.strip()


def snapshot_index(repo: str | Path) -> str:
    """Commit of the staged state (parent HEAD), or HEAD when nothing is staged."""
    with temp_index(repo) as env:
        try:
            tree = run_git(repo, "write-tree", env=env).stdout.strip()
        except CalledProcessError as exc:
            raise FatalError(
                "cannot snapshot the index: " + exc.message, hint="resolve merge conflicts first"
            ) from exc
    return commit_tree(repo, tree, head(repo), "verify-dag: index snapshot")


def snapshot_worktree(repo: str | Path, parent: str) -> str:
    """Commit of the work tree including untracked, non-ignored files, or ``parent`` if equal."""
    with temp_index(repo) as env:
        run_git(repo, "add", "-A", env=env)
        tree = run_git(repo, "write-tree", env=env).stdout.strip()
    return commit_tree(repo, tree, parent, "verify-dag: work tree snapshot")


@contextmanager
def worktree(repo: str | Path, sha: str) -> Iterator[Path]:
    """A throwaway detached checkout of ``sha``, removed on exit (see :func:`checkout_into`).
    The pipeline's phases share one per commit instead (verify_dag/workspace.py)."""
    parent = Path(tempfile.mkdtemp(prefix="verify-dag-wt-"))
    try:
        yield checkout_into(repo, sha, parent / "tree")
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def checkout_into(repo: str | Path, sha: str, path: Path) -> Path:
    """A detached checkout of ``sha`` at ``path`` (which must not exist yet); returns ``path``.

    It is a ``clone --shared`` (objects borrowed through alternates, so snapshot commits that no
    ref names are there too), not a ``git worktree``: linked worktrees keep their admin files in
    the repository, and concurrent ``worktree add``/``remove`` on one repository race in git
    itself (one reads another's half-written ``.git/worktrees/*`` and fails). Parallel phases
    and runs check out the same repository all the time; a shared clone only reads it.
    """
    if not valid_ref(sha):  # a caller's bug (an empty new_commit), not the user's input
        raise FatalError(f"cannot check out {sha!r}: not a commit")
    run_git(
        path.parent,
        "clone",
        "--shared",
        "--no-checkout",
        "--quiet",
        "--",
        str(Path(repo).resolve()),
        str(path),
    )
    # No post-checkout hook or smudge filter runs here either (core._no_programs). Git's parallel
    # checkout, one worker per core, from 100 files up (checkout.thresholdForParallelism):
    # tomlkit's 1,112 files in 0.07-0.09 s instead of 0.11-0.12 s here.
    run_git(
        path,
        *("-c", "advice.detachedHead=false", "-c", "checkout.workers=0"),
        *("checkout", "--detach", "--quiet", sha),
    )
    return path


def _load_index(ws: Path, repo: str | Path, commit: str | None, paths: Sequence[str]) -> None:
    """Make ``ws``'s index hold exactly ``paths`` as they are in ``commit`` of ``repo``."""
    run_git(ws, "read-tree", "--empty")
    if commit is None or not paths:
        return
    listing = run_git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, *pathspec(paths)).stdout
    if listing:
        # update-index --index-info takes ls-tree's own output format.
        res = run_git(
            ws,
            "update-index",
            "-z",
            "--index-info",
            check=False,
            input_data=listing.encode("utf-8", "surrogateescape"),
        )
        if res.returncode != 0:
            raise FatalError(f"git update-index failed: {res.stderr.strip()[:200]}")


@contextmanager
def diff_workspace(
    repo: str | Path, old: str | None, new: str, old_paths: Sequence[str], new_paths: Sequence[str]
) -> Iterator[tuple[Path, str]]:
    """A throwaway repository where ``git diff HEAD`` is exactly the scoped diff.

    HEAD holds the old side of ``old_paths``; the index and work tree hold the new side of
    ``new_paths``. Objects come from ``repo`` through an alternates file, so nothing is copied
    and ``repo`` is only read. Yields the workspace and its ``git diff --cached`` patch, for the
    caller to compare with :func:`patch` before trusting it.
    """
    parent = Path(tempfile.mkdtemp(prefix="verify-dag-diff-"))
    ws = parent / "workspace"
    try:
        run_git(parent, "init", "-q", str(ws))
        common = run_git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout
        alternates = ws / ".git" / "objects" / "info" / "alternates"
        alternates.write_text(str(Path(common.strip()) / "objects") + "\n", encoding="utf-8")
        _load_index(ws, repo, old, old_paths)
        base_tree = run_git(ws, "write-tree").stdout.strip()
        base = run_git(
            ws, "commit-tree", base_tree, "-m", "verify-dag: scoped base", env=command_env(IDENTITY)
        ).stdout.strip()
        run_git(ws, "update-ref", "HEAD", base)
        _load_index(ws, repo, new, new_paths)
        run_git(ws, "checkout-index", "--all", "--force")
        got = run_git(
            ws, "diff", "--cached", "--binary", "--full-index", "-M", *DIFF_OPTS, "HEAD"
        ).stdout
        yield ws, got
    finally:
        shutil.rmtree(parent, ignore_errors=True)
