"""The file primitives shared across modules: atomic replacement, a write that never
overwrites, and inter-process locks."""

from __future__ import annotations

import fcntl
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from verify_dag.errors import UsageError


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` in one rename: a reader sees the old file or the new one, never half.

    The temporary file is opened with ``"xb"`` rather than made by mkstemp, so it gets the umask's
    mode (mkstemp's is 0600) and other readers of a shared directory can read it; ``mode`` sets
    another one (a rewritten file keeping its own).
    """
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_new(path: str, text: str, flag: str) -> None:
    """Write ``text`` to a file that must not exist: opened with "x", so that even a file that
    appeared while the run was going is never overwritten (a UsageError naming ``flag``)."""
    try:
        with open(path, "x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        raise UsageError(f"{flag}: {path} already exists; not overwritten") from None


@contextmanager
def file_lock(path: Path, deadline: float | None = None, *, shared: bool = False) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path`` (created if missing) across this host's processes;
    with ``shared``, a shared one (any number of holders, none exclusive).

    Without ``deadline`` it waits as long as it takes and yields True. With one (a
    ``time.monotonic()`` value) it yields False once the deadline passes without the lock; a
    deadline already past means one try. Locks are per open file, so two threads of one
    process exclude each other too; never take one while holding another on the same path.
    """
    kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    with open(path, "a+b") as fh:
        if deadline is None:
            fcntl.flock(fh, kind)
        else:
            while True:
                try:
                    fcntl.flock(fh, kind | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
