"""Repositories elsewhere: fetches, mirrors of repositories named by URL or path (fleet), and
bundles that carry a local state to a worker on another host."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from verify_dag import url_secrets
from verify_dag.errors import FatalError
from verify_dag.git.core import FETCH_TIMEOUT, first_fatal, run_git
from verify_dag.git.parse import valid_ref


def fetch(
    repo: str | Path, remote: str, refspec: str | None = None, timeout: float = FETCH_TIMEOUT
) -> tuple[bool, str]:
    """Fetch without prompting or hanging; returns (ok, reason)."""
    args = ["fetch", "--quiet", "--no-recurse-submodules", remote, *([refspec] if refspec else [])]
    res = run_git(repo, *args, check=False, timeout=timeout)
    if res.timed_out:
        return False, f"git fetch {remote} timed out after {timeout:g}s"
    if res.returncode != 0:
        return False, first_fatal(res, f"fetch {remote}")
    return True, ""


def remote_show_head_branch(
    repo: str | Path, remote: str, timeout: float = FETCH_TIMEOUT
) -> str | None:
    """The provider's default branch as ``git remote show REMOTE`` reports it."""
    res = run_git(repo, "remote", "show", remote, check=False, timeout=timeout)
    if res.returncode != 0:
        return None
    for line in res.stdout.splitlines():
        key, _, value = line.strip().partition(": ")
        if key == "HEAD branch" and value and value != "(unknown)" and valid_ref(value):
            return value
    return None


def remote_head(source: str, timeout: float = FETCH_TIMEOUT) -> str:
    """The commit HEAD points to in the repository at ``source`` (URL or path), read without a
    clone (``git ls-remote``). Raises FatalError with git's reason when it cannot be read."""
    res = run_git(
        tempfile.gettempdir(), "ls-remote", "--", source, "HEAD", check=False, timeout=timeout
    )
    if res.timed_out:
        raise FatalError(f"git ls-remote {source} timed out after {timeout:g}s")
    if res.returncode != 0:
        raise FatalError(f"cannot read {source}: {first_fatal(res, 'ls-remote')}")
    for line in res.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if ref == "HEAD" and valid_ref(sha):
            return sha
    raise FatalError(f"cannot read {source}: it has no HEAD commit (empty repository?)")


CLONE_TIMEOUT = 1800.0  # a first mirror of a big repository


def display_source(source: str) -> str:
    """``source`` safe to show (Flower, reports, logs): its credentials masked
    (:func:`verify_dag.url_secrets.mask`)."""
    return url_secrets.mask(source)


def clone_mirror(source: str, dest: Path, timeout: float = CLONE_TIMEOUT) -> None:
    """A bare mirror of ``source`` (every ref), never garbage-collected on its own: throwaway
    checkouts borrow its objects through alternates, so gc must not prune them underneath."""
    res = run_git(
        dest.parent,
        "clone",
        "--mirror",
        "--quiet",
        "--no-hardlinks",
        "-c",
        "gc.auto=0",
        "--",
        source,
        str(dest),
        check=False,
        timeout=timeout,
    )
    if res.timed_out:
        raise FatalError(f"git clone {display_source(source)} timed out after {timeout:g}s")
    if res.returncode != 0:
        raise FatalError(f"cannot mirror {display_source(source)}: {first_fatal(res, 'clone')}")


def fetch_mirror(mirror: Path, timeout: float = CLONE_TIMEOUT) -> tuple[bool, str]:
    """Bring a mirror up to date (new commits, moved and deleted refs); returns (ok, reason)."""
    res = run_git(mirror, "fetch", "--prune", "--quiet", "origin", check=False, timeout=timeout)
    if res.timed_out:
        return False, f"git fetch timed out after {timeout:g}s"
    return res.returncode == 0, "" if res.returncode == 0 else first_fatal(res, "fetch")


def create_bundle(repo: str | Path, dest: Path, pins: Mapping[str, str]) -> None:
    """A bundle of every ref of ``repo`` plus ``pins`` (name -> commit) as
    ``refs/verify-dag/<name>``: what a worker on another host needs to verify a local state.

    The pins are unreferenced snapshot commits; a bundle only carries named refs, and the
    user's repository must not get refs of ours, so the refs are made in a shared mirror clone
    that borrows the repository's objects and is thrown away.
    """
    scratch = Path(tempfile.mkdtemp(prefix="verify-dag-bundle-"))
    try:
        tmp = scratch / "repo.git"
        run_git(
            scratch,
            "clone",
            "--mirror",
            "--shared",
            "--quiet",
            "--",
            str(Path(repo).resolve()),
            str(tmp),
        )
        for name, sha in pins.items():
            run_git(tmp, "update-ref", f"refs/verify-dag/{name}", sha)
        run_git(tmp, "bundle", "create", "--quiet", str(dest), "--all", timeout=CLONE_TIMEOUT)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def init_from_bundle(bundle: Path, dest: Path) -> None:
    """A bare repository holding every ref of ``bundle``."""
    run_git(dest.parent, "init", "--bare", "--quiet", str(dest))
    run_git(dest, "config", "gc.auto", "0")
    res = run_git(
        dest, "fetch", "--quiet", str(bundle), "+refs/*:refs/*", check=False, timeout=CLONE_TIMEOUT
    )
    if res.returncode != 0:
        raise FatalError(f"cannot read the run's bundle {bundle}: {first_fatal(res, 'fetch')}")
    # A fetch does not carry HEAD over; the user's HEAD is what "the repository" means.
    for line in run_git(dest, "bundle", "list-heads", str(bundle), "HEAD").stdout.splitlines():
        sha, _, ref = line.partition(" ")
        if ref == "HEAD" and valid_ref(sha):
            run_git(dest, "update-ref", "--no-deref", "HEAD", sha)
