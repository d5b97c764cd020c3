"""Phase 1: decide what changed and turn every scope mode into a pair of commits.

``validate_request`` rejects what the user can fix (exit 2); ``run`` reports a base that cannot
be resolved as a ``ScopeError`` inside the Scope, because that failure belongs in the report
rather than instead of it (docs/verify.md, scope modes). The file changes between two commits
are read in :mod:`~verify_dag.phases.scope.changes`; the Scope is rendered for reviewers (the
VERIFICATION SCOPE and SCOPE_METADATA blocks) by :mod:`~verify_dag.phases.scope.text`; the
request is checked in :mod:`~verify_dag.phases.scope.request`.
"""

from __future__ import annotations

from collections.abc import Sequence

from verify_dag import git
from verify_dag.errors import UsageError
from verify_dag.models.request import Snapshot, VerifyRequest
from verify_dag.models.scope import (
    ALL_OTHER_FILES,
    ExcludedFile,
    FileChange,
    Scope,
    ScopeError,
)
from verify_dag.phases.scope.changes import between, path_filter, with_delta
from verify_dag.phases.scope.request import EMPTY_REPO, validate_request
from verify_dag.phases.scope.text import shell_command

_UNTRACKED = "untracked (not part of the unstaged diff)"
_UNTRACKED_WHOLE = "untracked (git add it to verify it)"
__all__ = ["EMPTY_REPO", "run", "validate_request"]

_NO_BASE = "no provider default, origin/main, origin/master, main, or master base exists"


# --- run -------------------------------------------------------------------------------------


class States:
    """HEAD, the index and the work tree of the repository as commits.

    From the work tree itself (snapshotted when first asked), from the snapshot a client pinned
    and shipped with the run, or, for a bare mirror of a URL, HEAD for all three.
    """

    def __init__(self, repo: str, pinned: Snapshot | None, bare: bool) -> None:
        self.repo = repo
        if pinned is None and bare:
            pinned = Snapshot(head=git.head(repo), index=git.head(repo), worktree=git.head(repo))
        self.pinned = pinned
        self.head = pinned.head if pinned is not None else git.head(repo)
        self._index: str | None = None
        self._worktree: str | None = None

    def index(self) -> str:
        if self.pinned is not None:
            return self.pinned.index
        if self._index is None:
            self._index = git.snapshot_index(self.repo)
        return self._index

    def worktree(self) -> str:
        """The work tree with untracked files, as a commit whose parent is :meth:`index`."""
        if self.pinned is not None:
            return self.pinned.worktree
        if self._worktree is None:
            self._worktree = git.snapshot_worktree(self.repo, self.index())
        return self._worktree

    def untracked(self) -> list[str]:
        if self.pinned is not None:
            return list(self.pinned.untracked)
        return [p.rstrip("/") for p in git.untracked(self.repo)]


def run(req: VerifyRequest) -> Scope:
    """Resolve the scope. Expected verification failures come back as ``Scope.error``."""
    pinned_or_bare = req.snapshot is not None or git.is_bare(req.repo)
    repo = req.repo if pinned_or_bare else str(git.toplevel(req.repo))
    if not git.has_commits(repo):
        raise UsageError(EMPTY_REPO)
    states = States(repo, req.snapshot, bare=pinned_or_bare)
    head = states.head
    if req.files or req.scope == "files":
        scope = _whole(states, "files", req.files)
    elif req.module is not None or req.scope == "module":
        scope = _whole(states, "module", (req.module or ".",))
    elif req.scope == "all":
        scope = _whole(states, "all", ())
    elif req.scope == "staged":
        scope = _staged(repo, head, "staged", states.index())
    elif req.scope == "unstaged":
        scope = _unstaged(states, "unstaged")
    elif req.scope == "branch" and req.head is not None:
        # A range verified without checking it out (pre-commit's --from-ref/--to-ref).
        named = git.verify_commit(repo, req.head)
        if named is None:
            why = f"head ref {req.head!r} is not a commit"
            scope = _error(head, req.base, "INVALID_HEAD", why, ())
        else:
            scope = _explicit_branch(repo, named, req.base)
    elif req.scope == "branch":
        scope = _explicit_branch(repo, head, req.base)
    else:
        scope = _auto(states)
    return with_delta(repo, scope, req.since) if req.since else scope


def _auto(states: States) -> Scope:
    repo, head = states.repo, states.head
    idx = states.index()
    if idx != head:
        return _staged(repo, head, None, idx)
    scope = _unstaged(states, None)
    if not scope.nothing_to_verify:
        return scope
    base, notes = _default_base(repo)
    clean = "no staged or unstaged changes"
    # With nothing staged or unstaged, auto-detection is the branch scope against the default
    # base: no base, or none HEAD shares history with, is the same verification error as there
    # (docs/verify.md), not a clean "nothing to verify" that would pass a change never looked at.
    if base is None:
        return _error(head, None, "NO_BASE", f"{clean}, and {_NO_BASE}", notes, requested=None)
    mb = git.merge_base(repo, base, head)
    if mb is None:
        return _no_merge_base(repo, head, base, notes, requested=None)
    scope = _branch(repo, head, None, base, mb, notes)
    if scope.nothing_to_verify:
        return _nothing(
            "auto", None, head, f"{clean}, and HEAD has no changes ahead of {base}", notes
        )
    return scope


def _nothing(
    mode: str, requested: str | None, head: str, reason: str, notes: Sequence[str] = ()
) -> Scope:
    return Scope(
        mode=mode,
        requested_mode=requested,
        head_sha=head,
        new_commit=head,
        nothing_to_verify=True,
        notes=(reason, *notes),
    )


def _staged(repo: str, head: str, requested: str | None, idx: str) -> Scope:
    if idx == head:
        return _nothing("staged", requested, head, "no staged changes")
    changes = between(repo, head, idx)
    paths = path_filter(changes)
    return Scope(
        mode="staged",
        requested_mode=requested,
        compare_ref="INDEX",
        path_filter=paths,
        diff_command=shell_command(["git", "diff", "--cached"], paths),
        head_sha=head,
        old_commit=head,
        new_commit=idx,
        included=changes,
        excluded=(ALL_OTHER_FILES,),
        diff_stat=git.diff_stat(repo, head, idx),
    )


def _unstaged(states: States, requested: str | None) -> Scope:
    # The work tree snapshot also holds untracked files (so a checkout matches the user's
    # files), but `git diff` only reports tracked ones: those define the unstaged scope.
    repo, head, idx, wt = states.repo, states.head, states.index(), states.worktree()
    untracked = states.untracked()
    skip = set(untracked)
    tracked = [d.path for d in git.name_status(repo, idx, wt, renames=False) if d.path not in skip]
    if not tracked:
        return _nothing("unstaged", requested, head, "no unstaged changes to tracked files")
    changes = between(repo, idx, wt, tracked, renames=False)
    paths = path_filter(changes)
    excluded = (*(ExcludedFile(path=p, reason=_UNTRACKED) for p in untracked), ALL_OTHER_FILES)
    return Scope(
        mode="unstaged",
        requested_mode=requested,
        compare_ref="WORKTREE",
        path_filter=paths,
        diff_command=shell_command(["git", "diff"], paths),
        head_sha=head,
        old_commit=idx,
        new_commit=wt,
        included=changes,
        excluded=excluded,
        diff_stat=git.diff_stat(repo, idx, wt, paths, renames=False),
    )


def _explicit_branch(repo: str, head: str, base: str | None) -> Scope:
    notes: list[str] = []
    if base is None:
        resolved, notes = _default_base(repo)
        if resolved is None:
            return _error(head, None, "NO_BASE", _NO_BASE, notes)
        base = resolved
    else:
        fetched = git.fetched_base(repo, base)
        if fetched is not None:
            ok, why = git.fetch(repo, *fetched)
            if not ok:
                notes.append(f"fetching {base} failed ({why}); using the local ref")
    if git.verify_commit(repo, base) is None:
        return _error(head, base, "INVALID_BASE", f"base ref {base!r} is not a commit", notes)
    mb = git.merge_base(repo, base, head)
    if mb is None:
        return _no_merge_base(repo, head, base, notes, requested="branch")
    return _branch(repo, head, "branch", base, mb, notes)


def _no_merge_base(
    repo: str, head: str, base: str, notes: Sequence[str], requested: str | None
) -> Scope:
    shallow = " (the repository is a shallow clone)" if git.is_shallow(repo) else ""
    message = f"no merge base between {base!r} and HEAD {head}{shallow}"
    return _error(head, base, "MERGE_BASE_FAILED", message, notes, requested=requested)


def _default_base(repo: str) -> tuple[str | None, list[str]]:
    """The base --scope=branch compares with (docs/verify.md, scope modes): the provider default,
    then origin/main, origin/master, main, master; a stale local branch never wins over its
    origin/ ref."""
    notes: list[str] = []
    if git.remote_exists(repo, "origin"):
        fetched, why = git.fetch(repo, "origin")
        if not fetched:
            notes.append(f"git fetch origin failed ({why}); using local refs")
        pointed = git.symbolic_ref(repo, "refs/remotes/origin/HEAD")
        if pointed and git.verify_commit(repo, pointed):
            return pointed, notes
        # Asking the provider needs the network again; after a failed fetch it would only wait.
        branch = git.remote_show_head_branch(repo, "origin") if fetched else None
        if branch and git.verify_commit(repo, f"origin/{branch}"):
            return f"origin/{branch}", notes
    for candidate in ("origin/main", "origin/master", "main", "master"):
        if git.verify_commit(repo, candidate):
            return candidate, notes
    return None, notes


def _error(
    head: str,
    base: str | None,
    code: str,
    message: str,
    notes: Sequence[str],
    requested: str | None = "branch",
) -> Scope:
    return Scope(
        mode="branch",
        requested_mode=requested,
        base_ref=base,
        head_sha=head,
        new_commit=head,
        notes=tuple(notes),
        error=ScopeError(code=code, message=message),
    )


def _branch(
    repo: str, head: str, requested: str | None, base: str, mb: str, notes: Sequence[str]
) -> Scope:
    changes = between(repo, mb, head) if mb != head else ()
    fields = {
        "mode": "branch",
        "requested_mode": requested,
        "base_ref": base,
        "merge_base": mb,
        "head_sha": head,
        "old_commit": mb,
        "new_commit": head,
        "diff_command": shell_command(["git", "diff", mb, head], ()),
    }
    if not changes:
        return Scope(
            **fields, nothing_to_verify=True, notes=(f"no changes between {base} and HEAD", *notes)
        )
    return Scope(
        **fields,
        included=changes,
        excluded=(ALL_OTHER_FILES,),
        notes=tuple(notes),
        diff_stat=git.diff_stat(repo, mb, head),
    )


def _whole(states: States, mode: str, paths: Sequence[str]) -> Scope:
    """all / files / module: whole files of the work tree as it is now."""
    repo, head, wt = states.repo, states.head, states.worktree()
    in_tree = git.ls_tree(repo, wt, [p for p in paths if p != "."])
    # A module that is one file lists as itself; a directory lists the files under it.
    if mode == "files" or (mode == "module" and in_tree == [paths[0]]):
        present = set(in_tree)
        chosen = [p for p in paths if p in present]
        excluded = [
            ExcludedFile(path=p, reason="ignored by git (not in the verified snapshot)")
            for p in paths
            if p not in present
        ]
    else:
        # Directories mean tracked files; untracked ones are in the snapshot only so that a
        # checkout of it matches the user's work tree.
        untracked = states.untracked()
        skip = set(untracked)
        chosen = [p for p in in_tree if p not in skip]
        # Named, as the unstaged scope names them: a file left out silently reads as verified.
        listed = set(in_tree)
        excluded = [ExcludedFile(path=p, reason=_UNTRACKED_WHOLE) for p in untracked if p in listed]
    excluded += [] if mode == "all" else [ALL_OTHER_FILES]
    path_filter = () if mode == "all" else tuple(paths)
    if not chosen:
        where = "the repository" if mode == "all" else ", ".join(paths)
        left_out = "; ".join(f"{e.path}: {e.reason}" for e in excluded if e != ALL_OTHER_FILES)
        nothing = _nothing(
            mode, mode, head, f"no tracked files in {where}", (left_out,) if left_out else ()
        )
        # What was asked for and left out stays visible in the JSON too, not only in a note.
        return nothing.model_copy(update={"excluded": tuple(excluded), "path_filter": path_filter})
    binary = git.binary_paths(repo, git.empty_tree(repo), wt, chosen if path_filter else ())
    included = tuple(FileChange(path=p, status="included", binary=p in binary) for p in chosen)
    return Scope(
        mode=mode,
        requested_mode=mode,
        compare_ref="WORKTREE",
        path_filter=path_filter,
        diff_command=shell_command(["git", "ls-files"], path_filter),
        head_sha=head,
        new_commit=wt,
        included=included,
        excluded=tuple(excluded),
    )
