"""The progress display of a run a client waits for (``verify``).

On a terminal (stderr), a line per phase as it ends and, below them, the phases running now with
their elapsed time, rewritten in place while they run. Elsewhere (CI logs), one plain line per
phase as it ends. ``--quiet``: nothing. A phase's line says what it came to: ``done``, or the
statuses of the skills it ran when one did not complete (``NOT_RUN``, ``BLOCKED``, ``FAILED``),
``failed`` for a task that failed, ``cancelled``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from celery import states

Meta = Callable[[str], dict[str, Any]]
_QUIET_STATUSES = frozenset({"COMPLETED", "PASSED", "SKIPPED"})


class _Ref(Protocol):
    @property
    def label(self) -> str: ...
    @property
    def task_id(self) -> str: ...


class _Plan(Protocol):
    @property
    def phases(self) -> tuple[_Ref, ...]: ...


class Progress:
    def __init__(self, stream: TextIO | None, *, live: bool = True) -> None:
        self.stream = stream
        self.live = live
        self.ended: set[str] = set()
        self.started: dict[str, float] = {}
        self.last_end = time.monotonic()
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
                began = self.started.setdefault(ref.task_id, now)
                running.append(f"{ref.label} ({now - began:.0f} s)")
        if self.live:
            self._status("running: " + ", ".join(running) if running else "")

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
