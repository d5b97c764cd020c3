"""Phase 1's request checks: everything the user can fix is refused here (exit 2), before a run
is submitted; paths become repository-relative and ``--head`` the commit it names."""

from __future__ import annotations

import os
from pathlib import Path

from verify_dag import git
from verify_dag.errors import UsageError
from verify_dag.models.request import VerifyRequest
from verify_dag.repos import check_url_scope

EMPTY_REPO = "empty repository: nothing to verify"


def validate_request(req: VerifyRequest) -> VerifyRequest:
    """Check everything the user can fix; return the request with repo-relative paths."""
    if req.source.remote:
        # Nothing to look at locally: the workers' mirrors hold the repository.
        check_url_scope(req)
        top = None
    else:
        top = git.toplevel(req.repo)
        if not git.has_commits(top):
            raise UsageError(EMPTY_REPO)
    chosen = [f"--scope={req.scope}"] if req.scope not in (None, "files", "module") else []
    chosen += ["--files"] if req.files else []
    chosen += ["--module"] if req.module is not None else []
    if len(chosen) > 1:
        raise UsageError(f"choose one of --scope, --files or --module, not {' and '.join(chosen)}")
    if (req.scope == "files" and not req.files) or (req.scope == "module" and req.module is None):
        raise UsageError(f"--scope={req.scope} needs --{req.scope}")
    if req.base is not None:
        if req.scope != "branch":
            raise UsageError("--base is only valid with --scope=branch")
        git.check_ref(req.base, "--base ref")
    if req.head is not None:
        if req.scope != "branch":
            raise UsageError("--head is only valid with --scope=branch")
        git.check_ref(req.head, "--head ref")
    if req.no_carry_forward and not req.ledger:
        # Like --skip-ux at light: accepting it would let a caller believe it changed something.
        raise UsageError(
            "--no-carry-forward requires --ledger (it keeps a ledger for reporting "
            "only; without one every run is already a first run)"
        )
    if req.since is not None:
        if not req.ledger:
            raise UsageError("--since requires --ledger")
        git.check_ref(req.since, "--since commit")
    if top is None:
        return req
    # Relative paths are relative to where the user stands when that is inside the repository,
    # as git's own pathspecs are; from outside it, relative to the repository's top.
    here = Path.cwd().resolve()
    start = here if _relative(here, top) is not None else top
    files = tuple(
        dict.fromkeys(_inside(top, f, "--files", start, file_only=True) for f in req.files)
    )
    module = _inside(top, req.module, "--module", start) if req.module is not None else None
    scope = "files" if files else "module" if module is not None else req.scope
    # --head as the commit it names now: the run verifies that commit wherever it runs (a
    # worker's copy gets it in the bundle), even if the ref moves meanwhile. A name that is no
    # commit here is the user's to fix, before anything is submitted.
    head = None
    if req.head is not None:
        head = git.verify_commit(top, req.head)
        if head is None:
            raise UsageError(f"--head: {req.head!r} is not a commit in {top}")
    return req.model_copy(
        update={"repo": str(top), "files": files, "module": module, "scope": scope, "head": head}
    )


def _inside(top: Path, raw: str, flag: str, start: Path, file_only: bool = False) -> str:
    """``raw`` (relative to ``start``) as a repo-relative POSIX path, refusing anything that
    leaves the repository."""
    if not raw.strip() or "\0" in raw:
        raise UsageError(f"{flag}: empty path")
    given = Path(raw)
    full = given if given.is_absolute() else start / given
    rel = _relative(Path(os.path.normpath(full)), top) or _relative(full.resolve(), top)
    # A symlink inside the repository may still point outside it.
    if rel is None or _relative(full.resolve(), top) is None or ".git" in rel.parts:
        raise UsageError(f"{flag} path is outside the repository: {raw}")
    if not full.exists():
        raise UsageError(f"{flag} path does not exist: {raw}")
    if file_only and not full.is_file():
        raise UsageError(f"{flag} path is not a file: {raw} (use --module for a directory)")
    return rel.as_posix()


def _relative(path: Path, top: Path) -> Path | None:
    try:
        return path.relative_to(top)
    except ValueError:
        return None
