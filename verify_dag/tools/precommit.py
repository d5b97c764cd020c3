"""``.pre-commit-config.yaml``, read once for everything that uses it.

pre-commit is how most projects run their linters before a commit. Its hooks say which versions
of the tools a project pins (:mod:`~verify_dag.tools.pinned`) and how it runs them (triage reads
their command lines). A hook's ``files`` / ``exclude`` are Python regexes, searched in
repo-relative paths, with the config's top-level ones on top.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from verify_dag.tools import REGISTRY
from verify_dag.tools.base import ToolSpec

CONFIG = ".pre-commit-config.yaml"
# GitHub owner/name in a hook repository's URL; GitHub's names are case-insensitive.
_GITHUB = re.compile(r"github\.com[/:]([^/]+/[^/]+?)(?:\.git)?/?$", re.IGNORECASE)


@dataclass(frozen=True)
class Hook:
    repo: str  # the repository as written: a URL, "local" or "meta"
    github: str | None  # its owner/name in lower case when it is on GitHub
    rev: str  # stripped; "" when there is none
    id: str
    args: tuple[str, ...] | None  # None when the hook sets no ``args``
    entry: str | None
    additional_dependencies: tuple[str, ...]
    files: str | None  # None: pre-commit's default (every file)
    exclude: str | None  # None: pre-commit's default (none)
    pass_filenames: bool


@dataclass(frozen=True)
class Config:
    hooks: tuple[Hook, ...] = ()
    files: str | None = None  # the top-level ``files`` and ``exclude``
    exclude: str | None = None


def read(workdir: Path) -> Config:
    """``workdir``'s pre-commit config; empty when it has none or the file cannot be read (then
    the project declares nothing we can use)."""
    path = workdir / CONFIG
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return Config()
    if not isinstance(data, dict):
        return Config()
    hooks: list[Hook] = []
    for repo in data.get("repos") or ():
        if not isinstance(repo, dict):
            continue
        url = str(repo.get("repo", ""))
        m = _GITHUB.search(url)
        for hook in repo.get("hooks") or ():
            if not isinstance(hook, dict):
                continue
            args, extra, entry = hook.get("args"), hook.get("additional_dependencies"), None
            if isinstance(hook.get("entry"), str):
                entry = hook["entry"]
            hooks.append(
                Hook(
                    repo=url,
                    github=m.group(1).lower() if m else None,
                    rev=str(repo.get("rev", "")).strip(),
                    id=str(hook.get("id", "")),
                    args=tuple(str(a) for a in args) if isinstance(args, list) else None,
                    entry=entry,
                    additional_dependencies=tuple(
                        str(e)
                        for e in (extra if isinstance(extra, list) else ())
                        if isinstance(e, str | int | float)
                    ),
                    files=_pattern(hook.get("files")),
                    exclude=_pattern(hook.get("exclude")),
                    pass_filenames=hook.get("pass_filenames", True) is not False,
                )
            )
    return Config(tuple(hooks), _pattern(data.get("files")), _pattern(data.get("exclude")))


def mirrored(hook: Hook) -> ToolSpec | None:
    """The registry tool whose PyPI mirror ``hook`` is, or None (the hook stays the project's)."""
    for spec in REGISTRY.values():
        mirror = spec.mirror
        if mirror is not None and hook.github in mirror.repos and hook.id in mirror.hooks:
            return spec
    return None


def _pattern(value: object) -> str | None:
    # pre-commit's defaults: files '' (everything) and exclude '^$' (nothing).
    return value if isinstance(value, str) and value not in ("", "^$") else None
