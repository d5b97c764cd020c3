"""Nightly audits of many repositories: the fleet file and the index of last audits.

A fleet file is TOML, one ``[[repo]]`` table per repository::

    [[repo]]
    url = "https://git.example.com/team/service.git"   # or a path, relative to this file
    depth = "deep"                                      # light | deep (default deep)

    [[repo]]
    url = "/srv/repos/tool"
    base = "origin/main"                                # implies scope = "branch"

and, at the top, ``max-review-tokens = N``: the review-token budget of each audit of the fleet,
shared by all its runs (verify_dag/backends/budget.py).

The index (``<store>/fleet/index.json``) remembers, per settings (url, scope, base, depth), the
head the last completed audit saw and its run id, so an unchanged repository is not audited
again. docs/fleet.md is the user-facing description.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from verify_dag import git, repos, store, url_secrets
from verify_dag.errors import UsageError, VerifyDagError
from verify_dag.files import file_lock, write_atomic
from verify_dag.models.request import Depth
from verify_dag.models.source import RepoSource, parse_source

# staged and unstaged are states of a work tree, which a URL (a worker's mirror) does not have.
Scope = Literal["all", "branch"]
SCOPES = ("all", "branch")
DEPTHS = ("light", "deep")
KEYS = ("url", "base", "scope", "depth")
# true / false: `verify --allow-incomplete` for this repository (checks that did not run give 0).
FLAG_KEYS = ("allow-incomplete",)
FLEET_DIR = "fleet"  # under the report store: the index and one directory per fleet run
INDEX = "index.json"


@dataclass(frozen=True)
class Entry:
    """One repository of the fleet file, with its defaults applied."""

    number: int  # 1-based position in the file, for messages
    source: RepoSource  # what the run names: a URL as written, or an absolute path
    scope: Scope
    base: str | None
    depth: Depth
    allow_incomplete: bool = False

    @property
    def url(self) -> str:
        return self.source.location

    @property
    def shown(self) -> str:
        return display(self.url)

    def settings(self) -> dict[str, str | bool | None]:
        said: dict[str, str | bool | None] = {
            "url": self.url,
            "scope": self.scope,
            "base": self.base,
            "depth": self.depth,
        }
        if self.allow_incomplete:  # only when set: the index keys of older files stay the same
            said["allow-incomplete"] = True
        return said

    def key(self) -> str:
        # Hashed so that a password in a URL never reaches the index file.
        canon = json.dumps(self.settings(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def display(url: str) -> str:
    """``url`` safe to print and store: a password or token in it is replaced by ``***``."""
    return url_secrets.mask(url)


# The fleet file's settings beside its [[repo]] tables.
SETTINGS = ("max-review-tokens",)


def load(path: str | os.PathLike[str]) -> list[Entry]:
    """Read and check a fleet file strictly; any problem is one UsageError naming file and entry."""
    return _read(path)[0]


def max_review_tokens(path: str | os.PathLike[str]) -> int | None:
    """The fleet file's ``max-review-tokens``, or None (the file is checked as ``load`` does)."""
    return _read(path)[1]


def _read(path: str | os.PathLike[str]) -> tuple[list[Entry], int | None]:
    where = Path(path)
    try:
        data = tomllib.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"fleet file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    extra = sorted(set(data) - {"repo", *SETTINGS})
    if extra:
        raise UsageError(
            f"{path}: unknown top-level key(s) {', '.join(extra)}; allowed: [[repo]] tables and "
            f"{', '.join(SETTINGS)}"
        )
    budget = data.get("max-review-tokens")
    if budget is not None and (
        not isinstance(budget, int) or isinstance(budget, bool) or budget < 1
    ):
        raise UsageError(f"{path}: max-review-tokens must be a whole number of at least 1")
    tables = data.get("repo")
    if not isinstance(tables, list) or not tables:
        raise UsageError(f"{path}: no repositories; add one [[repo]] table with url = ... each")
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for number, table in enumerate(tables, start=1):
        entry = _entry(where, number, table)
        first = seen.setdefault(entry.key(), number)
        if first != number:
            raise UsageError(
                f"{path}: repo {number} ({entry.shown}): duplicates repo {first} "
                "(same url, scope, base and depth)"
            )
        entries.append(entry)
    return entries, budget


def _entry(where: Path, number: int, table: object) -> Entry:
    name = f"{where}: repo {number}"
    if not isinstance(table, dict):
        raise UsageError(f"{name}: expected a [[repo]] table")
    url = table.get("url")
    if isinstance(url, str) and url.strip():
        name += f" ({display(url)})"
    unknown = sorted(set(table) - set(KEYS) - set(FLAG_KEYS))
    if unknown:
        known = ", ".join((*KEYS, *FLAG_KEYS))
        raise UsageError(f"{name}: unknown key(s) {', '.join(unknown)}; known: {known}")
    for key in KEYS:
        if key in table and not isinstance(table[key], str):
            raise UsageError(f"{name}: {key} must be a string, got {type(table[key]).__name__}")
    for key in FLAG_KEYS:
        if key in table and not isinstance(table[key], bool):
            raise UsageError(f"{name}: {key} must be true or false, got {table[key]!r}")
    if not isinstance(url, str) or not url.strip():
        raise UsageError(f"{name}: url is required (a URL or a path)")
    base = table.get("base")
    if base is not None and not git.valid_ref(base):
        raise UsageError(f"{name}: base is not a valid git ref: {base!r}")
    # With a base the only meaningful scope is the branch against it; without, the whole repo.
    scope = table.get("scope", "branch" if base is not None else "all")
    if scope not in SCOPES:
        raise UsageError(f"{name}: scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if base is not None and scope != "branch":
        raise UsageError(f'{name}: base is only valid with scope = "branch"')
    depth = table.get("depth", "deep")
    if depth not in DEPTHS:
        raise UsageError(f"{name}: depth must be one of {', '.join(DEPTHS)}, got {depth!r}")
    # Refused at load, before any entry is audited: the run state of each carries its URL.
    # Paths are relative to the fleet file, so the file means the same from any directory.
    source = parse_source(url, relative_to=where.parent)
    repos.refuse_credentials(source, name)
    return Entry(
        number=number,
        source=source,
        scope=cast(Scope, scope),
        base=base,
        depth=cast(Depth, depth),
        allow_incomplete=bool(table.get("allow-incomplete", False)),
    )


# --- the index of last audits ----------------------------------------------------------------


def fleet_dir(store_dir: str | os.PathLike[str] | None) -> Path:
    return store.resolve(store_dir) / FLEET_DIR


def _read_index(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        # A damaged index only costs audits that could have been skipped.
        return {}
    audits = data.get("audits") if isinstance(data, dict) else None
    return audits if isinstance(audits, dict) else {}


def reusable(
    store_dir: str | os.PathLike[str] | None, entry: Entry, head: str
) -> tuple[dict[str, Any], store.RunMeta] | None:
    """The stored report and meta of ``entry``'s last completed audit, if it saw ``head`` and
    its report is still in the store."""
    last = _read_index(fleet_dir(store_dir) / INDEX).get(entry.key())
    if not last or last.get("head") != head or not isinstance(last.get("runId"), str):
        return None
    try:
        doc, _, meta = store.load(store_dir, last["runId"])
    except VerifyDagError:
        return None
    return doc, meta


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    # Two fleet runs on one store must not drop each other's entries (read-modify-write).
    with file_lock(directory / ".index.lock"):
        yield


def record(
    store_dir: str | os.PathLike[str] | None, audits: Sequence[tuple[Entry, str, str, str]]
) -> None:
    """Remember completed audits: (entry, head audited, run id, finished time) each."""
    if not audits:
        return
    directory = fleet_dir(store_dir)
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        index = _read_index(directory / INDEX)
        for entry, head, run_id, finished in audits:
            index[entry.key()] = {
                **entry.settings(),
                "url": entry.shown,
                "head": head,
                "runId": run_id,
                "finished": finished,
            }
        text = json.dumps({"version": 1, "audits": index}, indent=2, sort_keys=True) + "\n"
        # The store's own atomic write: a reader never sees half an index.
        write_atomic(directory / INDEX, text.encode("utf-8"))
