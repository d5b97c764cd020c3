"""The in-process worker used when no broker is configured.

Celery's memory transport and cache result backend, with a real ``WorkController`` in a thread of
this process: the same DAG as on a fleet, with no server. One worker per process, started on first
use and reused, because a worker on the memory transport takes up to two seconds to notice it
should stop (its consume loop blocks in ``drain_events(timeout=2.0)``); a CLI run never waits for
that, it just exits. See bench/bench_orchestration.py for what a run costs.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.worker import WorkController
from celery.worker import state as worker_state

from verify_dag import skills
from verify_dag.tasks.app import FLEET_QUEUE, QUEUES, app

log = logging.getLogger(__name__)

# Wide enough for the widest chord: the tester and the derived probes beside static analysis,
# then beside every review-queue skill at once (at deep all of them can be due). Model calls wait
# on the network, not on a core, so a thread each costs nothing; a narrower pool would queue them
# one behind another. Fleet workers size their own pools: the review queue's consumers stay the
# fleet-wide cap.
CONCURRENCY = 2 + sum(1 for s in skills.SKILLS.values() if s.queue == "review")
START_TIMEOUT = 30.0


class _Worker(WorkController):  # type: ignore[misc]  # celery ships no types
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.started = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        self.started.set()


_lock = threading.Lock()
_worker: _Worker | None = None
_thread: threading.Thread | None = None


def ensure_worker() -> None:
    """Start the process's embedded worker unless it is already running."""
    global _worker, _thread
    if not str(app.conf.broker_url).startswith("memory://"):
        raise RuntimeError("the embedded worker only runs on the memory transport")
    with _lock:
        if _thread is not None and _thread.is_alive():
            return
        app.finalize()
        # Pool threads have no thread-local current app; without a default they would send the
        # next chain step through Celery's default app (amqp://localhost).
        app.set_current()
        app.set_default()
        worker = _Worker(
            app=app,
            hostname="embedded@verify-dag",
            pool="threads",
            concurrency=CONCURRENCY,
            queues=[*QUEUES, FLEET_QUEUE],
            loglevel=logging.WARNING,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        thread = threading.Thread(
            target=worker.start, name="verify-dag-embedded-worker", daemon=True
        )
        thread.start()
        if not worker.started.wait(START_TIMEOUT):
            raise RuntimeError("the embedded Celery worker did not start")
        _worker, _thread = worker, thread


def shutdown(timeout: float = 5.0) -> None:
    """Stop the embedded worker and wait for it (tests; a CLI process simply exits)."""
    global _worker, _thread
    with _lock:
        if _thread is None:
            return
        worker_state.should_terminate = 0
        _thread.join(timeout)
        worker_state.should_terminate = None
        _worker, _thread = None, None
