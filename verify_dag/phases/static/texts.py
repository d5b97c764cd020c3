"""The static baseline's view of a change's two commits: the touched files' text at each, read
from git without a checkout, and git's alignment of each file's two versions."""

from __future__ import annotations

from collections.abc import Sequence

from verify_dag import git
from verify_dag.models.scope import Scope


def sources_of(scope: Scope) -> dict[str, str | None]:
    """Old paths the change touched -> the path that code has now (None: the file was deleted)."""
    out: dict[str, str | None] = {}
    for c in scope.included:
        if c.status == "deleted":
            out[c.path] = None
        elif c.status == "copied" and c.old_path:
            out.setdefault(c.old_path, c.old_path)  # the source stays (a rename of it wins)
        elif c.status != "added":
            out[c.old_path or c.path] = c.path
    return out


class Texts:
    """File contents at the change's two commits, read from git without a checkout, once."""

    def __init__(self, repo: str, scope: Scope) -> None:
        self.repo, self.scope = repo, scope
        # Findings lie on the files the change touched: asking for one reads them all.
        touched = [f.path for f in scope.included if f.status != "deleted"]
        self._read_new = git.reader(repo, scope.new_commit, touched)
        self._new: dict[str, list[str]] = {}
        self._old: dict[str, list[str]] = {}
        self._hunks: dict[tuple[str, str], list[tuple[int, int, int, int]]] = {}
        self._batched = False

    def new(self, path: str | None) -> list[str]:
        if path is None:
            return []
        if path not in self._new:
            self._new[path] = _lines(self._read_new(path))
        return self._new[path]

    def old(self, paths: Sequence[str]) -> dict[str, list[str]]:
        missing = [p for p in paths if p not in self._old]
        if missing and self.scope.old_commit is not None:
            found = git.read_files(self.repo, self.scope.old_commit, missing)
            self._old.update({p: _lines(text) for p, text in found.items()})
        return {p: self._old.get(p, []) for p in paths}

    def hunks(self, old_path: str, new_path: str) -> list[tuple[int, int, int, int]]:
        """git's ``-U0`` hunks from ``old_path`` at the old commit to ``new_path`` at the new one,
        asked once per pair. git aligns click's 3,000-line core.py in 6 ms where difflib took
        116 ms, and difflib ran again for every finding on an edited line."""
        pair = (old_path, new_path)
        old = self.scope.old_commit
        assert old is not None  # only a two-commit scope is classified
        if pair not in self._hunks and old_path == new_path and not self._batched:
            self._batched = True
            # Every file the change kept in place, in one git process: a change of a hundred
            # files is one diff, not a hundred.
            kept = [p for p, now in sources_of(self.scope).items() if now == p]
            found = git.path_hunks(self.repo, old, self.scope.new_commit, kept)
            self._hunks.update(((p, p), h) for p, h in found.items())
        if pair not in self._hunks:  # a renamed file, compared with its old path
            self._hunks[pair] = git.file_hunks(
                self.repo, old, old_path, self.scope.new_commit, new_path
            )
        return self._hunks[pair]

    def gone(self, old_path: str, new_path: str | None) -> set[int]:
        """1-based lines of ``old_path`` that are not carried unchanged into ``new_path`` (all of
        them when the file is gone)."""
        if new_path is None:
            return set(range(1, len(self.old([old_path])[old_path]) + 1))
        return {n for a, b, _, _ in self.hunks(old_path, new_path) for n in range(a, a + b)}


def _lines(text: str | None) -> list[str]:
    return text.split("\n") if text else []
