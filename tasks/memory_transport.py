"""kombu's memory transport, woken by its messages instead of polling for them.

The embedded worker (embedded.py) consumes from kombu's in-process memory transport, which has no
blocking read: its consumer asks every queue in turn and sleeps ``polling_interval`` between
rounds. A short interval makes each hop of a run's DAG fast but costs CPU for as long as the
worker lives (at 2 ms, 3 % of a core while idle: a whole test session's worth in every process
that ever ran a verify); a long one adds its wait to every hop. Here every send, and every
acknowledgement (which frees a prefetch slot), wakes the consumer at once, so it waits on a
condition instead: no round while nothing happens, no delay when something does.
``polling_interval`` stays the longest wait, in case a message arrives some other way (a
redelivery, a message whose expiry passes).

Selected with ``broker_transport`` for ``memory://`` URLs (tasks/app.py): the URL, the queues and
everything else stay kombu's.
"""

from __future__ import annotations

import threading
from queue import Empty
from time import monotonic
from typing import Any

from kombu.transport import memory

# Shared by every connection of the process, like the memory transport's own queues: a message
# sent through any of them may be the one a consumer of another waits for. A counter, not an
# event: a consumer that clears an event could swallow another consumer's wake-up.
_changed = threading.Condition()
_generation = 0


def _wake() -> None:
    global _generation
    with _changed:
        _generation += 1
        _changed.notify_all()


# kombu types these classes only in part: its methods are untyped.
class Channel(memory.Channel):
    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        super()._put(queue, message, **kwargs)  # type: ignore[no-untyped-call]
        _wake()

    def _put_fanout(
        self, exchange: str, message: Any, routing_key: str | None = None, **kwargs: Any
    ) -> None:
        super()._put_fanout(exchange, message, routing_key, **kwargs)  # type: ignore[no-untyped-call]
        _wake()

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag, multiple)  # type: ignore[no-untyped-call]
        _wake()

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        super().basic_reject(delivery_tag, requeue)  # type: ignore[no-untyped-call]
        _wake()


class Transport(memory.Transport):
    Channel = Channel

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        """kombu's loop (virtual/base.py), with the sleep between rounds replaced by a wait for
        the next send or acknowledgement."""
        start = monotonic()
        longest = self.polling_interval or 1.0
        assert self.cycle is not None  # made with the first channel, before anything drains
        while True:
            with _changed:
                seen = _generation
            try:
                self.cycle.get(self._deliver, timeout=timeout)  # type: ignore[no-untyped-call]
                return
            except Empty:
                waited = monotonic() - start
                if timeout is not None and waited >= timeout:
                    raise TimeoutError() from None  # socket.timeout, as kombu raises
                wait = longest if timeout is None else min(longest, timeout - waited)
                with _changed:
                    # A send after the round began has moved the counter: go round again.
                    if _generation == seen:
                        _changed.wait(wait)
