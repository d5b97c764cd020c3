"""The linter versions a project pins in ``.pre-commit-config.yaml``, and where each hook applies.

pre-commit runs ruff and mypy from a hook repository at a ``rev:``, with the hook's
``additional_dependencies`` (what mypy needs to resolve imports) and its ``files`` / ``exclude``
patterns. pre-commit itself installs hooks from their git repositories, which this host cannot
reach; a registry tool's ``mirror`` hooks only wrap the PyPI release of the same version, so the
same tool at the same version comes from the package index instead. Hooks of any other repository
are not ours to run: they stay the project's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from verify_dag.tools import precommit
from verify_dag.tools.precommit import CONFIG


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
    config = precommit.read(workdir)
    out: dict[str, Pin] = {}
    for hook in config.hooks:
        spec = precommit.mirrored(hook)
        if spec is None or spec.package is None or not hook.rev or spec.name in out:
            continue
        version = hook.rev[1:] if hook.rev[:1] in ("v", "V") else hook.rev
        out[spec.name] = Pin(
            tool=spec.name,
            requirement=f"{spec.package}=={version}",
            extra=hook.additional_dependencies,
            files=hook.files,
            exclude=hook.exclude,
            top_files=config.files,
            top_exclude=config.exclude,
        )
    return out
