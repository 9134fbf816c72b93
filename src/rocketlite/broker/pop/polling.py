"""Long polling of pops: a pop that finds nothing visible waits on its topics (the topic and the
group's retry topic) until a message is dispatched to one of them, a FIFO batch is acked, or its
poll time runs out.

The dispatcher reports each queue it extended (``on_dispatched``, from its thread or, with inline
dispatch, from the appender's); the event loop then sets the events of the pops waiting on that
topic, which read again. A pop registers before it reads again, so an arrival between its first
read and its registration is never missed. Bounded: ``popPollingSize`` waiting pops per topic and
``maxPopPollingSize`` in all; past either the pop is answered POLLING_FULL at once.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from rocketlite.broker.pop.errors import PollingFull


@dataclass(slots=True, eq=False)
class Waiter:
    topics: tuple[str, ...]
    event: asyncio.Event = field(default_factory=asyncio.Event)


class PopPolling:
    def __init__(self, per_topic: int, total: int) -> None:
        self.per_topic = per_topic
        self.total = total
        self.count = 0
        self.waiting: dict[str, list[Waiter]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._closing = False

    @property
    def closing(self) -> bool:
        return self._closing

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._closing = False

    def on_dispatched(self, topic: str, queue_id: int, next_offset: int) -> None:
        """A dispatcher listener (any thread): wake the pops waiting on ``topic``."""
        if topic not in self.waiting:
            return
        with self._lock:
            first = not self._pending
            self._pending.add(topic)
        loop = self._loop
        if first and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            topics, self._pending = self._pending, set()
        for t in topics:
            self.notify(t)

    def notify(self, topic: str) -> None:
        """On the loop: wake every pop waiting on ``topic``."""
        for w in self.waiting.get(topic, ()):
            w.event.set()

    def register(self, topics: tuple[str, ...]) -> Waiter | None:
        """A waiter on ``topics``; None when the broker is stopping. Raises ``PollingFull`` when
        a limit is reached."""
        if self._closing:
            return None
        if self.count >= self.total:
            raise PollingFull(f"{self.count} pops are held already (maxPopPollingSize)")
        for t in topics:
            if len(self.waiting.get(t, ())) >= self.per_topic:
                raise PollingFull(f"{self.per_topic} pops are held on {t} already "
                                  "(popPollingSize)")
        w = Waiter(topics)
        for t in topics:
            self.waiting.setdefault(t, []).append(w)
        self.count += 1
        return w

    def unregister(self, w: Waiter) -> None:
        for t in w.topics:
            lst = self.waiting.get(t)
            if lst is None:
                continue
            try:
                lst.remove(w)
            except ValueError:
                continue
            if not lst:
                del self.waiting[t]
        self.count -= 1

    def release_all(self) -> None:
        """At shutdown: wake every waiting pop (each answers what it finds); wait no more."""
        self._closing = True
        for lst in list(self.waiting.values()):
            for w in lst:
                w.event.set()
