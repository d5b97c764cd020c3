"""The chosen fixes composed into one set of file contents, before anything is written.

Every fix is a patch against the verified commit, made on its own. Two fixes of one file cannot
simply be applied one after the other: the second one's context lines may be the first one's
change (two unused imports on adjacent lines). So each fix is applied alone to the verified commit
in a throwaway index, and merged into what the earlier fixes made with ``git merge-file`` (a
three-way merge whose base is the verified file): fixes of different lines compose, fixes of the
same lines conflict, and the later one is not applied. A file that changed outside the verified
scope merges the same way, with those changes as the starting point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verify_dag import git
from verify_dag.errors import FatalError
from verify_dag.fixes.plan import Step


@dataclass
class Composed:
    texts: dict[str, str | None] = field(default_factory=dict)  # None: the file goes
    applied: list[Step] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # issue id -> why it is not applied
    # A staged change's fixes go to the index too: what it holds once they are made.
    staged: dict[str, str | None] = field(default_factory=dict)


def worktree_text(repo: Path, path: str) -> str | None:
    try:
        return (repo / path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def compose(
    repo: Path,
    verified: str,
    steps: Sequence[Step],
    start: Callable[[Path, str], str | None] = worktree_text,
) -> Composed:
    """The fixes merged into the files as ``start`` reads them (the work tree's by default)."""
    out = Composed()
    for s in steps:
        try:
            alone = git.patched_files(repo, verified, s.option.patch)
        except FatalError as exc:
            out.failed[s.issue.id] = exc.message
            continue
        current = {p: out.texts[p] if p in out.texts else start(repo, p) for p in alone}
        new = _merged(repo, verified, alone, current)
        if new is None:
            # Adjacent changes conflict in a three-way merge; applied with less context (as
            # patch's fuzz), a hunk lands beside the other fix if the lines it removes are there.
            new = git.apply_to_texts(current, s.option.patch, 1) or git.apply_to_texts(
                current, s.option.patch, 0
            )
        if new is None:
            touched = ", ".join(alone)
            earlier = " as an earlier fix does" if any(p in out.texts for p in alone) else ""
            out.failed[s.issue.id] = f"it changes the same lines of {touched}{earlier}"
            continue
        out.texts.update(new)
        out.applied.append(s)
    return out


def compose_staged(repo: Path, verified: str, steps: Sequence[Step]) -> Composed:
    """For a staged change: the fixes made both in the index and in the work tree, and only
    those that can be made in both (the work tree may hold unstaged edits besides)."""
    on_index = compose(repo, verified, steps, start=git.index_text)
    out = compose(repo, verified, on_index.applied)
    index_failed = {i: f"in the index: {why}" for i, why in on_index.failed.items()}
    if out.failed:
        on_index = compose(repo, verified, out.applied, start=git.index_text)
    out.failed = {**out.failed, **index_failed}
    out.staged = on_index.texts
    return out


def _merged(
    repo: Path, verified: str, alone: dict[str, str | None], current: dict[str, str | None]
) -> dict[str, str | None] | None:
    new: dict[str, str | None] = {}
    for path, theirs in alone.items():
        try:
            new[path] = _merge(current[path], git.read_file(repo, verified, path), theirs)
        except _Conflict:
            return None
    return new


def undo(
    repo: Path,
    verified: str,
    step: Step,
    start: Callable[[Path, str], str | None] = worktree_text,
) -> dict[str, str | None] | None:
    """The work tree's files (or as ``start`` reads them: the index's) with ``step``'s fix
    taken out again and the others kept; None when it cannot be taken out alone."""
    alone = git.patched_files(repo, verified, step.option.patch)
    out: dict[str, str | None] = {}
    for path, fixed in alone.items():
        try:
            out[path] = _merge(start(repo, path), fixed, git.read_file(repo, verified, path))
        except _Conflict:
            return None
    return out


class _Conflict(Exception):
    pass


def _merge(ours: str | None, base: str | None, theirs: str | None) -> str | None:
    """The three-way merge (None: the file goes); _Conflict when both sides changed a line."""
    if ours == base:
        return theirs
    if theirs == base:
        return ours
    if ours is None or base is None or theirs is None:
        raise _Conflict
    merged = git.merge_file(ours, base, theirs)
    if merged is None:
        raise _Conflict
    return merged


def write(repo: Path, texts: dict[str, str | None]) -> None:
    for path, text in texts.items():
        target = repo / path
        if text is None:
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
