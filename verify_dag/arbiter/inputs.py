"""The arbiter's 10 positional arguments, checked before anything is read or scored."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from verify_dag.arbiter import RUBRIC_VERSION, InputError

MAX_INPUT = 64 * 1024 * 1024  # bytes; a bundle or plan bigger than this is not one we wrote

ARGUMENTS = (
    "bundle_path",
    "bundle_hash",
    "request_id",
    "attempt_id",
    "prior_state_version",
    "plan_path",
    "plan_hash",
    "inventory_hash",
    "runner_version",
    "rubric_version",
)
# The 8 fields every verdict echoes back verbatim, in the order docs/arbiter.md lists them.
TUPLE = (
    "request_id",
    "attempt_id",
    "prior_state_version",
    "bundle_hash",
    "plan_hash",
    "inventory_hash",
    "runner_version",
    "rubric_version",
)
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Request:
    bundle_path: str
    bundle_hash: str
    request_id: str
    attempt_id: str
    prior_state_version: str
    plan_path: str
    plan_hash: str
    inventory_hash: str
    runner_version: str
    rubric_version: str

    def echo(self) -> dict[str, str]:
        return {name: str(getattr(self, name)) for name in TUPLE}


def parse(values: Sequence[str]) -> Request:
    """The request, or InputError naming the first argument that is not as docs/arbiter.md says."""
    if len(values) != len(ARGUMENTS):
        raise InputError(
            f"expected {len(ARGUMENTS)} arguments ({' '.join(ARGUMENTS)}), got {len(values)}"
        )
    request = Request(*values)
    for f in fields(Request):
        value = getattr(request, f.name)
        if not value.strip():
            raise InputError(f"{f.name} is empty")
        if "\n" in value or "\r" in value:
            raise InputError(f"{f.name} spans more than one line")
    if not _HEX32.fullmatch(request.request_id):
        raise InputError(
            f"request_id must be 32 lowercase hex digits, got {_show(request.request_id)}"
        )
    for name in ("bundle_hash", "plan_hash", "inventory_hash"):
        value = getattr(request, name)
        if not _HEX64.fullmatch(value):
            raise InputError(
                f"{name} must be a sha256 (64 lowercase hex digits), got {_show(value)}"
            )
    if request.rubric_version != RUBRIC_VERSION:
        raise InputError(
            f"rubric_version {_show(request.rubric_version)} is not implemented "
            f"(this arbiter scores rubric {RUBRIC_VERSION})"
        )
    return request


def read(path: str, name: str) -> bytes:
    """An input file's bytes; unreadable (missing, a directory, no permission, too big) is a
    usage/environment error, exit 3. Whether the bytes parse is the rubric's business."""
    p = Path(path)
    try:
        if p.is_file() and p.stat().st_size > MAX_INPUT:
            raise InputError(f"{name} {path} is larger than {MAX_INPUT // (1024 * 1024)} MiB")
        return p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {name} {path}: {exc.strerror or exc}") from None


def _show(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")
