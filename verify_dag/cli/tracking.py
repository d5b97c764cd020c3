"""What became of a submitted run, for ``status``, ``wait`` and ``cancel``: its task ids (kept in
the run's sentinel by ``client.announce``), whether a worker or a queue still holds any of them,
and its cancellation.

A run whose tasks are in no queue and on no worker will never finish: its messages were purged
(``celery purge``), or lost with a broker that forgot them. ``status`` says so instead of PENDING
forever; ``wait`` stops waiting.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from typing import Any

from celery import states

from verify_dag.client import read_meta
from verify_dag.tasks.app import CANCELLED, QUEUES, app, sentinel_id

INSPECT_TIMEOUT = 1.0
# A task moves from a queue to a worker (and a chord's body into a queue) in milliseconds; a run
# is called orphaned only when two looks this far apart found it nowhere.
SECOND_LOOK = 1.0


def run_tasks(run_id: str) -> list[str] | None:
    """The run's task ids, from its sentinel; None for a run submitted before they were kept, or
    one the result backend does not know."""
    meta = read_meta(sentinel_id(run_id))
    record = meta.get("result")
    if not meta.get("task_id") or not isinstance(record, dict):
        return None
    tasks = record.get("tasks")
    return [str(t) for t in tasks] if isinstance(tasks, list) else None


def cancelled(run_id: str) -> bool:
    return bool(read_meta(sentinel_id(run_id)).get("status") == CANCELLED)


def unfinished(task_ids: Sequence[str]) -> list[str]:
    return [t for t in task_ids if read_meta(t).get("status") not in states.READY_STATES]


def held(task_ids: Sequence[str]) -> str | None:
    """Who holds one of ``task_ids`` now: a worker, a queue with messages in it, or None."""
    wanted = set(task_ids)
    # The broker's records first: they answer at once, where a broadcast waits its whole timeout.
    where = _in_broker(wanted)
    if where is not None:
        return where
    inspect = app.control.inspect(timeout=INSPECT_TIMEOUT)
    # One broadcast finds a task a worker runs or holds (query_task); a task waiting for its
    # ETA (a retry's countdown) is found by query_task only from Celery 5.7 on, so the
    # workers' scheduled lists are asked too.
    for worker, found in (inspect.query_task(sorted(wanted)) or {}).items():
        for tid, (kind, _) in (found or {}).items():
            if tid in wanted:
                return f"{kind} on {worker}"
    for worker, entries in (inspect.scheduled() or {}).items():
        for entry in entries or ():
            if (entry.get("request") or {}).get("id") in wanted:
                return f"scheduled on {worker}"
    # Asked again: a message a worker gave back (restored at its shutdown) while the
    # broadcasts went round is in the broker now.
    return _in_broker(wanted)


def _in_broker(wanted: set[str]) -> str | None:
    if _unacked(wanted):
        return "delivered to a worker, not yet acknowledged"
    for queue in QUEUES:
        count = _queued(queue)
        if count:
            # The queue's messages are not read here (AMQP has no look without taking them):
            # a run with any queued work may be waiting for its turn.
            return f"{count} message(s) waiting in queue {queue}"
    return None


def orphaned(run_id: str) -> bool:
    """Whether the run is unfinished and nothing holds its tasks, twice in a row."""
    tasks = run_tasks(run_id)
    if not tasks:
        return False
    for attempt in range(2):
        left = unfinished(tasks)
        if not left or held(left) is not None:
            return False
        if attempt == 0:
            time.sleep(SECOND_LOOK)
    return True


def _queued(queue: str) -> int:
    with app.connection_for_read() as conn:
        channel = conn.channel()  # a passive declare of a missing queue closes an AMQP channel
        try:
            _, count, _ = channel.queue_declare(queue=queue, passive=True)
        except Exception:  # noqa: BLE001 - a queue that does not exist holds nothing
            return 0
        finally:
            with contextlib.suppress(Exception):  # already closed by the broker
                channel.close()
    return int(count or 0)


def _unacked(wanted: set[str]) -> bool:
    """Redis keeps delivered, unacknowledged messages in kombu's ``unacked`` hash: a worker that
    died holding one gives it back after the visibility timeout."""
    if not str(app.conf.broker_url).startswith(("redis", "rediss")):
        return False
    with app.connection_for_read() as conn:
        client: Any = conn.default_channel.client
        for raw in client.hvals("unacked"):
            try:
                message = json.loads(raw)[0]
                tid = message.get("headers", {}).get("id")
            except (ValueError, LookupError, AttributeError, TypeError):
                continue
            if tid in wanted:
                return True
    return False
