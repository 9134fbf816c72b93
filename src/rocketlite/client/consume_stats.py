"""A consumer's per-topic figures for ConsumerRunningInfo's ``statusTable`` (Java's
``ConsumerStatsManager``): pull round trip and pulled messages per second, consume time and
consumed-OK / failed messages per second, over the last ``WINDOW_S`` seconds (less while the
consumer is younger), and the failed messages since it started (Java counts the last hour).

Recorded once per pull and once per handler call (a batch), never per message, into one bucket
per second: a record is a dict lookup and a few additions, and memory is ``WINDOW_S`` buckets per
topic whatever the rate.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketlite.protocol.running_info import ConsumeStatus

WINDOW_S = 60


@dataclass(slots=True)
class _Bucket:
    second: int
    pulls: int = 0
    pull_ms: float = 0.0
    pulled: int = 0
    calls: int = 0
    consume_ms: float = 0.0
    ok: int = 0
    failed: int = 0


class _Topic:
    __slots__ = ("buckets", "failed_total")

    def __init__(self) -> None:
        self.buckets: collections.deque[_Bucket] = collections.deque()
        self.failed_total = 0

    def bucket(self, second: int) -> _Bucket:
        b = self.buckets
        if not b or b[-1].second != second:
            b.append(_Bucket(second))
            while b[0].second <= second - WINDOW_S:
                b.popleft()
        return b[-1]


class ConsumeStatsTracker:
    """The figures of one consumer, by topic."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        self._topics: dict[str, _Topic] = {}

    def _bucket(self, topic: str) -> _Bucket:
        t = self._topics.get(topic)
        if t is None:
            t = self._topics[topic] = _Topic()
        return t.bucket(int(self._clock()))

    def pulled(self, topic: str, found: int, rt_s: float) -> None:
        """One pull of ``topic`` that took ``rt_s`` seconds and brought ``found`` messages."""
        b = self._bucket(topic)
        b.pulls += 1
        b.pull_ms += rt_s * 1000
        b.pulled += found

    def consumed(self, topic: str, n: int, ok: bool, rt_s: float) -> None:
        """One handler call on ``n`` messages of ``topic``, ``ok`` or not, in ``rt_s`` seconds."""
        b = self._bucket(topic)
        b.calls += 1
        b.consume_ms += rt_s * 1000
        if ok:
            b.ok += n
        else:
            b.failed += n
            self._topics[topic].failed_total += n

    def status(self, topic: str) -> ConsumeStatus:
        """``topic``'s figures now (zeros for a topic with no record)."""
        t = self._topics.get(topic)
        if t is None:
            return ConsumeStatus()
        now = self._clock()
        live = [b for b in t.buckets if b.second > int(now) - WINDOW_S]
        span = max(1.0, min(float(WINDOW_S), now - self._started))
        pulls = sum(b.pulls for b in live)
        calls = sum(b.calls for b in live)
        return ConsumeStatus(
            pullRT=sum(b.pull_ms for b in live) / pulls if pulls else 0.0,
            pullTPS=sum(b.pulled for b in live) / span,
            consumeRT=sum(b.consume_ms for b in live) / calls if calls else 0.0,
            consumeOKTPS=sum(b.ok for b in live) / span,
            consumeFailedTPS=sum(b.failed for b in live) / span,
            consumeFailedMsgs=t.failed_total)
