"""A lost worker's tasks come back within seconds; a live task is never handed to a second worker.

With ``task_acks_late`` kombu's Redis transport keeps every delivered, unacknowledged message in a
hash (``unacked``) and its delivery time in a sorted set (``unacked_index``). Every consuming
worker runs ``restore_visible`` from time to time: a message whose score is older than the
visibility timeout goes back to its queue. A short timeout brings a SIGKILLed worker's tasks back
quickly, but on its own would also hand a long test suite to a second worker while the first one
still runs it. So every process that runs tasks keeps one heartbeat thread that moves the scores
of its running tasks' delivery tags to "now": a live task's message never looks old, a dead
worker's stops moving and is restored by another worker's sweep within about the visibility
timeout plus one sweep interval.

Two more things make a restart of Redis survivable, both in the broker transport
(``broker_transport = TRANSPORT``, a subclass of kombu's Redis transport): a channel never pushes
its unacknowledged messages back when it closes, since on a lost connection their tasks keep
running (the heartbeat keeps their messages) and after any stop the sweep brings back what a worker
did not finish; and a channel whose connection Celery dropped still reaches Redis to acknowledge
the tasks that finish after the reconnect. Stock kombu 5.7 fails both with AttributeError (the
channel's connection, or its client, is None once Celery closes a broken connection), which stops
the worker with "Unrecoverable error" on the first Redis restart during a task.

A worker also retries its result writes and its sends of the next phase for about a minute
(``WORKER_SETTINGS``, applied when a worker starts): without them the first write during a
restart fails at once and the run stops.

The heartbeat lives where the task runs (a prefork child, or the worker process for the threads
and solo pools), starts with the first task a process runs and only ever touches tags that are
still in the index (``ZADD XX``), so a message that was acknowledged or restored in the meantime
is never put back. On the memory transport (the embedded worker) there is nothing to keep alive
and none of this runs.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from celery import signals

from verify_dag import sandbox, workspace
from verify_dag.errors import UsageError

log = logging.getLogger(__name__)

VISIBILITY_ENV = "VERIFY_DAG_VISIBILITY_TIMEOUT"
# Seconds. A SIGKILLed worker's tasks are back in their queue 25-35 s after the kill; an outage of
# Redis shorter than about 25 s never makes a live task look lost.
DEFAULT_VISIBILITY_TIMEOUT = 30.0
# Below this a heartbeat delayed by a busy machine could make a live task look lost.
MIN_VISIBILITY_TIMEOUT = 3.0
# Heartbeats and sweeps per visibility timeout: a task survives five missed heartbeats.
BEATS_PER_TIMEOUT = 6

REDIS_SCHEMES = ("redis://", "rediss://", "redis+socket://", "sentinel://")
# The broker transport for redis:// and rediss:// URLs (kombu resolves "module:attribute").
TRANSPORT = "verify_dag.tasks.reliability:RedisTransport"


def is_redis(url: str) -> bool:
    return url.startswith(REDIS_SCHEMES)


def visibility_timeout() -> float:
    """The visibility timeout in seconds: ``$VERIFY_DAG_VISIBILITY_TIMEOUT`` or 30."""
    text = os.environ.get(VISIBILITY_ENV, "").strip()
    if not text:
        return DEFAULT_VISIBILITY_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{VISIBILITY_ENV}: expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < MIN_VISIBILITY_TIMEOUT:
        raise UsageError(
            f"{VISIBILITY_ENV}: must be at least {MIN_VISIBILITY_TIMEOUT:.0f} seconds, got {text!r}"
        )
    return value


def beat_interval(timeout: float) -> float:
    """Seconds between heartbeats, and between a worker's restore sweeps."""
    return max(0.5, timeout / BEATS_PER_TIMEOUT)


# What a worker (never a client) does through an outage of Redis: ride it out for about a minute.
WORKER_SETTINGS: dict[str, Any] = {
    # Result writes (and reads) retry with Celery's jittered exponential back-off, at most 5 s
    # apart: 25 retries take about 60 s (between about 45 s and 115 s).
    "result_backend_always_retry": True,
    "result_backend_max_retries": 25,
    "result_backend_base_sleep_between_retries_ms": 500,
    "result_backend_max_sleep_between_retries_ms": 5000,
    # Sending the next phase: about 55 s of retries instead of kombu's 0.6 s.
    "task_publish_retry_policy": {
        "max_retries": 30,
        "interval_start": 0,
        "interval_step": 0.5,
        "interval_max": 2,
    },
}
# The backend reads these settings when it is made; a backend this process made already is
# updated in place (prefork children inherit it).
_BACKEND_ATTRIBUTES = {
    "result_backend_always_retry": "always_retry",
    "result_backend_max_retries": "max_retries",
    "result_backend_base_sleep_between_retries_ms": "base_sleep_between_retries_ms",
    "result_backend_max_sleep_between_retries_ms": "max_sleep_between_retries_ms",
}


def for_workers(app: Any) -> None:
    """Apply WORKER_SETTINGS to a worker on a Redis broker (the ``worker_init`` signal)."""
    if not is_redis(str(app.conf.broker_url or "")):
        return
    app.conf.update(WORKER_SETTINGS)
    backend = app.backend
    for setting, attribute in _BACKEND_ATTRIBUTES.items():
        setattr(backend, attribute, WORKER_SETTINGS[setting])


def broker_transport(url: str) -> str | None:
    """The ``broker_transport`` setting for ``url``: ours for plain Redis URLs. (Sentinel and
    ``redis+socket://`` URLs keep kombu's own: the scheme picks it, whatever the setting.)"""
    return TRANSPORT if url.startswith(("redis://", "rediss://")) else None


def redis_transport_options(timeout: float) -> dict[str, float]:
    """kombu Redis transport options for ``timeout`` (see kombu/transport/redis.py)."""
    step = beat_interval(timeout)
    return {
        "visibility_timeout": timeout,
        # kombu sweeps every interval * throttle seconds: by default 10 * 10, far too rarely.
        "unacked_restore_interval": step,
        "unacked_restore_throttle": 1,
        # A worker killed in the middle of a sweep leaves the sweep lock behind; by default for
        # 300 s, during which nobody restores anything.
        "unacked_mutex_expire": math.ceil(max(timeout, 10.0)),
    }


Bump = Callable[[list[str]], None]


class Heartbeat:
    """Keeps the delivery tags of the tasks running in this process fresh in ``unacked_index``.

    ``bump`` does the Redis write; it is given every running tag once per ``interval`` from a
    daemon thread started by the first ``add`` in a process (a prefork child inherits no thread,
    so the pid is checked).
    """

    def __init__(self, bump: Bump, interval: float) -> None:
        self._bump = bump
        self.interval = interval
        self._pid = -1
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._tags: Counter[str] = Counter()
        self._thread: threading.Thread | None = None
        self._failing = False

    def add(self, tag: str) -> None:
        if self._pid != os.getpid():
            self._reset()
        with self._lock:
            self._tags[tag] += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="verify-dag-heartbeat", daemon=True
                )
                self._thread.start()

    def discard(self, tag: str) -> None:
        if self._pid != os.getpid():
            return
        with self._lock:
            self._tags[tag] -= 1
            if self._tags[tag] <= 0:
                del self._tags[tag]

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._tags)

    def beat(self) -> None:
        """One heartbeat. A failure (Redis away) is logged once and retried on the next beat."""
        tags = self.running()
        if not tags:
            return
        try:
            self._bump(tags)
        except Exception as exc:  # noqa: BLE001 - the thread must outlive any broker error
            if not self._failing:
                log.warning(
                    "heartbeat for %d running task(s) failed, retrying every %.1f s: %s",
                    len(tags),
                    self.interval,
                    exc,
                )
            self._failing = True
            return
        if self._failing:
            log.warning("heartbeat for %d running task(s) works again", len(tags))
        self._failing = False

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            self.beat()


class UnackedIndex:
    """Moves delivery tags to "now" in kombu's ``unacked_index``, through a kombu channel of the
    app's broker so key names, key prefixes and URL forms are exactly the transport's own."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._conn: Any = None
        self._channel: Any = None

    def __call__(self, tags: list[str]) -> None:
        try:
            channel = self._open()
            with channel.conn_or_acquire() as client:
                now = time.time()
                client.zadd(channel.unacked_index_key, dict.fromkeys(tags, now), xx=True)
        except Exception:
            self.close()  # a fresh connection next time
            raise

    def _open(self) -> Any:
        if self._channel is None:
            conn = self._app.connection_for_write()
            try:
                channel = conn.channel()
            except Exception:
                conn.release()
                raise
            self._conn, self._channel = conn, channel
        return self._channel

    def close(self) -> None:
        conn, self._conn, self._channel = self._conn, None, None
        if conn is not None:
            try:
                conn.release()
            except Exception:  # closing a connection that is already broken
                log.debug("closing the heartbeat connection failed", exc_info=True)


def delivery_tag(request: Any) -> str | None:
    """The delivery tag of the message a task request came from (None when run eagerly)."""
    if getattr(request, "is_eager", False):
        return None
    properties = getattr(request, "properties", None) or {}
    tag = properties.get("delivery_tag") if isinstance(properties, dict) else None
    return str(tag) if tag else None


class TaskHeartbeat:
    """The task_prerun/task_postrun handlers: the tasks of ``app`` running on a Redis broker are
    kept alive by ``heartbeat``. The broker is looked up when each task starts, since
    ``app.configure`` may change it after import; on any other broker nothing happens."""

    def __init__(self, app: Any, heartbeat: Heartbeat | None = None) -> None:
        self.app = app
        self.heartbeat = heartbeat or Heartbeat(
            UnackedIndex(app), beat_interval(visibility_timeout_of(app))
        )

    def _tag(self, task: Any) -> str | None:
        if not is_redis(str(self.app.conf.broker_url or "")):
            return None
        return delivery_tag(getattr(task, "request", None))

    def on_prerun(self, task: Any = None, **_: Any) -> None:
        tag = self._tag(task)
        if tag:
            # The worker configured the broker after this module was imported.
            self.heartbeat.interval = beat_interval(visibility_timeout_of(self.app))
            self.heartbeat.add(tag)

    def on_postrun(self, task: Any = None, **_: Any) -> None:
        tag = self._tag(task)
        if tag:
            self.heartbeat.discard(tag)


def install(app: Any) -> TaskHeartbeat:
    """Connect the heartbeat to the task signals of this process (and of its prefork children,
    which inherit the connection), and the worker settings to the start of a worker."""
    handlers = TaskHeartbeat(app)
    signals.task_prerun.connect(handlers.on_prerun, weak=False)
    signals.task_postrun.connect(handlers.on_postrun, weak=False)

    def on_worker_init(**_: Any) -> None:
        for_workers(app)
        # Sandboxes a killed predecessor on this host left running go before this one works.
        sandbox.worker_started()
        # So do the workspaces of runs that ended while no worker here heard of it.
        workspace.sweep()

    signals.worker_init.connect(on_worker_init, weak=False)
    return handlers


def visibility_timeout_of(app: Any) -> float:
    options = app.conf.broker_transport_options or {}
    return float(options.get("visibility_timeout", DEFAULT_VISIBILITY_TIMEOUT))


def __getattr__(name: str) -> Any:
    # The transport is built on first use: importing kombu's Redis transport (and redis-py)
    # costs about 70 ms that an embedded run never needs.
    if name == "RedisTransport":
        transport = _redis_transport()
        globals()[name] = transport
        return transport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _redis_transport() -> type:
    from kombu.transport import redis as kombu_redis
    from redis.exceptions import ConnectionError as RedisConnectionError

    class Channel(kombu_redis.Channel):
        # Never push unacknowledged messages back on close (see the module docstring).
        do_restore = False

        def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
            known: dict[bool, dict[str, Any]] = self.__dict__.setdefault("_known_params", {})
            if self.connection is None or self.connection.client is None:
                # Celery dropped this channel's broken connection; acknowledging a task that
                # finished after the reconnect still needs to reach Redis.
                if asynchronous not in known:
                    raise RedisConnectionError("the broker connection of this channel is closed")
                return dict(known[asynchronous])
            params: dict[str, Any] = super()._connparams(  # type: ignore[no-untyped-call]
                asynchronous=asynchronous
            )
            known[asynchronous] = dict(params)
            return params

    class RedisTransport(kombu_redis.Transport):
        pass

    RedisTransport.Channel = Channel
    RedisTransport.__module__ = Channel.__module__ = __name__
    RedisTransport.__qualname__ = "RedisTransport"
    return RedisTransport
