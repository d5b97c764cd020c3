"""The Celery app: configuration, queues and routes.

Queues map to resource classes (ops/README.md): a worker picks the classes it serves with
``-Q``, and the ``review`` queue's total consumer concurrency is the fleet-wide cap on model calls.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from pathlib import Path
from typing import Any

from celery import Celery, signals
from kombu.entity import Exchange, Queue
from kombu.transport import TRANSPORT_ALIASES

from verify_dag import credentials
from verify_dag.envvars import BROKER_ENV as BROKER_ENV
from verify_dag.envvars import BROKER_FILE_ENV as BROKER_FILE_ENV
from verify_dag.envvars import CELERY_BROKER_ENV as CELERY_BROKER_ENV
from verify_dag.errors import UsageError
from verify_dag.git import display_source
from verify_dag.tasks import reliability

BACKEND_ENV = "VERIFY_DAG_RESULT_BACKEND"
# Celery's own: `celery --broker URL` and `--result-backend URL` set them before the app loads,
# and inside Celery they win over the app's configuration. Read here too, so that the broker
# and the result backend always come from one place (ops/README.md, "Starting workers"), as is
# CELERY_BROKER_URL (envvars.py names the broker's settings; a file holding the URL keeps a
# password out of every process's environment).
CELERY_BACKEND_ENV = "CELERY_RESULT_BACKEND"
# A host name keeps kombu from warning that none was supplied.
MEMORY_BROKER = "memory://localhost/"
# kombu's memory transport, woken by sends instead of polling (imported by kombu on first use).
MEMORY_TRANSPORT = "verify_dag.tasks.memory_transport:Transport"

QUEUES = ("git", "static", "review", "test", "exercise")
# The run's sentinel record in the result backend (client.announce) and its state once the run is
# cancelled (a custom state: Celery's REVOKED is an exception state and wants an exception).
CANCELLED = "CANCELLED"


def sentinel_id(run_id: str) -> str:
    return f"{run_id}-sentinel"


# Hard time limits per queue (seconds). They only bite on the prefork pool; the embedded worker
# relies on the per-command time limits of processes.run instead.
# fleet: an audit waits for all its runs, each bounded by the audit's timeout (2 h by default).
TIME_LIMITS = {
    "git": 600,
    "static": 1800,
    "review": 1800,
    "test": 7200,
    "exercise": 3600,
    "fleet": 3 * 3600,
}

ROUTES = {
    "verify_dag.scope": "git",
    "verify_dag.engineer": "git",
    "verify_dag.triage": "git",
    "verify_dag.collect": "git",
    "verify_dag.reviews": "git",
    "verify_dag.report": "git",
    "verify_dag.static": "static",
    "verify_dag.review.*": "review",
    "verify_dag.test": "test",
    "verify_dag.debugger": "test",
    "verify_dag.exerciser": "exercise",
    # The derived exercise's probes, run beside the suite: where the exerciser runs.
    "verify_dag.probe": "exercise",
    # The completion verifier (docs/completion.md): only its execute step runs the criterion.
    "verify_dag.completion.extract": "git",
    "verify_dag.completion.execute": "exercise",
    "verify_dag.completion.classify": "git",
    "verify_dag.completion.report": "git",
    "verify_dag.completion.quick": "exercise",
    # Shadow verification (docs/shadow.md): each claim's verifier on the queue of what it re-runs.
    "verify_dag.shadow.static": "static",
    "verify_dag.shadow.test": "test",
    "verify_dag.shadow.judge": "review",
    "verify_dag.shadow.search": "git",
    "verify_dag.shadow.merge": "git",
    # Phase 9 (docs/fixes.md): a fix option may come from the model backend.
    "verify_dag.fix.propose": "review",
    "verify_dag.fix.gather": "git",
    # The nightly audit waits for its runs: a queue of its own, never a default worker's.
    "verify_dag.fleet.audit": "fleet",
}
# Consumed only by a worker started for it (`--queues fleet`): see tasks/fleet.py.
FLEET_QUEUE = "fleet"


def broker_url(explicit: str | None = None) -> str:
    """The broker: ``--broker``, else ``VERIFY_DAG_BROKER_URL``, else the contents of the file
    ``VERIFY_DAG_BROKER_URL_FILE`` names, else Celery's ``CELERY_BROKER_URL``, else the
    in-process memory one.

    A URL kombu has no transport for is a usage error here, before anything is sent.
    """
    return broker_origin(explicit)[0]


def broker_origin(explicit: str | None = None) -> tuple[str, str]:
    """The broker and where it came from (``broker_url``)."""
    from_env = os.environ.get(BROKER_ENV, "").strip()
    url_file = os.environ.get(BROKER_FILE_ENV, "").strip()
    if from_env and url_file and not explicit:
        # Two sources that may disagree: guessing one could point a worker at the wrong broker.
        raise UsageError(f"both {BROKER_ENV} and {BROKER_FILE_ENV} are set; set one")
    where = "--broker" if explicit else BROKER_ENV if from_env else BROKER_FILE_ENV
    if explicit or from_env or not url_file:
        url = explicit or from_env or MEMORY_BROKER
    else:
        try:
            url = Path(url_file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"{BROKER_FILE_ENV}: cannot read {url_file}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise UsageError(f"{BROKER_FILE_ENV}: {url_file} is not UTF-8 text") from None
        if not url:
            raise UsageError(
                f"{BROKER_FILE_ENV}: {url_file} is empty; it should hold one broker URL"
            )
    celery_url = os.environ.get(CELERY_BROKER_ENV, "").strip()
    if celery_url:
        if url != MEMORY_BROKER and url != celery_url:
            raise UsageError(
                f"{where} and {CELERY_BROKER_ENV} name different brokers "
                f"({display_source(url)} and {display_source(celery_url)}); set one"
            )
        url, where = celery_url, CELERY_BROKER_ENV
    scheme = url.partition("://")[0] if "://" in url else ""
    transport = scheme.split("+", 1)[0]
    if transport not in TRANSPORT_ALIASES:
        raise UsageError(
            f"{where}: not a broker URL Celery knows: {display_source(url)!r} "
            "(e.g. redis://host:6379/0 or amqp://user:pass@host//)"
        )
    if url == MEMORY_BROKER and not (explicit or from_env or url_file):
        where = "default: the in-process worker"
    return url, where


def result_backend(broker: str) -> str:
    """``VERIFY_DAG_RESULT_BACKEND`` or Celery's ``CELERY_RESULT_BACKEND``, else the broker itself
    when it is Redis (the memory one in-process); an AMQP broker needs one named."""
    return result_backend_origin(broker)[0]


def result_backend_origin(broker: str) -> tuple[str, str]:
    """The result backend and where it came from (``result_backend``)."""
    ours = os.environ.get(BACKEND_ENV, "").strip()
    celery_own = os.environ.get(CELERY_BACKEND_ENV, "").strip()
    if ours and celery_own and ours != celery_own:
        raise UsageError(
            f"{BACKEND_ENV} and {CELERY_BACKEND_ENV} name different result backends "
            f"({display_source(ours)} and {display_source(celery_own)}); set one"
        )
    if ours or celery_own:
        return ours or celery_own, BACKEND_ENV if ours else CELERY_BACKEND_ENV
    if broker.startswith(("redis://", "rediss://", "redis+socket://")):
        return broker, "the broker's Redis"
    if broker.startswith("memory://"):
        # The cache backend counts chord parts natively, so no chord_unlock polling in-process.
        return "cache+memory://", "in-process, with the broker"
    # AMQP brokers have no good chord-capable default; a result store must be named.
    raise UsageError(
        f"no result backend for broker {broker.split('://')[0]}://: set {BACKEND_ENV} "
        "(e.g. redis://...)"
    )


def _transport_options(url: str) -> dict[str, float]:
    if url.startswith("memory://"):
        # Ours wakes on every send and acknowledgement (memory_transport.py): the interval is
        # only its longest wait, for a message that becomes ready some other way.
        return {"polling_interval": 0.1}
    if reliability.is_redis(url):
        # A short visibility timeout brings a killed worker's tasks back within seconds; running
        # tasks keep their own messages alive (reliability.py), so a long test suite still runs
        # once.
        return reliability.redis_transport_options(reliability.visibility_timeout())
    return {}


def _fault_settings(url: str) -> dict[str, object]:
    """Riding out a broker that goes away and comes back (ops/README.md, "Faults and recovery").
    A worker adds longer retries for its own writes when it starts (reliability.WORKER_SETTINGS);
    a client fails fast on a wrong URL and keeps its own outage bound while it waits (client.py).
    """
    redis = reliability.is_redis(url)
    return {
        # kombu's Redis transport with the two fixes a Redis restart needs (reliability.py).
        "broker_transport": (
            MEMORY_TRANSPORT if url.startswith("memory://") else reliability.broker_transport(url)
        ),
        "broker_connection_retry_on_startup": True,
        "broker_connection_retry": True,
        # A fleet worker waits for its broker for as long as it takes (kombu: 2, 4, ... 30 s
        # between attempts) instead of exiting after 100 attempts.
        "broker_connection_max_retries": None,
        # A Redis host that vanishes without closing the connection must not block forever.
        "redis_socket_connect_timeout": 10 if redis else None,
        "redis_socket_timeout": 30 if redis else None,
    }


def _beat_schedule() -> dict[str, Any]:
    from verify_dag.fleet.schedule import from_environment

    return from_environment()


def _task_annotations() -> list[object]:
    return [_Annotations(review_rate_limit())]


# How many model calls a review task may start per second, minute or hour on each worker.
REVIEW_RATE_ENV = "VERIFY_DAG_REVIEW_RATE_LIMIT"
_RATE = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:/[smh])?")


def review_rate_limit() -> str | None:
    """``VERIFY_DAG_REVIEW_RATE_LIMIT`` in Celery's rate_limit form (``30/m``, ``2/s``)."""
    value = os.environ.get(REVIEW_RATE_ENV, "").strip()
    if not value:
        return None
    if not _RATE.fullmatch(value) or float(value.split("/")[0]) <= 0:
        raise UsageError(
            f"{REVIEW_RATE_ENV}: expected a rate such as 30/m, 2/s or 100/h, got {value!r}"
        )
    return value


class _Annotations:
    """Each task's time limits (its queue's), and Celery's rate_limit on every task that asks a
    model (the review queue's) when the worker sets one. One object, because Celery applies
    only the first annotation that matches a task. Celery counts a rate per task name and per
    worker: each reviewer's task starts at most that often on a worker, and so do the fix
    proposals and shadow judgements."""

    def __init__(self, rate: str | None) -> None:
        self.rate = rate

    def annotate(self, task: Any) -> dict[str, object] | None:
        queue = next((q for n, q in ROUTES.items() if fnmatch.fnmatchcase(task.name, n)), None)
        if queue is None:
            return None
        said: dict[str, object] = {}
        if task.name in ROUTES:  # a pattern's tasks (the reviewers) keep the queue's defaults
            said = {"time_limit": TIME_LIMITS[queue], "soft_time_limit": TIME_LIMITS[queue] - 30}
        if self.rate and queue == "review":
            said["rate_limit"] = self.rate
        return said or None

    def annotate_any(self) -> None:
        return None


# The task modules a worker imports when it starts; a client that only submits imports none.
TASK_MODULES = [
    f"verify_dag.tasks.{m}"
    for m in ("pipeline", "review", "shadow", "completion", "fixing", "fleet")
]

app = Celery("verify_dag", include=TASK_MODULES)
# Reports redact this app's broker and backend credentials, whatever configured them.
credentials.add_url_source(lambda: (app.conf.broker_url, app.conf.result_backend))


def queues() -> list[Queue]:
    """One direct exchange per queue, named as the queue, with its name as the routing key. A
    Queue given only a name takes the default exchange (``git``) and key: every queue bound to
    one exchange with one key, and a message published there delivered to all five."""
    return [
        Queue(q, Exchange(q, type="direct"), routing_key=q)  # type: ignore[no-untyped-call]
        for q in (*QUEUES, FLEET_QUEUE)
    ]


def configure(broker: str | None = None) -> Celery:
    """Point the app at a broker. Called once per process, before any task is sent."""
    url = broker_url(broker)
    memory = url.startswith("memory://")
    app.conf.update(
        broker_url=url,
        result_backend=result_backend(url),
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_queues=queues(),
        task_default_queue="git",
        task_routes=ROUTES,
        task_annotations=_task_annotations(),
        # Reliability (ops/README.md, "Faults and recovery"): a task is acknowledged when done, a
        # lost worker's task goes back.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        result_extended=True,
        task_track_started=True,
        result_expires=7 * 24 * 3600,
        # Operators watch runs in Flower, which reads task events. Only workers send task-sent
        # events (_workers_announce_sends): a client's would carry its own one-off name
        # (gen<pid>@host), which Flower then lists as a worker, one more per client process.
        worker_send_task_events=not memory,
        task_send_sent_event=False,
        broker_transport_options=_transport_options(url),
        # `celery -A verify_dag beat`: the fleet file's nightly audits, when one is named.
        beat_schedule=_beat_schedule(),
        timezone="UTC",
        # The embedded worker lives inside the CLI process: it must not take over its logging.
        worker_hijack_root_logger=not memory,
        **_fault_settings(url),
    )
    return app


try:
    configure()
except UsageError as exc:
    # An import has no caller to map the error to its exit code (`celery -A verify_dag` imports
    # this module itself): the one line, and exit 2, as every command does.
    print(exc.line(), file=sys.stderr)
    raise SystemExit(exc.exit_code) from None
reliability.install(app)


@signals.beat_init.connect
def _check_fleet_file(**_: object) -> None:
    """``celery -A verify_dag beat`` sends the audit of the fleet file VERIFY_DAG_FLEET_FILE
    names: a file that is missing or does not parse stops it at once, in one line and exit 2,
    rather than a beat that starts quietly and fails its first audit at 2 a.m."""
    from verify_dag import fleet
    from verify_dag.fleet import schedule

    path = os.environ.get(schedule.FLEET_FILE_ENV, "").strip()
    if not path:
        print(
            f"verify-dag: warning: {schedule.FLEET_FILE_ENV} is not set: this beat schedules no "
            "fleet audit",
            file=sys.stderr,
        )
        return
    try:
        fleet.load(path)
    except UsageError as exc:
        print(exc.line(), file=sys.stderr)
        raise SystemExit(exc.exit_code) from None


@signals.celeryd_init.connect
def _workers_announce_sends(sender: object = None, **_: object) -> None:
    """A worker sends the next phases of a run: Flower shows them as sent, and queued, from the
    moment they are, under this worker's own name. Celery's producer would name each pool
    process gen<pid>@host, which Flower counts as one more worker per process; the dispatcher
    the pool processes inherit is given the worker's node name instead."""
    if str(app.conf.broker_url).startswith("memory://") or not isinstance(sender, str):
        return
    app.conf.task_send_sent_event = True
    # A cached_property of Celery's AMQP helper, the dispatcher send_task_message publishes
    # task-sent through: Celery offers no setting for its hostname.
    app.amqp._event_dispatcher = app.events.Dispatcher(  # noqa: SLF001
        enabled=False, hostname=sender
    )


@signals.celeryd_init.connect
def _refuse_memory_transport(**_: object) -> None:
    """``celery -A verify_dag worker`` with no broker would start on the memory transport and
    serve nobody: refuse, in one line. (The embedded worker is not started by ``celery worker``
    and never sends this signal.)"""
    if str(app.conf.broker_url).startswith("memory://"):
        print(
            "verify-dag: error: this worker has no broker (transport memory://) and would serve "
            f"nobody; set {BROKER_ENV} or pass Celery's --broker URL (ops/README.md, "
            '"Starting workers")',
            file=sys.stderr,
        )
        raise SystemExit(2)
