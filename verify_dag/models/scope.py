"""Phase 1 output: SCOPE_CONTEXT and SCOPE_METADATA as one model."""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen

FileStatus = Literal[
    "added", "modified", "deleted", "renamed", "copied", "type-changed", "included"
]


class LineRange(Frozen):
    start: int
    end: int

    def label(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}-{self.end}"


class FileChange(Frozen):
    path: str
    status: FileStatus
    old_path: str | None = None  # renames and copies
    binary: bool = False
    # Added or modified lines on the new side. None means the entire file is in scope
    # (added files, and the whole-file scopes all/files/module).
    lines: tuple[LineRange, ...] | None = None

    def covers(self, line: int | None) -> bool:
        """Whether a finding at ``line`` of this file is on scoped (added or modified) code."""
        if self.status == "deleted":
            return False
        if self.lines is None:
            return True
        if line is None:
            return False
        return any(r.start <= line <= r.end for r in self.lines)


class ExcludedFile(Frozen):
    path: str
    reason: str


ALL_OTHER_FILES = ExcludedFile(path="ALL_OTHER_FILES", reason="outside selected scope")


class ScopeError(Frozen):
    code: str  # stable: INVALID_BASE, MERGE_BASE_FAILED, NO_BASE, ...
    message: str


class Scope(Frozen):
    mode: str  # the resolved scope mode
    requested_mode: str | None = None  # None when auto-detected
    base_ref: str | None = None  # exactly as supplied or resolved; branch scope only
    compare_ref: str = "HEAD"  # HEAD, INDEX, WORKTREE or an explicit ref
    path_filter: tuple[str, ...] = ()  # empty: ALL_SCOPED_FILES
    diff_command: str = ""
    merge_base: str | None = None
    head_sha: str = ""  # full HEAD SHA observed when verification began
    # The pair of commits every scope becomes (uncommitted states are snapshotted as commits).
    old_commit: str | None = None  # None for whole-file scopes
    new_commit: str = ""
    included: tuple[FileChange, ...] = ()
    excluded: tuple[ExcludedFile, ...] = ()
    delta_base_sha: str | None = None
    delta_files: tuple[FileChange, ...] = ()
    diff_stat: str = ""
    notes: tuple[str, ...] = ()  # factual remarks (a fetch that failed, ...)
    nothing_to_verify: bool = False
    error: ScopeError | None = None

    def file(self, path: str) -> FileChange | None:
        for f in self.included:
            if f.path == path:
                return f
        return None
