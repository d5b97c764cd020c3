"""A ``git diff -U0 -M`` patch as plain data: per file, its hunks of removed and added lines.

Pure. Hunk bodies are read by their counts, so content that looks like a header (``+++ x``) is
never mistaken for one; paths come from the ``---``/``+++`` lines (or ``rename from``/``to``),
never from the ambiguous ``diff --git a/x b/y`` line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from verify_dag.git.parse import _unquote as unquote_path

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Line:
    number: int  # old-side number for a removed line, new-side for an added one
    text: str


@dataclass(frozen=True)
class Hunk:
    removed: tuple[Line, ...]
    added: tuple[Line, ...]


@dataclass(frozen=True)
class FileDiff:
    path: str  # the new path; the old one for a deleted file
    status: str  # A added, D deleted, M modified, R renamed
    old_path: str | None = None
    hunks: tuple[Hunk, ...] = ()
    binary: bool = False

    @property
    def removed(self) -> list[Line]:
        return [line for hunk in self.hunks for line in hunk.removed]

    @property
    def added(self) -> list[Line]:
        return [line for hunk in self.hunks for line in hunk.added]


@dataclass
class _Draft:
    status: str = "M"
    old: str | None = None
    new: str | None = None
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False

    def build(self) -> FileDiff | None:
        path = self.old if self.status == "D" else self.new or self.old
        if path is None:
            return None
        old = self.old if self.status == "R" else None
        return FileDiff(
            path=path, status=self.status, old_path=old, hunks=tuple(self.hunks), binary=self.binary
        )


def _side(text: str, prefix: str) -> str | None:
    name = unquote_path(text.rstrip("\t"))  # git appends a tab to names holding a space
    if name == "/dev/null":
        return None
    return name[len(prefix) :] if name.startswith(prefix) else name


def parse(patch: str) -> list[FileDiff]:
    files: list[FileDiff] = []
    draft: _Draft | None = None
    lines = patch.split("\n")  # not splitlines(): content may hold \r or \x0c
    i = 0

    def close() -> None:
        if draft is not None and (built := draft.build()) is not None:
            files.append(built)

    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("diff --git "):
            close()
            draft = _Draft()
            continue
        if draft is None:
            continue
        if line.startswith("new file mode"):
            draft.status = "A"
        elif line.startswith("deleted file mode"):
            draft.status = "D"
        elif line.startswith("rename from "):
            draft.status, draft.old = "R", unquote_path(line[len("rename from ") :])
        elif line.startswith("rename to "):
            draft.new = unquote_path(line[len("rename to ") :])
        elif line.startswith("--- "):
            draft.old = _side(line[4:], "a/") or draft.old
        elif line.startswith("+++ "):
            draft.new = _side(line[4:], "b/") or draft.new
        elif line.startswith("Binary files ") or line.startswith("GIT binary patch"):
            draft.binary = True
        elif (m := _HUNK.match(line)) is not None:
            old_start, new_start = int(m.group(1)), int(m.group(3))
            old_n = 1 if m.group(2) is None else int(m.group(2))
            new_n = 1 if m.group(4) is None else int(m.group(4))
            removed: list[Line] = []
            added: list[Line] = []
            old_no, new_no = old_start, new_start
            while (old_n or new_n) and i < len(lines):
                body = lines[i]
                i += 1
                if body.startswith("-") and old_n:
                    removed.append(Line(old_no, body[1:]))
                    old_no, old_n = old_no + 1, old_n - 1
                elif body.startswith("+") and new_n:
                    added.append(Line(new_no, body[1:]))
                    new_no, new_n = new_no + 1, new_n - 1
                elif body.startswith(" ") and old_n and new_n:  # context, if asked for
                    old_no, new_no = old_no + 1, new_no + 1
                    old_n, new_n = old_n - 1, new_n - 1
                elif not body.startswith("\\"):
                    i -= 1  # a short hunk: let the header loop see this line
                    break
            draft.hunks.append(Hunk(tuple(removed), tuple(added)))
    close()
    return files
