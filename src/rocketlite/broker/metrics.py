"""BrokerMetrics: the counters behind RocketMQ 5's broker metrics, kept by the hot paths.

The hot paths pay per batch, never per message: a send read's append (``fold_in``, one call for
the messages of every send of the read), a SEND_BATCH_MESSAGE (``fold_in_batch``), a pull
(``fold_pull``, one call per reply with messages; ``fold_out`` for a pop). Each folds into a
plain dict keyed by label values; nothing here touches ``prometheus_client``. The collector
(``metrics_collector.BrokerCollector``) turns these dicts into metric families at scrape time,
and computes every gauge (lag, connections, storage) there from the broker's own state.

``rocketmq_message_size`` follows Java's ``SendMessageProcessor``, which records one size per put
(``wroteBytes / msgNum``): here one observation per topic per append, the append's average size
weighted by its message count, so the histogram's count is the messages and its sum the bytes.

A message a send diverts (a transaction's half message, a delay level, a timer) is counted under
its real topic with ``message_type`` transaction or delay, as Java does; retry and DLQ topics are
not counted (Java skips them too): the collector leaves them out at scrape time.

``RpcLatency`` keeps ``rocketmq_rpc_latency`` (``metrics_rpc``): one observation per request
answered through the Remoting dispatch, one in 8 for the consume path's requests (pulls, pops,
acks: sampled), one per run for the sends a connection hands over as a run
(``RemotingServer.register(..., run=...)``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import Any

from rocketlite.broker.timer_divert import TIMER_TOPIC, get_property
from rocketlite.broker.topics import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rocketlite.formats.properties import REAL_TOPIC

__all__ = ["LATENCY_BUCKETS_MS", "SIZE_BUCKETS", "BrokerMetrics", "RpcLatency"]

# RocketMQ 5's buckets (BrokerMetricsManager / RemotingMetricsManager views)
SIZE_BUCKETS = (1024.0, 4096.0, 512 * 1024.0, 1024 * 1024.0, 2 * 1024 * 1024.0,
                4 * 1024 * 1024.0)
LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 3000.0, 5000.0)

NORMAL, DELAY, TRANSACTION = "normal", "delay", "transaction"
_DIVERTED = {TRANS_HALF_TOPIC: TRANSACTION, SCHEDULE_TOPIC: DELAY, TIMER_TOPIC: DELAY}
_topic = attrgetter("topic")
_size = itemgetter(1)  # AppendResult.size


class Histogram:
    """Bucket counts (the last one is +Inf), a sum and a count: one ``bisect`` per observation."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float, weight: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += weight
        self.sum += value * weight

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, cumulative count)`` pairs as Prometheus writes them, +Inf last."""
        out: list[tuple[str, float]] = []
        acc = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            acc += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), float(acc)))
        return out


class BrokerMetrics:
    """The broker's folded counters, by label values (see the module docstring)."""

    def __init__(self, segment_size: int = 1 << 30) -> None:
        # the CommitLog's segment size: an append within one segment is contiguous, so its bytes
        # are its span (an append across a segment end has the end's filler: summed instead)
        self.segment_size = segment_size
        # (topic, message_type) -> [messages, bytes]
        self.messages_in: dict[tuple[str, str], list[int]] = {}
        self.message_size: dict[tuple[str, str], Histogram] = {}
        # (topic, consumer_group) -> [messages, bytes], popped (POP consumers)
        self.messages_out: dict[tuple[str, str], list[int]] = {}
        # (group, topic, queue id) -> [messages, bytes, the offset after the last pull's
        # messages (Java's pull offset)]: one entry per pulled queue, so a pull costs one lookup;
        # messages out by (topic, group), in-flight messages and queueing latency are computed
        # from them at scrape time
        self.pulls: dict[tuple[str, str, int], list[int]] = {}
        self.rpc = RpcLatency()

    def fold_in(self, msgs: Sequence[Any], results: Sequence[Any]) -> None:
        """An append of ``msgs`` (``MessageToStore``) that landed as ``results``
        (``AppendResult``): the usual append of one topic costs one C-level pass."""
        topics = set(map(_topic, msgs))
        if len(topics) == 1:
            topic = topics.pop()
            kind = _DIVERTED.get(topic)
            if kind is None:
                start = results[0][0]
                last = results[-1]
                end = last[0] + last[1]
                seg = self.segment_size
                self._add_in(topic, NORMAL, len(msgs), end - start
                             if start // seg == (end - 1) // seg else sum(map(_size, results)))
                return
        sums: dict[tuple[str, str], list[int]] = {}
        for m, r in zip(msgs, results, strict=True):
            topic = m.topic
            kind = _DIVERTED.get(topic)
            if kind is None:
                kind = NORMAL
            else:
                topic = get_property(m.properties, REAL_TOPIC) or topic
            acc = sums.get((topic, kind))
            if acc is None:
                sums[(topic, kind)] = [1, r[1]]
            else:
                acc[0] += 1
                acc[1] += r[1]
        for (topic, kind), (n, size) in sums.items():
            self._add_in(topic, kind, n, size)

    def fold_in_batch(self, topic: str, count: int, size: int) -> None:
        """A SEND_BATCH_MESSAGE of ``count`` messages and ``size`` stored bytes."""
        self._add_in(topic, NORMAL, count, size)

    def _add_in(self, topic: str, kind: str, count: int, size: int) -> None:
        key = (topic, kind)
        acc = self.messages_in.get(key)
        if acc is None:
            self.messages_in[key] = [count, size]
            hist = self.message_size[key] = Histogram(SIZE_BUCKETS)
        else:
            acc[0] += count
            acc[1] += size
            hist = self.message_size[key]
        hist.observe(size / count, count)

    def fold_pull(self, group: str, topic: str, queue_id: int, count: int, size: int,
                  next_offset: int) -> None:
        """A pull reply of ``count`` messages, ``size`` bytes, the next pull from ``next_offset``."""
        acc = self.pulls.get((group, topic, queue_id))
        if acc is None:
            self.pulls[(group, topic, queue_id)] = [count, size, next_offset]
        else:
            acc[0] += count
            acc[1] += size
            acc[2] = next_offset

    def out_totals(self) -> dict[tuple[str, str], list[int]]:
        """Messages and bytes out by (topic, group): pops and pulls together (at scrape time)."""
        out = {key: list(acc) for key, acc in list(self.messages_out.items())}
        for (group, topic, _), (count, size, _) in list(self.pulls.items()):
            acc = out.get((topic, group))
            if acc is None:
                out[(topic, group)] = [count, size]
            else:
                acc[0] += count
                acc[1] += size
        return out

    def pull_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        acc = self.pulls.get((group, topic, queue_id))
        return None if acc is None else acc[2]

    def fold_out(self, topic: str, group: str, count: int, size: int) -> None:
        """A pop reply of ``count`` messages, ``size`` bytes."""
        acc = self.messages_out.get((topic, group))
        if acc is None:
            self.messages_out[(topic, group)] = [count, size]
        else:
            acc[0] += count
            acc[1] += size


class RpcLatency:
    """``rocketmq_rpc_latency`` by (request code, response code, long polling, result)."""

    def __init__(self) -> None:
        self.bounds = LATENCY_BUCKETS_MS
        self.by_key: dict[tuple[int, int, bool, str], Histogram] = {}

    def observe_ms(self, code: int, response: int, ms: float, long_polling: bool = False,
                   result: str = "success", weight: int = 1) -> None:
        """One request (``weight``: the requests a sampled one stands for)."""
        key = (code, response, long_polling, result)
        hist = self.by_key.get(key)
        if hist is None:
            hist = self.by_key[key] = Histogram(LATENCY_BUCKETS_MS)
        hist.observe(ms, weight)

    def snapshot(self) -> list[tuple[tuple[int, int, bool, str], Histogram]]:
        return list(self.by_key.items())

