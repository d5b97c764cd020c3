"""The progress display of a run a client waits for (``verify``).

On a terminal (stderr), a line per phase as it ends and, below them, the phases running now with
their elapsed time and the run's, rewritten in place while they run. Elsewhere (CI logs), plain
lines: one as a phase starts, one as it ends, and while phases run one every
:data:`HEARTBEAT` seconds naming them with their elapsed time and the run's, so a log is never
silent long enough to look hung. ``--quiet``: nothing. A phase's line says what it came to:
``done``, or the statuses of the skills it ran when one did not complete (``NOT_RUN``,
``BLOCKED``, ``FAILED``), ``failed`` for a task that failed, ``cancelled``.

Only this display writes to the terminal while a run is waited for: the repository's own output
is captured by the subprocess chokepoint and reaches the report, never the live line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from celery import states

Meta = Callable[[str], dict[str, Any]]
_QUIET_STATUSES = frozenset({"COMPLETED", "PASSED", "SKIPPED"})
HEARTBEAT = 10.0  # seconds between "still running" lines in a log


class _Ref(Protocol):
    @property
    def label(self) -> str: ...
    @property
    def task_id(self) -> str: ...


class _Plan(Protocol):
    @property
    def phases(self) -> tuple[_Ref, ...]: ...


class Progress:
    def __init__(
        self, stream: TextIO | None, *, live: bool = True, heartbeat: float = HEARTBEAT
    ) -> None:
        self.stream = stream
        self.live = live
        self.heartbeat = heartbeat
        self.ended: set[str] = set()
        self.started: dict[str, float] = {}
        self.began = self.last_end = self.last_said = time.monotonic()
        self.status_width = 0

    def update(self, p: _Plan, meta: Meta) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        running: list[str] = []
        for ref in p.phases:
            if ref.task_id in self.ended:
                continue
            m = meta(ref.task_id)
            state = m.get("status")
            if state in states.READY_STATES:
                self.ended.add(ref.task_id)
                began = self.started.get(ref.task_id, self.last_end)
                self._line(
                    f"[{len(self.ended)}/{len(p.phases)}] {ref.label}: {outcome(m)} "
                    f"({now - began:.1f} s)"
                )
                self.last_end = now
            elif state == states.STARTED:
                if ref.task_id not in self.started:
                    self.started[ref.task_id] = now
                    if not self.live:
                        self._line(f"{ref.label}: started")
                running.append(f"{ref.label} ({now - self.started[ref.task_id]:.0f} s)")
        total = f"{now - self.began:.0f} s in all"
        if self.live:
            self._status(f"running: {', '.join(running)}; {total}" if running else "")
        elif running and now - self.last_said >= self.heartbeat:
            self._line(f"running: {', '.join(running)}; {total}")

    def close(self) -> None:
        if self.stream is not None and self.live:
            self._status("")

    def _line(self, text: str) -> None:
        assert self.stream is not None
        if self.live:
            self._status("")
            self.stream.write(f"  {text}\n")
        else:
            self.stream.write(f"verify-dag: {text}\n")
        self.stream.flush()
        self.last_said = time.monotonic()

    def _status(self, text: str) -> None:
        """The line of what is running now, rewritten in place (a terminal only)."""
        assert self.stream is not None
        text = f"  {text}"[:78] if text else ""
        if text or self.status_width:
            self.stream.write("\r" + text.ljust(self.status_width) + "\r" * (not text))
            self.stream.flush()
        self.status_width = len(text)


def outcome(meta: dict[str, Any]) -> str:
    """What a phase that ended came to, in a word or two."""
    state = meta.get("status")
    if state == states.REVOKED:
        return "cancelled"
    if state != states.SUCCESS:
        result = meta.get("result")
        if type(result).__name__ == "RunFailed":
            return "done (the run ended in error or blocked)"
        return "failed"
    result = meta.get("result")
    # A phase's result is a reference to what it stored (tasks/stash.py): a header task's names
    # each skill's status, a state's where the run stopped; the reviewers' fan-in is a list of them.
    refs = result if isinstance(result, list) else [result]
    said = sorted(
        {
            str(status)
            for ref in refs
            if isinstance(ref, dict)
            for status in (ref.get("skills") or {}).values()
            if status not in _QUIET_STATUSES
        }
    )
    if said:
        return " / ".join(said)
    if isinstance(result, dict) and result.get("stoppedAt"):
        return f"done (the run stopped at {result['stoppedAt']})"
    return "done"
