"""Every Celery task's start and end in this process, from Celery's own task_prerun and
task_postrun signals: the embedded default runs the whole DAG in the benchmark's process."""

from __future__ import annotations

import threading
import time
from typing import Any

from celery import signals


class TaskTimes:
    def __init__(self) -> None:
        self._spans: dict[str, list[float]] = {}
        self._names: dict[str, str] = {}
        self._lock = threading.Lock()
        signals.task_prerun.connect(self._start, weak=False)
        signals.task_postrun.connect(self._end, weak=False)

    def _start(self, task_id: str | None = None, task: Any = None, **_: Any) -> None:
        with self._lock:
            if task_id:
                self._names[task_id], self._spans[task_id] = task.name, [time.perf_counter()]

    def _end(self, task_id: str | None = None, **_: Any) -> None:
        with self._lock:
            if task_id in self._spans:
                self._spans[task_id].append(time.perf_counter())

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()
            self._names.clear()

    def durations(self) -> dict[str, list[float]]:
        """Task name -> the seconds each of its runs took, since the last clear()."""
        out: dict[str, list[float]] = {}
        with self._lock:
            for task_id, span in self._spans.items():
                if len(span) == 2:
                    out.setdefault(self._names[task_id], []).append(span[1] - span[0])
        return out
