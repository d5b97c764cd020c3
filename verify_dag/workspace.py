"""This host's workspace of a run: one checkout per commit, shared by every phase of the run.

Every phase of a run that reads the verified code (triage, static analysis, the tester, the
reviewers, the exerciser, the debugger at the base) used to make its own throwaway clone; on a
repository of thousands of files that is seconds per phase. Now the first phase on a host that
needs commit C makes ``<cache>/runs/<run id>/checkouts/<C>/tree`` (under a lock, so two phases
running side by side make it once) and every later phase of that run on that host reuses it.
The static tools see it read-only; what repository code writes there (a test suite's own files)
stays in the run's checkout, as it would in the developer's.

The run's directory goes when the run ends: the report task removes it on its host and asks
every other worker to do the same (:func:`release`, sent as a Celery broadcast by the task
side). A host that missed that (down at the time) removes run directories unused for
:data:`TTL` when a worker starts there (:func:`sweep`).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from verify_dag import git
from verify_dag.errors import FatalError, VerifyDagError
from verify_dag.files import file_lock
from verify_dag.paths import runs_root

log = logging.getLogger(__name__)

# Longer than any run may take (the longest queue time limit is two hours).
TTL = 24 * 3600.0
_READY = "ready"
# Checkouts begun ahead of a run's phases in this process (prefetch), by run id.
_EARLY: dict[str, list[threading.Thread]] = {}
_EARLY_LOCK = threading.Lock()
_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def root() -> Path:
    return runs_root()


def run_dir(run_id: str) -> Path:
    if not _SAFE.match(run_id) or run_id in (".", ".."):
        raise FatalError(f"not a run id: {run_id!r}")
    return root() / run_id


@contextmanager
def checkout(run_id: str, repo: str | Path, sha: str) -> Iterator[Path]:
    """The run's checkout of ``sha`` on this host, made on first use and kept until the run is
    released. Callers must not change it: other phases of the run read it too."""
    yield ensure(run_id, repo, sha)


def ensure(run_id: str, repo: str | Path, sha: str) -> Path:
    if not git.valid_ref(sha):
        raise FatalError(f"cannot check out {sha!r}: not a commit")
    home = run_dir(run_id) / "checkouts" / sha
    tree = home / "tree"
    home.mkdir(parents=True, exist_ok=True)
    with file_lock(home.with_name(f"{sha}.lock")):
        if not (home / _READY).is_file():
            # A checkout that died half-way is started again.
            shutil.rmtree(tree, ignore_errors=True)
            git.checkout_into(repo, sha, tree)
            (home / _READY).touch()
    _touch(run_dir(run_id))
    return tree


def prefetch(run_id: str, repo: str | Path, sha: str) -> threading.Thread:
    """Start making the run's checkout of ``sha`` (:func:`ensure`) in a thread of its own.

    For a caller that knows the commit a run will check out before any phase runs
    (:func:`check_out_ahead`): the CLI of an in-process run, before it imports Celery. git
    writes the files while this process imports the phases (on tomlkit's 1,112 files, 0.1-0.8 s
    of a re-verify that takes 2-3 s), and the first phase that needs the checkout finds it made,
    or waits for it under ``ensure``'s lock, instead of making it then. A checkout that fails
    here is left to that phase, which meets the same error where it is reported."""

    def make() -> None:
        try:
            ensure(run_id, repo, sha)
        except (VerifyDagError, OSError) as exc:
            log.debug("the early checkout of %s for run %s failed: %s", sha, run_id, exc)

    thread = threading.Thread(target=make, name=f"checkout-{sha[:12]}", daemon=True)
    with _EARLY_LOCK:
        _EARLY.setdefault(run_id, []).append(thread)
    thread.start()
    return thread


def check_out_ahead(
    run_id: str,
    repo: str | Path,
    *,
    scope: str | None,
    narrowed: bool,
    head: str | None,
    base: str | None,
) -> bool:
    """Begin the checkout a run of this request makes first (:func:`prefetch`) when it is known
    before the scope phase runs, and say whether it was begun. Only a branch scope's is: HEAD
    or ``head`` (scope.run's dispatch), where the other scopes, and a scope ``narrowed`` to
    files or a module, verify a snapshot that phase makes. A ref that names no commit (a
    repository without any, a mistyped base) begins nothing: the scope phase says why."""
    if scope != "branch" or narrowed:
        return False
    sha = git.verify_commit(repo, head or "HEAD")
    if sha is None or (base is not None and git.verify_commit(repo, base) is None):
        return False
    prefetch(run_id, repo, sha)
    return True


def home(workdir: Path) -> Path | None:
    """The directory beside a run's checkout (made by :func:`ensure`) where what is built from
    that checkout for the run lives, removed with it; None for any other directory."""
    try:
        tree = workdir.resolve()
        base = root().resolve()
    except OSError:
        return None
    if tree.name != "tree" or not tree.is_relative_to(base):
        return None
    parts = tree.relative_to(base).parts  # <run id>/checkouts/<sha>/tree
    return tree.parent if len(parts) == 4 and parts[1] == "checkouts" else None


def scratch(run_id: str, name: str) -> Path:
    """A directory of the run's on this host (made if missing), removed with the run."""
    path = run_dir(run_id) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def release(run_id: str) -> bool:
    """Remove the run's workspace on this host; whether there was one."""
    path = run_dir(run_id)
    with _EARLY_LOCK:
        early = _EARLY.pop(run_id, [])
    for thread in early:
        # A run that ended before its phases needed the checkout (a scope error) waits for
        # git to finish writing it, so that none of it lands after the removal.
        thread.join()
    if not path.exists():
        return False
    # Renamed first, so a phase that comes late (a redelivered task) never sees half a tree.
    gone = path.with_name(f".{path.name}.{os.getpid()}.gone")
    try:
        path.rename(gone)
    except OSError:
        gone = path
    shutil.rmtree(gone, ignore_errors=True)
    return True


def sweep(max_age: float = TTL) -> int:
    """Remove run workspaces unused for ``max_age`` seconds; how many went."""
    base = root()
    if not base.is_dir():
        return 0
    cutoff, removed = time.time() - max_age, 0
    for entry in base.iterdir():
        try:
            old = entry.stat().st_mtime < cutoff
        except FileNotFoundError:
            continue
        if old or entry.name.endswith(".gone"):
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def _touch(path: Path) -> None:
    with suppress(OSError):
        os.utime(path)
