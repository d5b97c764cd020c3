"""What the fleet is doing now, for ``verify-dag metrics --broker``: the messages waiting in each
queue and the runs in flight. Read from the broker and the result backend at each scrape, unlike
the store's figures (verify_dag/metrics.py), which count runs that ended; the command adds this
collector to those when it is given a broker.

- ``verify_dag_queue_depth{queue}``: messages waiting in each queue (kombu's passive declare,
  which Redis answers from the queue's lists and RabbitMQ from the queue itself); a queue no
  one declared yet has 0.
- ``verify_dag_runs_in_flight``: runs submitted whose report task has not ended: each run's
  sentinel in the result backend (client.announce) names its report task. Read on a Redis result
  backend (a SCAN for the sentinels); on another backend the gauge is absent, not 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from verify_dag.tasks.app import CANCELLED, configure, queues

NAMES = ("verify_dag_queue_depth", "verify_dag_runs_in_flight")
SENTINEL_PATTERN = "celery-task-meta-*-sentinel"  # client.announce's record of each run


class BrokerCollector:
    def __init__(self, broker: str) -> None:
        self.app = configure(broker)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        depth = GaugeMetricFamily(
            "verify_dag_queue_depth", "Messages waiting in each queue.", labels=["queue"]
        )
        for queue, n in self.depths().items():
            depth.add_metric([queue], n)
        yield depth
        flying = self.in_flight()
        if flying is not None:
            gauge = GaugeMetricFamily(
                "verify_dag_runs_in_flight", "Runs submitted whose report task has not ended."
            )
            gauge.add_metric([], flying)
            yield gauge

    def depths(self) -> dict[str, int]:
        found: dict[str, int] = {}
        with self.app.connection_for_read() as conn:
            for queue in queues():
                # A passive declare of a queue that does not exist closes its channel on AMQP:
                # one channel per queue.
                channel = conn.channel()
                try:
                    found[queue.name] = int(
                        channel.queue_declare(queue=queue.name, passive=True).message_count
                    )
                except Exception:  # noqa: BLE001 - not declared yet (kombu's NotFound, ...)
                    found[queue.name] = 0
                finally:
                    channel.close()
        return found

    def in_flight(self) -> int | None:
        from celery import states

        backend = self.app.backend
        client = getattr(backend, "client", None)
        if client is None or not hasattr(client, "scan_iter"):
            return None
        flying = 0
        prefix = backend.task_keyprefix.decode() if hasattr(backend, "task_keyprefix") else ""
        for key in client.scan_iter(match=SENTINEL_PATTERN, count=1000):
            sentinel = backend.get_task_meta(_text(key).removeprefix(prefix))
            record = sentinel.get("result")
            final = record.get("final") if isinstance(record, dict) else None
            if sentinel.get("status") == CANCELLED or not isinstance(final, str):
                continue
            if backend.get_task_meta(final).get("status") not in states.READY_STATES:
                flying += 1
        return flying


def _text(key: bytes | str) -> str:
    return key.decode() if isinstance(key, bytes) else key
