"""Seals on built envs: what an env held when its build ended, checked before a later run uses it.

A cached env outlives the run that built it, and later runs (other commits, other phases) trust
it. Whatever wrote into it after the build (a test that escaped into a writable work directory,
a sandbox this host could not give) must not decide a later verdict, so the build records every
file's size, mode, inode, times and sha256, and a run checks the record first: a file whose
stat agrees is unchanged (a write always moves ctime, which no process can set back), one
whose stat moved is hashed again, and an added, changed or removed file breaks the seal. A broken
env is rebuilt, never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from verify_dag.files import write_atomic

RECORD = ".verify-dag-seal.json"
_FORMAT = 1
_SHOWN = 3  # differences named in the reason


def seal(root: Path, skip: frozenset[str] = frozenset()) -> None:
    """Record what ``root`` holds now; ``skip``: names left out wherever they are (the logs a
    runner writes on every run, markers written after the seal)."""
    before = _record(root)
    files = {}
    for rel, path, st in _walk(root, skip):
        kept = before.get(rel)
        same = kept is not None and kept[:-1] == list(_stat(st))
        # A file whose stat is what the last seal recorded is unchanged: its digest stands (a
        # rebuild for the next checkout rehashes what it rewrote, not the whole cache).
        files[rel] = [*_stat(st), kept[-1] if same and kept else _digest(path, st)]
    record = {"format": _FORMAT, "skip": sorted(skip), "files": files}
    write_atomic(root / RECORD, json.dumps(record, separators=(",", ":")).encode("utf-8"))


@dataclass
class _Check:
    done: threading.Event = field(default_factory=threading.Event)
    why: str | None = "it was not checked"  # until the walk ends


_checks: dict[str, _Check] = {}
_checks_guard = threading.Lock()


def broken(root: Path) -> str | None:
    """Why ``root`` is not what its seal recorded (no seal, or files added, changed or removed);
    None when it is.

    Callers in this process that ask while a walk of ``root`` is under way share that walk's
    answer. A run's tester, static analysis and probes ask for one env at once: three walks of
    tomlkit's 10,914 files took 0.47 s one after another, on the suite's path. The shared answer
    is as fresh as a walk of their own begun when they asked, less the part of the walk already
    done: a check is only ever a check of what was there before use, never a lock against a
    writer running beside it (the sandbox keeps cached envs read-only for that)."""
    key = os.fspath(root)
    with _checks_guard:
        check = _checks.get(key)
        mine = check is None
        if check is None:
            check = _checks[key] = _Check()
    if not mine:
        check.done.wait()
        return check.why
    try:
        check.why = _broken(root)
    finally:
        with _checks_guard:
            del _checks[key]
        check.done.set()
    return check.why


def _broken(root: Path) -> str | None:
    try:
        record = json.loads((root / RECORD).read_text(encoding="utf-8"))
        files: dict[str, list[object]] = record["files"]
        skip = frozenset(record["skip"])
        if record["format"] != _FORMAT:
            return "its seal is of another format"
    except (OSError, ValueError, KeyError, TypeError):
        return "it has no seal"
    added, changed = [], []
    seen = set()
    for rel, path, st in _walk(root, skip):
        seen.add(rel)
        kept = files.get(rel)
        if kept is None:
            added.append(rel)
        elif kept[:-1] != list(_stat(st)) and kept[-1] != _digest(path, st):
            changed.append(rel)
    added.sort()
    changed.sort()
    removed = sorted(set(files) - seen)
    parts = [
        f"{what} {', '.join(names[:_SHOWN])}{' ...' if len(names) > _SHOWN else ''}"
        for what, names in (("added", added), ("changed", changed), ("removed", removed))
        if names
    ]
    return "; ".join(parts) or None


def _record(root: Path) -> dict[str, list[object]]:
    try:
        record = json.loads((root / RECORD).read_text(encoding="utf-8"))
        return dict(record["files"]) if record.get("format") == _FORMAT else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _stat(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_size, st.st_mode, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _digest(path: str, st: os.stat_result) -> str:
    """The sha256 of a file's bytes, of a symlink's target, or "" for a directory."""
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        return ""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _walk(root: Path, skip: frozenset[str]) -> Iterator[tuple[str, str, os.stat_result]]:
    """(relative path, path, lstat) of everything under ``root``, symlinks not followed.
    os.scandir on plain strings: an env holds ten thousand files and more, checked by every
    phase of every run that uses it, and a Path object per file cost most of the walk."""
    top = os.fspath(root)
    cut = len(top) + 1
    pending = [top]
    while pending:
        here = pending.pop()
        try:
            entries = os.scandir(here)
        except OSError:
            continue
        with entries:
            for entry in entries:
                name = entry.name
                if name in skip:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    pending.append(entry.path)
                elif here == top and name == RECORD:
                    continue
                yield entry.path[cut:], entry.path, st
