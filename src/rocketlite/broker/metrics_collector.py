"""BrokerCollector: RocketMQ 5's broker metric families, computed at scrape time.

A ``prometheus_client`` custom collector: each scrape reads the counters the hot paths folded
(``metrics.BrokerMetrics``) and computes every gauge from the broker's own state (consumer
offsets against queue ends for lag, the client tables for connections, the CommitLog's offsets
for the store), so nothing is updated continuously. It runs on the broker's event loop (the
exporter, ``metrics_http``, calls it there): it reads the broker's tables without locks, as the
processors do.

Names, labels and units are RocketMQ 5's (``BrokerMetricsConstant``, ``DefaultStoreMetricsConstant``,
``RemotingMetricsConstant``); every sample carries Java's static labels ``cluster``, ``node_type``
(``broker``) and ``node_id`` (the broker name). Booleans are ``"true"``/``"false"`` as Java's OTel
exporter writes them. Latencies are milliseconds, sizes bytes.

Consumer gauges per (group, topic), over the topic's queues: ``lag_messages`` = Σ (queue end −
committed offset); ``inflight_messages`` = Σ (pull offset − committed offset), the pull offset
being where the group's last pull of the queue ended (the committed offset before any pull);
``lag_latency`` / ``queueing_latency`` = now − store time of the oldest message not committed /
not pulled yet (0 when there is none), as Java's ``ConsumerLagCalculator``.

One family is rocketlite's own (RocketMQ has none like it): ``rocketlite_limit_rejections_total
{limit=...}``, how often each limit against abuse was crossed (``remoting.limits.LIMITS``: a
connection refused, a request refused or paused, a creation refused, a body too large), read from
the broker's ``LimitCounts``; every limit is shown, 0 until crossed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from rocketlite.broker.metrics import BrokerMetrics
from rocketlite.broker.topics import is_system_topic
from rocketlite.protocol.bodies import ConsumeType
from rocketlite.protocol.versions import version_desc
from rocketlite.remoting.limits import LIMITS

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

__all__ = ["BrokerCollector", "metrics_registry"]

F = TypeVar("F", CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily)
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"
_CONSUME_MODE = {ConsumeType.CONSUME_ACTIVELY: "pull", ConsumeType.CONSUME_PASSIVELY: "push",
                 ConsumeType.CONSUME_POP: "pop"}
_SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _store_bytes(root: Path) -> int:
    """Bytes of the files under the store root (what the store takes on disk)."""
    total = 0
    stack = [str(root)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    total += e.stat(follow_symlinks=False).st_size
            except OSError:  # removed meanwhile (the cleaner)
                continue
    return total


class BrokerCollector(Collector):
    """The broker's metric families (see the module docstring)."""

    def __init__(self, broker: Broker, metrics: BrokerMetrics) -> None:
        self.broker = broker
        self.metrics = metrics
        cfg = broker.config
        self._static = {"cluster": cfg.broker_cluster_name, "node_type": "broker",
                        "node_id": cfg.broker_name}

    # -- helpers ---------------------------------------------------------------------------

    def _family(self, kind: type[F], name: str, doc: str, labels: Iterable[str]) -> F:
        return kind(name, doc, labels=[*self._static, *labels])

    def _values(self, *values: str) -> list[str]:
        return [*self._static.values(), *values]

    def _system(self, topic: str, group: str = "") -> str:
        return _bool(is_system_topic(topic, self.broker.config)
                     or group.startswith(_SYSTEM_GROUP_PREFIX))

    # -- families --------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        yield from self._broker_gauges()
        yield from self._traffic()
        yield from self._rpc()
        yield from self._connections()
        yield from self._consumer_gauges()
        yield from self._storage()
        yield from self._limits()

    def _limits(self) -> Iterator[Metric]:
        fam = self._family(CounterMetricFamily, "rocketlite_limit_rejections", "Crossings of "
                           "the broker's limits against abuse, by limit", ("limit",))
        counts = self.broker.limit_counts
        for limit in LIMITS:
            fam.add_metric(self._values(limit), counts.get(limit))
        yield fam

    def _broker_gauges(self) -> Iterator[Metric]:
        b = self.broker
        for name, doc, value in (
                ("rocketmq_broker_permission", "The broker's permission (brokerPermission)",
                 b.config.broker_permission),
                ("rocketmq_topic_number", "Topics on this broker", len(b.topics.table)),
                ("rocketmq_consumer_group_number", "Subscription groups on this broker",
                 len(b.subscriptions.table))):
            g = self._family(GaugeMetricFamily, name, doc, ())
            g.add_metric(self._values(), value)
            yield g

    def _traffic(self) -> Iterator[Metric]:
        m = self.metrics
        labels_in = ("topic", "message_type", "is_system")
        n_in = self._family(CounterMetricFamily, "rocketmq_messages_in", "Messages sent to the "
                            "broker", labels_in)
        b_in = self._family(CounterMetricFamily, "rocketmq_throughput_in", "Bytes of the messages "
                            "sent to the broker, as stored", labels_in)
        size = self._family(HistogramMetricFamily, "rocketmq_message_size", "Stored size of the "
                            "messages sent, bytes", labels_in)
        for (topic, kind), (count, nbytes) in list(m.messages_in.items()):
            if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
                continue
            values = self._values(topic, kind, self._system(topic))
            n_in.add_metric(values, count)
            b_in.add_metric(values, nbytes)
            hist = m.message_size[(topic, kind)]
            size.add_metric(values, hist.cumulative(), hist.sum)
        yield from (n_in, b_in, size)
        labels_out = ("topic", "consumer_group", "is_system")
        n_out = self._family(CounterMetricFamily, "rocketmq_messages_out", "Messages delivered "
                             "to consumers", labels_out)
        b_out = self._family(CounterMetricFamily, "rocketmq_throughput_out", "Bytes of the "
                             "messages delivered to consumers", labels_out)
        for (topic, group), (count, nbytes) in sorted(m.out_totals().items()):
            values = self._values(topic, group, self._system(topic, group))
            n_out.add_metric(values, count)
            b_out.add_metric(values, nbytes)
        yield from (n_out, b_out)

    def _rpc(self) -> Iterator[Metric]:
        fam = self._family(HistogramMetricFamily, "rocketmq_rpc_latency", "Time the broker took "
                           "to answer a Remoting request, milliseconds",
                           ("protocol_type", "request_code", "response_code", "is_long_polling",
                            "result"))
        for (code, response, long_polling, result), hist in self.metrics.rpc.snapshot():
            fam.add_metric(self._values("remoting", str(code), str(response),
                                        _bool(long_polling), result),
                           hist.cumulative(), hist.sum)
        yield fam

    def _connections(self) -> Iterator[Metric]:
        b = self.broker
        producers: dict[tuple[str, str], int] = {}
        for members in list(b.producers.groups.values()):
            for info in list(members.values()):
                key = (info.language, version_desc(info.version))
                producers[key] = producers.get(key, 0) + 1
        fam = self._family(GaugeMetricFamily, "rocketmq_producer_connections", "Producer "
                           "connections", ("language", "version", "protocol_type"))
        for (language, version), n in sorted(producers.items()):
            fam.add_metric(self._values(language, version, "remoting"), n)
        yield fam
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group, ginfo in list(b.consumers.groups.items()):
            mode = _CONSUME_MODE.get(ginfo.consume_type, "") if ginfo.consume_type else ""
            for info in list(ginfo.channels.values()):
                ckey = (group, info.language, version_desc(info.version), mode)
                consumers[ckey] = consumers.get(ckey, 0) + 1
        fam = self._family(GaugeMetricFamily, "rocketmq_consumer_connections", "Consumer "
                           "connections", ("consumer_group", "language", "version",
                                           "consume_mode", "protocol_type", "is_system"))
        for (group, language, version, mode), n in sorted(consumers.items()):
            fam.add_metric(self._values(group, language, version, mode, "remoting",
                                        _bool(group.startswith(_SYSTEM_GROUP_PREFIX))), n)
        yield fam

    def _consumer_gauges(self) -> Iterator[Metric]:
        labels = ("consumer_group", "topic", "is_retry", "is_system")
        lag = self._family(GaugeMetricFamily, "rocketmq_consumer_lag_messages", "Messages not "
                           "yet committed by the group", labels)
        lag_ms = self._family(GaugeMetricFamily, "rocketmq_consumer_lag_latency", "Age of the "
                              "oldest message not yet committed by the group, milliseconds",
                              labels)
        inflight = self._family(GaugeMetricFamily, "rocketmq_consumer_inflight_messages",
                                "Messages pulled by the group but not yet committed", labels)
        ready = self._family(GaugeMetricFamily, "rocketmq_consumer_ready_messages", "Messages "
                             "not yet pulled by the group", labels)
        queueing = self._family(GaugeMetricFamily, "rocketmq_consumer_queueing_latency", "Age of "
                                "the oldest message not yet pulled by the group, milliseconds",
                                labels)
        store = self.broker.store
        pull_offset = self.metrics.pull_offset
        now = time.time_ns() // 1_000_000
        for key, committed_by_queue in sorted(self.broker.offsets.snapshot().items()):
            topic, _, group = key.partition("@")
            n_lag = n_inflight = n_ready = 0
            oldest_lag = oldest_ready = now
            for qid, committed in committed_by_queue.items():
                end = store.max_offset_in_queue(topic, qid)
                committed = max(committed, store.min_offset_in_queue(topic, qid), 0)
                pulled = pull_offset(group, topic, qid)
                pull = min(max(committed if pulled is None else pulled, committed), end)
                if end > committed:
                    n_lag += end - committed
                    ts = store.message_store_time(topic, qid, committed)
                    if ts > 0:
                        oldest_lag = min(oldest_lag, ts)
                n_inflight += pull - committed
                if end > pull:
                    n_ready += end - pull
                    ts = store.message_store_time(topic, qid, pull)
                    if ts > 0:
                        oldest_ready = min(oldest_ready, ts)
            values = self._values(group, topic, _bool(topic.startswith(RETRY_PREFIX)),
                                  self._system(topic, group))
            lag.add_metric(values, n_lag)
            lag_ms.add_metric(values, max(0, now - oldest_lag))
            inflight.add_metric(values, n_inflight)
            ready.add_metric(values, n_ready)
            queueing.add_metric(values, max(0, now - oldest_ready))
        yield from (lag, lag_ms, inflight, ready, queueing)

    def _storage(self) -> Iterator[Metric]:
        store = self.broker.store
        cl = store.commitlog
        end = cl.max_offset
        for name, doc, value in (
                ("rocketmq_storage_size", "Bytes of the store's files on disk",
                 _store_bytes(store.root)),
                ("rocketmq_storage_flush_behind_bytes", "CommitLog bytes written but not yet "
                 "flushed", max(0, end - cl.flushed_offset)),
                ("rocketmq_storage_dispatch_behind_bytes", "CommitLog bytes not yet dispatched to "
                 "the ConsumeQueues and the index", max(0, end - store.dispatcher.dispatch_from))):
            g = self._family(GaugeMetricFamily, name, doc, ())
            g.add_metric(self._values(), value)
            yield g



def metrics_registry(broker: Broker) -> CollectorRegistry:
    """A registry holding only the broker's families (no process or GC collectors: RocketMQ's
    exporter has none either, and each would be one more scrape-time cost)."""
    if broker.metrics is None:
        raise ValueError("the broker was built with metricsPort=0: it keeps no metrics")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, broker.metrics))
    return registry
