"""Where a run's repository comes from, on the client and on each worker.

A run names its repository by path or URL. Workers share nothing with the client but the broker
(and, for reports and bundles, the report store):

- **URL**: each worker keeps its own bare mirror of the repository under the mirrors directory
  (``$VERIFY_DAG_MIRRORS``, default ``~/.cache/verify-dag/mirrors``), fetched when the scope
  phase starts and whenever a task needs a commit it lacks.
- **Local path, submitted to a broker**: the client pins the index and work tree as snapshot
  commits and ships them, with the repository's refs, as a git bundle stored with the run
  (``<store>/<run id>/snapshot.bundle``). Each worker unbundles it once into a repository of its
  own for that run, so a worker on another host verifies exactly what the user had.
- **Local path, embedded**: the in-process worker reads the repository where it is.

Every phase task calls :func:`localize` first and works on the copy it returns; throwaway
checkouts are then made from that copy (``git.worktree``). Creation and fetches of one copy are
serialised across the worker's processes with a file lock.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from verify_dag import git, store, url_secrets
from verify_dag.errors import FatalError, UsageError
from verify_dag.files import file_lock
from verify_dag.models import RepoSource, RunState, Snapshot, VerifyRequest

MIRRORS_ENV = "VERIFY_DAG_MIRRORS"
BUNDLE = "snapshot.bundle"
_READY = "verify-dag-ready"
# A run's unbundled copy outlives any run (the longest time limit is two hours), then it goes.
RUN_COPY_TTL = 2 * 24 * 3600.0
_URL_ONLY_SCOPES = ("all", "branch")
# Where operators read how workers reach private repositories without a secret in the URL.
ACCESS_DOC = 'ops/README.md "Repository access"'


# --- credentials: refused before anything is sent or stored (docs/security.md) -------------------


def refuse_credentials(source: RepoSource, named: str | None = None) -> None:
    """Raise UsageError when repository ``source`` (a URL; paths pass) carries a password or a
    token: the run state holds the URL, and the state reaches the broker, the results, the
    workers' logs, Flower and the store. Workers use credentials of their own instead.
    ``named`` is what the message calls the source when it already shows it (a fleet entry)."""
    if not source.remote:
        return
    kind = url_secrets.credentials(source.location)
    if kind is not None:
        subject = f"{named}: its url" if named else url_secrets.mask(source.location)
        raise UsageError(
            f"{subject} carries {kind}; a repository URL with credentials is refused so that "
            "they never reach the broker, results, logs or reports",
            hint="name it without them and give the workers their own access: a git "
            f"credential helper or a deploy key on the worker hosts, see {ACCESS_DOC}",
        )


# --- client side -----------------------------------------------------------------------------


def prepare(request: VerifyRequest, run_id: str) -> VerifyRequest:
    """The request as it is shipped to a broker: a local repository gets its snapshot and bundle.

    ``request.repo`` is the top level of a validated local repository, or the source is remote.
    """
    if request.source.remote:
        # The callers already refused it; a request built elsewhere must not slip through.
        refuse_credentials(request.source)
        return request
    repo = request.repo
    head = git.head(repo)
    index = git.snapshot_index(repo)
    snap = Snapshot(
        head=head,
        index=index,
        worktree=git.snapshot_worktree(repo, index),
        untracked=tuple(p.rstrip("/") for p in git.untracked(repo)),
    )
    run_dir = store.resolve(request.store) / store.check_run_id(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    bundle = run_dir / BUNDLE
    pins = {"head": snap.head, "index": snap.index, "worktree": snap.worktree}
    if request.head is not None and git.verify_commit(repo, request.head) is not None:
        pins["range-head"] = request.head  # --head: a commit no ref may name
    git.create_bundle(repo, bundle, pins)
    return request.model_copy(update={"snapshot": snap, "bundle": str(bundle)})


def check_url_scope(request: VerifyRequest) -> None:
    """A URL has no work tree: only whole-repository and branch scopes make sense for it."""
    if request.files or request.module is not None or request.scope not in _URL_ONLY_SCOPES:
        given = (
            "--files"
            if request.files
            else "--module"
            if request.module is not None
            else f"--scope={request.scope}"
            if request.scope
            else "auto-detection"
        )
        raise UsageError(
            f"{given} needs a local checkout; a repository named by URL is "
            "verified with --scope=all or --scope=branch"
        )


# --- worker side -----------------------------------------------------------------------------


def mirrors_dir() -> Path:
    explicit = os.environ.get(MIRRORS_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(cache) / "verify-dag" / "mirrors"


def localize(state: RunState) -> RunState:
    """``state`` with ``request.repo`` naming this host's copy of the run's repository, holding
    every commit the run has resolved so far. Raises FatalError when there is none."""
    req = state.request
    if req.bundle is not None:
        local = run_copy(state.run_id, req.store, req.bundle)
    elif req.source.remote:
        need = [c for c in _commits(state) if c]
        local = mirror(req.source.location, refresh=state.scope is None, need=need)
    else:
        if not Path(req.repo).is_dir():
            raise FatalError(
                f"repository {req.repo} does not exist on {_host()}",
                hint="submit local repositories from the client that has them",
            )
        return state
    return state.model_copy(update={"request": req.model_copy(update={"repo": str(local)})})


def for_commit(run_id: str, req: VerifyRequest, commit: str) -> Path:
    """This host's copy of a finished run's repository holding ``commit`` (Phase 9's proposals
    read the commit the run verified)."""
    if req.bundle is not None:
        return run_copy(run_id, req.store, req.bundle)
    if req.source.remote:
        return mirror(req.source.location, refresh=False, need=[commit])
    if not Path(req.repo).is_dir():
        raise FatalError(f"repository {req.repo} does not exist on {_host()}")
    return Path(req.repo)


def _commits(state: RunState) -> list[str | None]:
    sc = state.scope
    if sc is None:
        return []
    return [sc.new_commit, sc.old_commit, sc.merge_base]


def mirror(url: str, *, refresh: bool, need: list[str]) -> Path:
    """This worker's mirror of ``url``: made on first use, fetched when ``refresh`` or when a
    commit in ``need`` is missing."""
    root = mirrors_dir()
    path = root / f"{_slug(url)}-{hashlib.sha256(url.encode()).hexdigest()[:16]}.git"
    with _locked(path):
        if not (path / _READY).is_file():
            shutil.rmtree(path, ignore_errors=True)  # a clone that died half-way
            git.clone_mirror(url, path)
            (path / _READY).touch()
        elif refresh or _missing(path, need):
            ok, why = git.fetch_mirror(path)
            if not ok and refresh and not need:
                # The scope phase decides what HEAD is: an old mirror would verify old code.
                raise FatalError(f"cannot update the mirror of {git.display_source(url)}: {why}")
    missing = _missing(path, need)
    if missing:
        raise FatalError(
            f"{git.display_source(url)} has no commit {missing[0]} (was it force-pushed away?)"
        )
    return path


def run_copy(run_id: str, store_dir: str | None, bundle: str | None) -> Path:
    """This worker's repository for a run shipped as a bundle (``bundle`` where the client put
    it, ``store_dir`` the run's report store), unbundled once per worker host."""
    root = mirrors_dir() / "runs"
    path = root / f"{store.check_run_id(run_id)}.git"
    with _locked(path):
        if not (path / _READY).is_file():
            shutil.rmtree(path, ignore_errors=True)
            _sweep(root)
            git.init_from_bundle(find_bundle(run_id, store_dir, bundle), path)
            (path / _READY).touch()
    return path


def find_bundle(run_id: str, store_dir: str | None, bundle: str | None) -> Path:
    """The run's bundle: in this host's view of the report store, else where the client put it
    (the same path on a shared mount)."""
    candidates = [store.resolve(store_dir) / run_id / BUNDLE]
    if bundle is not None:
        candidates.append(Path(bundle))
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FatalError(
        f"the snapshot bundle of run {run_id} is not on {_host()} (looked in "
        f"{', '.join(str(c) for c in dict.fromkeys(candidates))})",
        hint="the client and the workers must share the report store (VERIFY_DAG_STORE)",
    )


def _missing(repo: Path, need: list[str]) -> list[str]:
    return [sha for sha in need if git.verify_commit(repo, sha) is None]


def _sweep(root: Path) -> None:
    """Remove run copies older than RUN_COPY_TTL; their runs are long over."""
    cutoff = time.time() - RUN_COPY_TTL
    for old in root.glob("*.git"):
        try:
            if old.stat().st_mtime < cutoff:
                shutil.rmtree(old, ignore_errors=True)
                old.with_name(old.name + ".lock").unlink(missing_ok=True)
        except FileNotFoundError:
            continue


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``'s creation and fetches across this host's processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_name(path.name + ".lock")):
        yield


def _slug(url: str) -> str:
    name = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:40] or "repo"


def _host() -> str:
    return os.uname().nodename
