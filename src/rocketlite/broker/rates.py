"""Per-topic put and per-group consume rates: the ``topicPutTps`` of GET_TOPIC_STATS_INFO and the
``consumeTps`` of GET_CONSUME_STATS, which mqadmin's ``statsAll`` and ``consumerProgress`` show.

Java reads them from ``BrokerStatsManager`` (``TOPIC_PUT_NUMS`` and ``GROUP_GET_NUMS``, the
minute's tps: samples every 10 s, the rate between the oldest and newest of the last minute).
Here the counts come from ``BrokerMetrics``, which the hot paths already keep (messages in by
topic, out by topic and group: pulls and pops), sampled by the broker's housekeeping (every
``flushConsumerOffsetInterval``, 5 s by default); a rate is the change between the oldest and the
newest sample of the last ``WINDOW_S``, per second. Retry and DLQ topics count like any other.
With metrics off (``metricsPort=0``) nothing is counted and every rate is 0.0.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocketlite.broker.metrics import BrokerMetrics

WINDOW_S = 60.0

# (monotonic time, messages in by topic, messages out by (topic, group))
_Sample = tuple[float, dict[str, int], dict[tuple[str, str], int]]


class Rates:
    """Samples of the counters of the last ``WINDOW_S`` seconds, and the rates between them."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._samples: deque[_Sample] = deque()

    def sample(self, metrics: BrokerMetrics, now: float | None = None) -> None:
        """Record the counters now; samples older than the window (but the newest such one,
        the window's start) are dropped."""
        now = time.monotonic() if now is None else now
        ins: dict[str, int] = {}
        for (topic, _kind), acc in list(metrics.messages_in.items()):
            ins[topic] = ins.get(topic, 0) + acc[0]
        outs = {key: acc[0] for key, acc in metrics.out_totals().items()}
        self._samples.append((now, ins, outs))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window_s:
            self._samples.popleft()

    def _window(self) -> tuple[float, _Sample, _Sample] | None:
        """Seconds between the oldest and newest samples, and those two; None before two."""
        if len(self._samples) < 2:
            return None
        first, last = self._samples[0], self._samples[-1]
        dt = last[0] - first[0]
        return (dt, first, last) if dt > 0 else None

    def put_tps(self, topic: str) -> float:
        """Messages stored in ``topic`` per second over the window."""
        w = self._window()
        if w is None:
            return 0.0
        dt, first, last = w
        return (last[1].get(topic, 0) - first[1].get(topic, 0)) / dt

    def consume_tps(self, topic: str, group: str) -> float:
        """Messages of ``topic`` delivered to ``group`` per second over the window."""
        w = self._window()
        if w is None:
            return 0.0
        dt, first, last = w
        key = (topic, group)
        return (last[2].get(key, 0) - first[2].get(key, 0)) / dt
