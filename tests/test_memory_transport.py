"""The embedded worker's transport: kombu's memory transport, woken by sends and acknowledgements
instead of polling (tasks/memory_transport.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.messaging import Consumer, Producer

from verify_dag.tasks import app as app_module
from verify_dag.tasks import memory_transport

# Far longer than any wait below: a consumer that slept through its polling interval would fail.
SLOW_POLL = 60.0


@pytest.fixture
def queue(request: pytest.FixtureRequest) -> Queue:
    # The memory transport's queues are process-wide: one of this test's own.
    return Queue(f"t-{request.node.name}", Exchange(f"x-{request.node.name}"), "k")


def _connection() -> Connection:
    return Connection(
        "memory://",
        transport=app_module.MEMORY_TRANSPORT,
        transport_options={"polling_interval": SLOW_POLL},
    )


def test_the_app_selects_it_for_the_memory_broker() -> None:
    with Connection(app_module.MEMORY_BROKER, transport=app_module.MEMORY_TRANSPORT) as conn:
        assert isinstance(conn.transport, memory_transport.Transport)
    settings = app_module._fault_settings(app_module.MEMORY_BROKER)
    assert settings["broker_transport"] == app_module.MEMORY_TRANSPORT
    assert app_module._fault_settings("redis://127.0.0.1:6379/0")["broker_transport"] != (
        app_module.MEMORY_TRANSPORT
    )


def test_a_send_wakes_a_waiting_consumer_at_once(queue: Queue) -> None:
    got: list[Any] = []

    def receive(body: Any, message: Any) -> None:
        got.append(body)
        message.ack()

    with _connection() as conn, conn.channel() as channel:
        consumer = Consumer(channel, [queue], callbacks=[receive])
        consumer.consume()

        def send() -> None:
            time.sleep(0.3)  # the consumer is waiting by then
            with _connection() as other:
                Producer(other.channel()).publish(
                    "hello", exchange=queue.exchange, routing_key="k", declare=[queue]
                )

        sender = threading.Thread(target=send)
        start = time.monotonic()
        sender.start()
        conn.drain_events(timeout=30)
        waited = time.monotonic() - start
        sender.join()
    assert got == ["hello"]
    # kombu's own loop would sleep min(polling interval, timeout) = 30 s between its rounds.
    assert waited < 10, waited


def test_an_acknowledgement_wakes_a_consumer_whose_prefetch_was_full(queue: Queue) -> None:
    got: list[Any] = []
    held: list[Any] = []

    def hold(body: Any, message: Any) -> None:
        got.append(body)
        held.append(message)

    with _connection() as conn, conn.channel() as channel:
        Producer(channel).publish("one", exchange=queue.exchange, routing_key="k", declare=[queue])
        Producer(channel).publish("two", exchange=queue.exchange, routing_key="k", declare=[queue])
        consumer = Consumer(channel, [queue], callbacks=[hold])
        consumer.qos(prefetch_count=1)
        consumer.consume()
        conn.drain_events(timeout=5)
        assert got == ["one"]
        # The second message waits for the first's acknowledgement (prefetch 1), given from
        # another thread while this one waits.
        acker = threading.Timer(0.3, held[0].ack)
        start = time.monotonic()
        acker.start()
        conn.drain_events(timeout=30)
        waited = time.monotonic() - start
        acker.join()
        held[1].ack()
    assert got == ["one", "two"]
    assert waited < 10, waited


def test_an_idle_consumer_does_not_poll(queue: Queue) -> None:
    rounds = 0
    with (
        Connection(
            "memory://",
            transport=app_module.MEMORY_TRANSPORT,
            transport_options={"polling_interval": 0.1},
        ) as conn,
        conn.channel() as channel,
    ):
        Consumer(channel, [queue], callbacks=[lambda body, m: m.ack()]).consume()
        get = conn.transport.cycle.get

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal rounds
            rounds += 1
            return get(*args, **kwargs)

        conn.transport.cycle.get = counted
        with pytest.raises(TimeoutError):
            conn.drain_events(timeout=1.0)
    # Nothing sent, nothing acknowledged: one round per longest wait (0.1 s), not a spin.
    assert 1 <= rounds <= 15, rounds
