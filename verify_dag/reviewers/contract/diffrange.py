"""``--diff=RANGE`` as a pair of commits, with git's own meaning of the forms:

- ``A..B``: A against B (``A..`` is ``A..HEAD``);
- ``A...B``: the merge base of A and B against B (the branch's own changes);
- ``A``: A against the work tree, uncommitted and untracked (not ignored) files included,
  snapshotted as a commit without touching the index or the work tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from verify_dag import git
from verify_dag.errors import ContractError


@dataclass(frozen=True)
class DiffRange:
    spec: str
    old: str
    new: str
    work_tree: bool = False


class RangeError(ContractError):
    """The range names nothing diffable: the verdict is ERROR with this reason."""


def _commit(repo: Path, spec: str, ref: str) -> str:
    if not git.valid_ref(ref):
        raise RangeError(f"bad diff range {spec!r}: invalid revision {ref!r}")
    sha = git.verify_commit(repo, ref)
    if sha is None:
        raise RangeError(f"bad diff range {spec!r}: unknown revision {ref!r}")
    return sha


def resolve(repo: Path, spec: str) -> DiffRange:
    spec = spec.strip()
    if not spec:
        raise RangeError("bad diff range '': empty")
    if "..." in spec:
        a, _, b = spec.partition("...")
        old, new = _commit(repo, spec, a or "HEAD"), _commit(repo, spec, b or "HEAD")
        base = git.merge_base(repo, old, new)
        if base is None:
            raise RangeError(
                f"bad diff range {spec!r}: {a or 'HEAD'} and {b or 'HEAD'} have no merge base"
            )
        return DiffRange(spec, base, new)
    if ".." in spec:
        a, _, b = spec.partition("..")
        return DiffRange(spec, _commit(repo, spec, a or "HEAD"), _commit(repo, spec, b or "HEAD"))
    old = _commit(repo, spec, spec)
    return DiffRange(spec, old, git.snapshot_worktree(repo, git.head(repo)), work_tree=True)
