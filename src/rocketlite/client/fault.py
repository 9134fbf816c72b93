"""Send-latency fault avoidance: stop picking a broker for a while after a slow or failed send.

Follows Java's ``MQFaultStrategy`` and ``LatencyFaultToleranceImpl`` as of RocketMQ 4.x (up to
5.1.3), which is what a producer with ``sendLatencyFaultEnable=true`` does:

* After each send the producer reports ``update(broker, latency_ms, isolation)``. The latency is
  looked up in ``latency_max`` from the largest bucket down; the first bucket the latency reaches
  gives the broker's not-available duration::

      latency  >=  50   100   550     1000    2000     3000     15000  ms
      duration     0    0     30000   60000   120000   180000   600000 ms

  ``isolation`` (a send that threw) looks up ``isolation_latency_ms`` (Java: 30000) instead of the
  measured latency, so with the defaults a failed broker is avoided for 600 s. Each report replaces
  the broker's previous one, so a fast send makes a broker available again at once.
* :func:`select_queue` walks the topic's queues round robin and takes the first whose broker is
  available, preferring one not on ``last_broker``. When every broker is out it sends to the least
  bad one (:meth:`LatencyFaultTolerance.pick_one_at_least`), and failing that plain round robin.

RocketMQ 5.1.4 (RIP-63) changed the tables to :data:`LATENCY_MAX_MS_5` /
:data:`NOT_AVAILABLE_DURATION_MS_5` with an isolation latency of 10000 ms, made reports only ever
extend an isolation, and added a reachability probe; pass those constants to use its tables.

Differences from Java, all on purpose: durations run on an injectable monotonic clock, not the wall
clock; the table holds at most ``max_items`` brokers (the least recently reported is dropped);
``pick_one_at_least`` can be limited to the topic's brokers, so the fallback never names (and then
forgets, as Java's ``remove`` does) a broker that carries no queue of the topic.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from rocketlite.client.route import NoRouteError, TopicPublishInfo
from rocketlite.protocol.bodies import MessageQueue

LATENCY_MAX_MS: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_MS: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY_MS = 30000
"""The latency a send that threw counts as (Java 4.x ``updateFaultItem``: ``isolation ? 30000``)."""

LATENCY_MAX_MS_5: tuple[int, ...] = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION_MS_5: tuple[int, ...] = (0, 0, 2000, 5000, 6000, 10000, 30000)
ISOLATION_LATENCY_MS_5 = 10000
"""The same three settings in RocketMQ 5.1.4 and later."""

MAX_FAULT_ITEMS = 1024
"""Brokers remembered at most; reporting a new one beyond this forgets the least recently reported."""


@dataclass(slots=True)
class _FaultItem:
    latency_ms: int
    until: float  # clock() value from which the broker is available again


class LatencyFaultTolerance:
    """Per-broker not-available deadlines computed from reported send latencies.

    ``clock`` returns monotonic seconds (``time.monotonic`` unless a test injects one). Brokers never
    reported are available. Safe to share between threads.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 latency_max: Sequence[int] = LATENCY_MAX_MS,
                 not_available_duration: Sequence[int] = NOT_AVAILABLE_DURATION_MS,
                 isolation_latency_ms: int = ISOLATION_LATENCY_MS,
                 max_items: int = MAX_FAULT_ITEMS) -> None:
        if len(latency_max) != len(not_available_duration) or not latency_max:
            raise ValueError("latency_max and not_available_duration need the same, non-zero length")
        if list(latency_max) != sorted(latency_max):
            raise ValueError("latency_max must be ascending")
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        self._clock = clock
        self._latency_max = tuple(latency_max)
        self._durations = tuple(not_available_duration)
        self._isolation_latency_ms = isolation_latency_ms
        self._max_items = max_items
        self._items: OrderedDict[str, _FaultItem] = OrderedDict()
        self._worst = random.getrandbits(31)
        self._lock = threading.Lock()

    def not_available_duration(self, latency_ms: int) -> int:
        """Milliseconds a broker is avoided after a send that took ``latency_ms`` (Java
        ``computeNotAvailableDuration``): the duration of the largest bucket the latency reaches, else 0."""
        for bound, duration in zip(reversed(self._latency_max), reversed(self._durations), strict=True):
            if latency_ms >= bound:
                return duration
        return 0

    def update(self, broker_name: str, latency_ms: int, isolation: bool = False) -> None:
        """Record a send to ``broker_name`` that took ``latency_ms``; ``isolation`` when it threw.

        The broker is unavailable for :meth:`not_available_duration` of the latency (of the isolation
        latency with ``isolation``) from now, replacing any earlier deadline.
        """
        duration = self.not_available_duration(self._isolation_latency_ms if isolation else latency_ms)
        until = self._clock() + duration / 1000.0
        with self._lock:
            item = self._items.get(broker_name)
            if item is None:
                while len(self._items) >= self._max_items:
                    self._items.popitem(last=False)
                self._items[broker_name] = _FaultItem(latency_ms, until)
            else:
                item.latency_ms = latency_ms
                item.until = until
                self._items.move_to_end(broker_name)

    def is_available(self, broker_name: str) -> bool:
        """True unless ``broker_name``'s not-available deadline is still ahead."""
        item = self._items.get(broker_name)
        return item is None or self._clock() >= item.until

    def remove(self, broker_name: str) -> None:
        """Forget ``broker_name`` (it becomes available); unknown names are ignored."""
        with self._lock:
            self._items.pop(broker_name, None)

    def pick_one_at_least(self, among: Collection[str] | None = None) -> str | None:
        """The broker to use when none is available, or None when no broker (of ``among``) is known.

        Java 4.x: the known brokers sorted available first, then by last latency, then by deadline;
        of the better half, the next one in turn (a single broker is returned as is).
        """
        now = self._clock()
        with self._lock:
            ranked = sorted(
                ((now < item.until, item.latency_ms, item.until, name)
                 for name, item in self._items.items() if among is None or name in among),
                key=lambda r: r[:3],
            )
            if not ranked:
                return None
            half = len(ranked) // 2
            if half <= 0:
                return ranked[0][3]
            self._worst += 1
            return ranked[self._worst % half][3]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, broker_name: object) -> bool:
        return broker_name in self._items

    def __repr__(self) -> str:
        return f"LatencyFaultTolerance(brokers={len(self._items)}, max_items={self._max_items})"


def select_queue(info: TopicPublishInfo, last_broker: str | None,
                 fault: LatencyFaultTolerance | None) -> MessageQueue:
    """The queue for the next send attempt (Java ``MQFaultStrategy.selectOneMessageQueue``).

    Without ``fault`` (``sendLatencyFaultEnable=false``): :meth:`TopicPublishInfo.select_one`, which
    avoids ``last_broker`` when it can. With it: up to one pass of the queues round robin, returning
    the first on an available broker other than ``last_broker``, else the first on an available
    ``last_broker`` (each queue tried advances the counter, as in Java 5, so queues after an
    unavailable broker get no extra share); when no broker is available, the next queue round robin
    of the topic's broker :meth:`~LatencyFaultTolerance.pick_one_at_least` names; else ``select_one``.
    Raises :class:`~rocketlite.client.route.NoRouteError` when ``info`` has no queue.
    """
    if fault is None:
        return info.select_one(last_broker)
    queues = info.queues
    if not queues:
        raise NoRouteError(f"no queue to send to for topic {info.topic!r}")
    n = len(queues)
    on_last: MessageQueue | None = None
    for _ in range(n):
        mq = queues[info.next_index() % n]
        if fault.is_available(mq.brokerName):
            if mq.brokerName != last_broker:
                return mq
            if on_last is None:
                on_last = mq
    if on_last is not None:
        return on_last
    not_best = fault.pick_one_at_least(info.broker_names())
    if not_best is not None:
        # The pass above moved the counter a whole turn, so this continues where the last fallback
        # stopped: successive fallbacks rotate over not_best's queues.
        for _ in range(n):
            mq = queues[info.next_index() % n]
            if mq.brokerName == not_best:
                return mq
    return info.select_one(last_broker)
