"""Pure parsers for git output and ref syntax: no processes, so they are cheap to test.

Kept apart from :mod:`verify_dag.git.core`, which runs the commands whose output lands here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Delta:
    """One entry of ``git diff --name-status``: status letter A/C/D/M/R/T, paths."""

    status: str
    path: str
    old_path: str | None = None


def split_z(out: str) -> list[str]:
    return [p for p in out.split("\0") if p]


# --- refs ------------------------------------------------------------------------------------

_SHA = re.compile(r"[0-9a-fA-F]{4,64}")
_REV_SUFFIX = re.compile(r"(?:[~^][0-9]*)*(?:\^\{(?:commit|tree)?\})?")
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def valid_ref_name(name: str) -> bool:
    """The rules of ``git check-ref-format --allow-onelevel``, without a process per ref."""
    if not name or name == "@" or ".." in name or "@{" in name or _BAD_REF_CHARS.search(name):
        return False
    if name.startswith("/") or name.endswith(("/", ".")) or "//" in name:
        return False
    return not any(c.startswith(".") or c.endswith(".lock") for c in name.split("/"))


def valid_ref(ref: str) -> bool:
    """A ref, tag, SHA or ``name~N``/``name^N`` revision that is safe to put in argv."""
    if not ref or ref.startswith("-") or any(c.isspace() or ord(c) < 0x20 for c in ref):
        return False
    cut = min((i for i in (ref.find("~"), ref.find("^")) if i >= 0), default=len(ref))
    name, suffix = ref[:cut], ref[cut:]
    if not _REV_SUFFIX.fullmatch(suffix):
        return False
    return name in ("HEAD", "@") or bool(_SHA.fullmatch(name)) or valid_ref_name(name)


# --- diff output -----------------------------------------------------------------------------


def parse_name_status(out: str) -> list[Delta]:
    """``git diff --name-status -z``: ``M\\0path\\0`` or ``R100\\0old\\0new\\0`` records."""
    tokens, deltas, i = split_z(out), [], 0
    while i + 1 < len(tokens):
        letter = tokens[i][0]
        if letter in "RC":
            deltas.append(Delta(letter, tokens[i + 2], tokens[i + 1]))
            i += 3
        else:
            deltas.append(Delta(letter, tokens[i + 1]))
            i += 2
    return deltas


def parse_numstat_binary(out: str) -> set[str]:
    """New-side paths ``git diff --numstat -z`` reports as binary (``-\\t-``)."""
    tokens, found, i = out.split("\0"), set(), 0
    while i < len(tokens):
        added, _, rest = tokens[i].partition("\t")
        deleted, _, path = rest.partition("\t")
        if not path and i + 2 < len(tokens):  # rename or copy: "A\tD\t\0old\0new"
            path, i = tokens[i + 2], i + 3
        else:
            i += 1
        if added == "-" and deleted == "-":
            found.add(path)
    return found


_CQUOTE = {
    "n": "\n",
    "t": "\t",
    '"': '"',
    "\\": "\\",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "r": "\r",
    "v": "\v",
}


def _unquote(s: str) -> str:
    """Undo git's C-style quoting of a path in a patch header."""
    if not (s.startswith('"') and s.endswith('"') and len(s) >= 2):
        return s
    out, body, i = bytearray(), s[1:-1], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and body[i + 1 : i + 4].isdigit() and len(body[i + 1 : i + 4]) == 3:
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        elif c == "\\" and i + 1 < len(body):
            out += _CQUOTE.get(body[i + 1], body[i + 1]).encode()
            i += 2
        else:
            out += c.encode()
            i += 1
    return out.decode("utf-8", "replace")


def _count(group: str | None) -> int:
    return 1 if group is None else int(group)  # "+a" alone means one line


def parse_hunks(patch: str) -> dict[str, list[tuple[int, int]]]:
    """New-side (start, end) line ranges per new path from a ``git diff -U0`` patch. A pure
    deletion hunk (``+a,0``) contributes no range, so a deleted file has none."""
    ranges = {
        path: [(c, c + d - 1) for _, _, c, d in hunks if d]
        for path, hunks in parse_file_hunks(patch).items()
    }
    return {path: found for path, found in ranges.items() if found}


_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_file_hunks(patch: str) -> dict[str, list[tuple[int, int, int, int]]]:
    """``(old_start, old_count, new_start, new_count)`` of every hunk of a ``git diff -U0``
    patch, per path (the new side's name; a deleted file's old one).

    Hunk bodies are skipped by their counts, so added lines that look like headers ("+++ x")
    are never mistaken for one.
    """
    out: dict[str, list[tuple[int, int, int, int]]] = {}
    path: str | None = None
    body = 0
    for line in patch.split("\n"):  # not splitlines(): content may hold \r or \x0c
        if body:
            if not line.startswith("\\"):
                body -= 1
        elif line.startswith("diff --git "):
            path = None
        elif line.startswith(("--- ", "+++ ")):
            name = _unquote(line[4:].rstrip("\t"))
            if name[:2] in ("a/", "b/"):
                path = name[2:]
        elif line.startswith("@@ ") and (m := _HUNK.match(line)):
            a, b, c, d = int(m.group(1)), _count(m.group(2)), int(m.group(3)), _count(m.group(4))
            body = b + d
            if path is not None:
                out.setdefault(path, []).append((a, b, c, d))
    return out


def parse_hunk_pairs(patch: str) -> list[tuple[int, int, int, int]]:
    """The ``@@ -a[,b] +c[,d] @@`` headers of a one-path ``-U0`` patch. A body line starts with
    "+", "-", " " or "\\", so it is never mistaken for a header."""

    def pair(text: str) -> tuple[int, int]:
        start, _, count = text[1:].partition(",")
        return int(start), 1 if not count else int(count)

    out = []
    for line in patch.split("\n"):
        fields = line.split(" ", 3)
        if len(fields) >= 4 and fields[0] == "@@" and fields[3].startswith("@@"):
            (a, b), (c, d) = pair(fields[1]), pair(fields[2])
            out.append((a, b, c, d))
    return out


def parse_grep_z(out: str, commit: str) -> list[tuple[str, int, str]]:
    """``git grep -n -z COMMIT``: ``COMMIT:path\\0line\\0text\\n`` records, read in order so
    that a path holding a newline or a colon is still read whole."""
    found: list[tuple[str, int, str]] = []
    prefix, pos = f"{commit}:", 0
    while pos < len(out):
        if not out.startswith(prefix, pos):
            break
        path_end = out.find("\0", pos)
        line_end = out.find("\0", path_end + 1)
        text_end = out.find("\n", line_end + 1)
        if path_end < 0 or line_end < 0:
            break
        text_end = len(out) if text_end < 0 else text_end
        number = out[path_end + 1 : line_end]
        if number.isdigit():
            found.append(
                (out[pos + len(prefix) : path_end], int(number), out[line_end + 1 : text_end])
            )
        pos = text_end + 1
    return found


# --- configuration: the programs a repository's config names --------------------------------


@dataclass(frozen=True)
class ConfigEntry:
    """One entry of ``git config -z --show-scope --show-origin --get-regexp``."""

    scope: str  # system, global, local, worktree, command
    origin: str  # "file:<path>", "command line:", "blob:..."
    key: str  # section and variable lowercased by git, a subsection as written
    value: str | None  # None: a bare key (boolean true)


def parse_config_z(out: str) -> list[ConfigEntry]:
    fields = out.split("\0")
    entries = []
    for i in range(0, len(fields) - 2, 3):
        key, nl, value = fields[i + 2].partition("\n")
        entries.append(ConfigEntry(fields[i], fields[i + 1], key, value if nl else None))
    return entries


# What makes each driver run a program. An empty clean/smudge/process means "no filter" to git
# (convert.c tests `cmd && *cmd`); required=false then lets the file pass unfiltered instead of
# failing. An empty textconv, diff command or merge driver is not "none" but a program git
# cannot start: the call fails loudly instead of running the repository's program (our diffs
# also pass --no-textconv and --no-ext-diff, so they never get there).
_DRIVER_OFF = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("textconv", ""), ("command", "")),
    "merge": (("driver", ""),),
}
_TRUSTED_SCOPES = ("system", "global", "command")


def program_overrides(entries: list[ConfigEntry]) -> list[tuple[str, str]]:
    """Command-line settings that neutralise every filter, diff and merge driver ``entries``
    name and every credential helper the repository's own config (local, worktree) adds."""
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for e in entries:
        section, _, rest = e.key.partition(".")
        name, dot, _var = rest.rpartition(".")
        if (section, name) in seen or "\n" in name:
            continue
        if section in _DRIVER_OFF and dot:
            seen.add((section, name))
            out += [(f"{section}.{name}.{var}", value) for var, value in _DRIVER_OFF[section]]
        elif e.key == "diff.external":
            seen.add((section, name))
            out.append(("diff.external", ""))
    # credential.helper is a list that an empty value resets: reset it, then put back the
    # helpers of the user's and operator's own files (how workers reach repositories).
    helpers = [e for e in entries if e.key.startswith("credential.") and e.key.endswith(".helper")]
    if any(e.scope not in _TRUSTED_SCOPES for e in helpers):
        out.append(("credential.helper", ""))
        out += [(e.key, e.value or "") for e in helpers if e.scope in _TRUSTED_SCOPES]
    return out


def config_files(entries: list[ConfigEntry]) -> list[str]:
    """The files (as git names them, possibly relative) that ``entries`` came from."""
    return sorted({e.origin[len("file:") :] for e in entries if e.origin.startswith("file:")})
