"""The linter versions a project pins in ``.pre-commit-config.yaml``, and where each hook applies.

pre-commit is how most projects run ruff and mypy before a commit: a hook repository at a
``rev:``, the hook's ``additional_dependencies`` (what mypy needs to resolve imports) and its
``files`` / ``exclude`` patterns (Python regexes, searched in repo-relative paths, as pre-commit
applies them, with the config's top-level ones on top). pre-commit itself installs hooks from
their git repositories, which this host cannot reach; the hooks below are mirrors of PyPI
packages (the repository only wraps the release of the same version), so the same tool at the
same version comes from the package index instead. Hooks of any other repository are not ours
to run: they stay the project's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

CONFIG = ".pre-commit-config.yaml"

# hook repository (owner/name, case-insensitive) -> hook id -> (ToolSpec name, PyPI package).
# Tools as data: a new mirror is one row.
HOOKS: dict[str, dict[str, tuple[str, str]]] = {
    "astral-sh/ruff-pre-commit": {"ruff": ("ruff", "ruff"), "ruff-check": ("ruff", "ruff")},
    "charliermarsh/ruff-pre-commit": {"ruff": ("ruff", "ruff"), "ruff-check": ("ruff", "ruff")},
    "pre-commit/mirrors-mypy": {"mypy": ("mypy", "mypy")},
}
_REPO = re.compile(r"github\.com[/:]([^/]+/[^/]+?)(?:\.git)?/?$", re.IGNORECASE)


@dataclass(frozen=True)
class Pin:
    tool: str  # the ToolSpec it pins: "ruff", "mypy"
    requirement: str  # "ruff==0.6.9"
    extra: tuple[str, ...] = ()  # the hook's additional_dependencies
    files: str | None = None  # the hook's `files` regex
    exclude: str | None = None  # the hook's `exclude` regex
    top_files: str | None = None  # the config's top-level `files` and `exclude`
    top_exclude: str | None = None

    @property
    def source(self) -> str:
        return f"{CONFIG} ({self.requirement})"

    def applies(self, path: str) -> bool:
        """Whether pre-commit would hand ``path`` (repo-relative) to this hook."""
        for pattern, wanted in (
            (self.top_files, True),
            (self.files, True),
            (self.top_exclude, False),
            (self.exclude, False),
        ):
            if pattern is None:
                continue
            try:
                found = re.search(pattern, path) is not None
            except re.error:
                continue  # a pattern Python cannot read: pre-commit would refuse it, not us
            if found != wanted:
                return False
        return True


def read(workdir: Path) -> dict[str, Pin]:
    """The pins of ``workdir``'s pre-commit config, by tool; {} when it has none or the file
    cannot be read (then the project pins nothing we can use)."""
    path = workdir / CONFIG
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    if not isinstance(data, dict):
        return {}
    top_files, top_exclude = _pattern(data.get("files")), _pattern(data.get("exclude"))
    out: dict[str, Pin] = {}
    for repo in data.get("repos") or ():
        if not isinstance(repo, dict):
            continue
        m = _REPO.search(str(repo.get("repo", "")))
        hooks = HOOKS.get(m.group(1).lower()) if m else None
        rev = str(repo.get("rev", "")).strip()
        if hooks is None or not rev:
            continue
        version = rev[1:] if rev[:1] in ("v", "V") else rev
        for hook in repo.get("hooks") or ():
            known = hooks.get(str(hook.get("id", ""))) if isinstance(hook, dict) else None
            if known is None or known[0] in out:
                continue
            tool, package = known
            extra = hook.get("additional_dependencies") or ()
            out[tool] = Pin(
                tool=tool,
                requirement=f"{package}=={version}",
                extra=tuple(str(e) for e in extra if isinstance(e, str | int | float)),
                files=_pattern(hook.get("files")),
                exclude=_pattern(hook.get("exclude")),
                top_files=top_files,
                top_exclude=top_exclude,
            )
    return out


def _pattern(value: object) -> str | None:
    # pre-commit's defaults: files '' (everything) and exclude '^$' (nothing).
    return value if isinstance(value, str) and value not in ("", "^$") else None
