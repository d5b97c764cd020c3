"""Test doubles for external paid services: a fake model CLI under the real names."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FAKE_MODEL = Path(__file__).with_name("fake_model.py")


def install(bin_dir: Path, names: Iterable[str] = ("codex", "claude")) -> None:
    """Write executable ``codex`` / ``claude`` (or any other names) into ``bin_dir``.

    Each runs fake_model.py as that CLI; prepend ``bin_dir`` to PATH to put them in front.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        wrapper = bin_dir / name
        wrapper.write_text(
            "#!/bin/sh\n"
            f"FAKE_MODEL_NAME={shlex.quote(name)}\nexport FAKE_MODEL_NAME\n"
            f"exec {shlex.quote(sys.executable)} "
            f'{shlex.quote(str(FAKE_MODEL))} "$@"\n',
            encoding="utf-8",
        )
        wrapper.chmod(0o755)


def logged_calls(log: Path) -> list[dict[str, Any]]:
    """The calls the fake CLIs logged to ``log`` ($FAKE_MODEL_LOG), oldest first: each its
    ``name``, ``argv``, ``prompt`` and ``cwd``. None yet when no call wrote the log."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
