"""The run directory of a completion run: where it is, its files and its audit trail.

``<runs dir>/<RUN_ID>/`` holds the input ``parsed_scope.json`` and everything the steps write:
``extracted_completion.json``, ``execution_result.json``, ``verify_result.json``,
``VERIFY_REPORT.md`` and ``dispatches.jsonl`` (one row per step that ran). The runs directory is
``--runs-dir``, else ``$VERIFY_DAG_RUNS_DIR``, else ``$XDG_DATA_HOME/verify-dag/completion-runs``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from verify_dag import files
from verify_dag.completion.models import Dispatch, Mode
from verify_dag.errors import FatalError, UsageError

RUNS_ENV = "VERIFY_DAG_RUNS_DIR"
PARSED_SCOPE = "parsed_scope.json"
EXTRACTED = "extracted_completion.json"
EXECUTION = "execution_result.json"
VERIFY_RESULT = "verify_result.json"
REPORT = "VERIFY_REPORT.md"
DISPATCHES = "dispatches.jsonl"
LOCK = ".verify-dag-completion.lock"

# A run id names one directory inside the runs directory: no separators, no leading dot.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Our rows in dispatches.jsonl; other stages of the same run may log theirs there too.
_OUR_STEP = re.compile(
    r"step[1-4]\.iter[1-9][0-9]*\.(extract|execute|classify|report)"
    r"|verifier\.quick"
)

M = TypeVar("M", bound=BaseModel)


def default_dir() -> Path:
    explicit = os.environ.get(RUNS_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "verify-dag" / "completion-runs"


def run_dir(runs_dir: str | None, run_id: str) -> Path:
    """``DIR/RUN_ID``, refusing a run id that could name anything else."""
    if not _RUN_ID.fullmatch(run_id):
        raise UsageError(
            f"not a run id: {run_id!r}",
            hint="letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
    base = Path(runs_dir).expanduser() if runs_dir else default_dir()
    return base.resolve() / run_id


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def sha256(path: Path) -> str | None:
    data = read_bytes(path)
    return None if data is None else hashlib.sha256(data).hexdigest()


def write_text(path: Path, text: str) -> None:
    """Write to a temporary name and move it into place: a reader never sees half a file."""
    files.write_atomic(path, text.encode("utf-8"))


def write_model(path: Path, model: BaseModel) -> None:
    write_text(path, json.dumps(model.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")


def read_model(path: Path, cls: type[M]) -> M:
    """An artifact an earlier step wrote; a missing or damaged one stops the run (exit 3)."""
    try:
        return cls.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise FatalError(
            f"{path.name} is missing from {path.parent}", hint="an earlier step did not write it"
        ) from None
    except ValidationError as exc:
        raise FatalError(
            f"{path.name} in {path.parent} is damaged: {exc.errors()[0]['msg']}"
        ) from None


def dispatches(directory: Path) -> list[dict[str, Any]]:
    """Our rows of dispatches.jsonl, in order; lines of other stages are passed over."""
    text = read_bytes(directory / DISPATCHES)
    rows = []
    for line in (text or b"").decode("utf-8", "replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (
            isinstance(row, dict)
            and isinstance(row.get("step"), str)
            and _OUR_STEP.fullmatch(row["step"])
            and isinstance(row.get("iteration"), int)
        ):
            rows.append(row)
    return rows


def append_dispatch(directory: Path, row: Dispatch) -> None:
    """Append one row; a redelivered task (same task id) does not append twice."""
    if row.task_id and any(r.get("task_id") == row.task_id for r in dispatches(directory)):
        return
    line = json.dumps(row.model_dump(mode="json"), ensure_ascii=False) + "\n"
    # One write on an O_APPEND descriptor: rows of concurrent writers never interleave.
    fd = os.open(directory / DISPATCHES, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def next_iteration(rows: list[dict[str, Any]]) -> int:
    return max((int(r["iteration"]) for r in rows), default=0) + 1


def mode_usage(rows: list[dict[str, Any]], iteration: int, mode: Mode) -> dict[str, int]:
    """Iterations per mode, counting the one being reported."""
    runs = {(int(r["iteration"]), str(r.get("mode", "full"))) for r in rows}
    runs.add((iteration, mode))
    counts = Counter(m for _, m in runs)
    return {"full": counts["full"], "quick": counts["quick"]}


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """One completion run at a time per run directory: iterations are numbered from the trail."""
    with files.file_lock(directory / LOCK, deadline=time.monotonic()) as got:
        if not got:
            raise FatalError(
                f"another verify-dag completion is running on {directory}",
                hint="wait for it to finish, then run again",
            )
        yield
