"""The content-addressed result cache: what an earlier run already found out, reused.

Entries are JSON files named by the sha256 of everything that decides their content:

- a tool's findings: the tool, the command line the project gives it, verify-dag's and the
  interpreter's versions (:func:`host_key`), and the content it read: one file's blob and the
  tool's configuration files for a tool that checks files one by one (ruff), the whole tree of
  the commit otherwise (mypy, pyright, a discovered command: what they read is the project);
- a suite's results: the tested tree, the environment key (the tree holds every file the env is
  declared in; :func:`host_key` the interpreter and the installers) and the command;
- a reviewer's reply: its prompt, the backend, the model, the effort, and the tree it may read.

The tree (a git tree id) already hashes every byte of the checkout, so one changed file misses
exactly the entries that could depend on it. An environment is declared by the tree, as the
tester's cached envs are: a result is reused while the declaration is unchanged, as the env
itself is; ``--no-cache`` runs everything again.

The cache lives under ``$VERIFY_DAG_RESULT_CACHE``, else ``<verify-dag cache>/results``: shared
by every run on a host, and by a fleet's workers when that variable names a directory they all
mount. It is never a reason for a run to fail: an entry that cannot be read, or holds what its
name does not say, is ignored (and replaced by the next store); a cache that cannot be written
is skipped with a log line. Writes are atomic, so concurrent runs at worst both compute.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import importlib.metadata
import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from verify_dag import tools
from verify_dag.digest import key as key
from verify_dag.files import write_atomic
from verify_dag.models.findings import CacheHit
from verify_dag.paths import RESULT_CACHE_VAR, results_root

log = logging.getLogger(__name__)

CACHE_ENV = RESULT_CACHE_VAR
FORMAT = 1  # part of every key: bump it when what an entry holds changes shape
# The packages whose versions decide what a tool, a suite or a reviewer run gives: verify-dag,
# the analysers of the tool registry, and the tools that build and run test environments.
_VERSIONED = (
    "verify-dag",
    *tools.packages(),
    "tox",
    "tox-uv",
    "nox",
    "hatch",
    "uv",
    "pytest",
    "coverage",
)

_HEX64 = re.compile(r"[0-9a-f]{64}")
_enabled: ContextVar[bool] = ContextVar("verify_dag_cache_enabled", default=True)
_hits: ContextVar[list[CacheHit] | None] = ContextVar("verify_dag_cache_hits", default=None)


def root() -> Path:
    return results_root()


@contextlib.contextmanager
def session(*, enabled: bool = True) -> Iterator[list[CacheHit]]:
    """The cache for one phase of a run: off when ``enabled`` is False (``--no-cache``); yields
    the list of entries the phase took from it, for the report."""
    hits: list[CacheHit] = []
    token_on, token_hits = _enabled.set(enabled), _hits.set(hits)
    try:
        yield hits
    finally:
        _enabled.reset(token_on)
        _hits.reset(token_hits)


def enabled() -> bool:
    return _enabled.get()


@functools.cache
def host_key() -> str:
    """verify-dag, the interpreter and the tools verify-dag ships: what a result also depends on
    besides the code and its declarations."""
    parts = [f"format {FORMAT}", sys.version, os.path.realpath(sys.executable)]
    for name in _VERSIONED:
        try:
            parts.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{name} none")
    return key(*parts)


def get(kind: str, entry: str, what: str) -> Any | None:
    """The value stored as ``kind``/``entry``, or None; a hit is recorded for the report as
    ``what`` (e.g. "mypy", "suite")."""
    found = lookup(kind, entry)
    if found is None:
        return None
    value, stored = found
    hit(what, entry, stored)
    return value


def lookup(kind: str, entry: str) -> tuple[Any, str] | None:
    """(value, when it was stored) of ``kind``/``entry``, or None; records no hit (a caller that
    assembles one result from many entries records one itself, with :func:`hit`)."""
    if not enabled():
        return None
    path = _path(kind, entry)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None  # not there (a cache that cannot be made is warned about when stored)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        log.warning("result cache: ignoring unreadable entry %s: %s", path, exc)
        _discard(path)
        return None
    if not (
        isinstance(record, dict)
        and record.get("format") == FORMAT
        and record.get("kind") == kind
        and record.get("key") == entry
        and "value" in record
    ):
        log.warning("result cache: ignoring an entry that is not what its name says: %s", path)
        _discard(path)
        return None
    return record["value"], str(record.get("stored", ""))


def hit(what: str, entry: str, stored: str) -> None:
    """Record that ``what`` came from the cache (entry ``entry``, stored at ``stored``)."""
    hits = _hits.get()
    if hits is not None and what:
        hits.append(CacheHit(what=what, key=entry, stored=stored or None))


def put(kind: str, entry: str, value: Any) -> None:
    """Store ``value`` (JSON-serialisable) as ``kind``/``entry``; never raises."""
    if not enabled():
        return
    path = _path(kind, entry)
    record = {
        "format": FORMAT,
        "kind": kind,
        "key": entry,
        "stored": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "value": value,
    }
    try:
        data = json.dumps(record, separators=(",", ":")).encode("utf-8")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    except (OSError, TypeError, ValueError) as exc:
        log.warning("result cache: could not store %s: %s", path, exc)


def _path(kind: str, entry: str) -> Path:
    if (
        not kind.isidentifier()
        or len(entry) != 64
        or not all(c in "0123456789abcdef" for c in entry)
    ):
        raise ValueError(f"not a cache entry: {kind}/{entry}")
    return root() / kind / entry[:2] / f"{entry}.json"


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
