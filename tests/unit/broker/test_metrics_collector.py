"""The metrics collector over a broker whose store, offsets and clients hold known content: every
family RocketMQ 5 names, with its labels and the values that content implies."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.metrics import SIZE_BUCKETS, BrokerMetrics
from rocketlite.broker.metrics_collector import metrics_registry
from rocketlite.broker.topics import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rocketlite.common.errors import ConfigError
from rocketlite.formats.properties import REAL_TOPIC, encode_properties
from rocketlite.protocol.bodies import ConsumeType, MessageModel
from rocketlite.protocol.codes import MQVersion
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageToStore

DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "rocketlite-broker.json"
STATIC = {"cluster": "C1", "node_type": "broker", "node_id": "b1"}


def _store_config(root: Path) -> StoreConfig:
    return StoreConfig.from_properties({
        "storePathRootDir": str(root), "listenPort": "0",
        "mappedFileSizeCommitLog": str(1 << 20), "mappedFileSizeConsumeQueue": "2000",
        "maxHashSlotNum": "256", "maxIndexNum": "2000"})


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig(broker_cluster_name="C1", broker_name="b1", namesrv_addr=""),
               _store_config(tmp_path / "store"))
    b.store.start()
    try:
        yield b
    finally:
        b.store.shutdown()


def _put(b: Broker, msgs: list[MessageToStore]) -> list[int]:
    """Append as the send path does (one fold per append); the stored sizes."""
    results = b.store.put_messages_sync(msgs)
    assert b.metrics is not None
    b.metrics.fold_in(msgs, results)
    return [r.size for r in results]


def _disk(root: Path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


class Scrape:
    """One scrape's samples, parsed back from the text format (every lookup sees that scrape:
    the gauges are computed when scraped)."""

    def __init__(self, reg: CollectorRegistry) -> None:
        self.text = generate_latest(reg).decode()
        self.families = list(text_string_to_metric_families(self.text))
        self.samples = {(s.name, frozenset(s.labels.items())): s.value
                        for f in self.families for s in f.samples}

    def names(self) -> set[str]:
        return {f.name for f in self.families}


def _sample(scrape: Scrape, name: str, **labels: str) -> float | None:
    return scrape.samples.get((name, frozenset({**STATIC, **labels}.items())))


def test_families_labels_and_values(broker: Broker) -> None:
    b = broker
    m = b.metrics
    assert m is not None
    b.topics.create_plain("T", 2)
    sizes = _put(b, [MessageToStore(topic="T", body=b"x" * 100, queue_id=0) for _ in range(3)])
    sizes += _put(b, [MessageToStore(topic="T", body=b"y" * 2000, queue_id=1) for _ in range(2)])
    # a mixed append: a delayed message (counted under its real topic), a half message, a retry
    delayed = encode_properties({REAL_TOPIC: "T", "DELAY": "1"})
    mixed = _put(b, [MessageToStore(topic=SCHEDULE_TOPIC, body=b"d", properties=delayed),
                     MessageToStore(topic=TRANS_HALF_TOPIC, body=b"h",
                                    properties=encode_properties({REAL_TOPIC: "U"})),
                     MessageToStore(topic="%RETRY%G", body=b"r")])
    m.fold_in_batch("T", 4, 4000)
    m.fold_out("T", "G", 1, 100)  # popped
    b.offsets.commit("G", "T", 0, 1)
    b.offsets.commit("G", "T", 1, 0)
    m.fold_pull("G", "T", 0, 2, 200, 2)
    m.fold_pull("G", "T", 0, 1, 145, 3)  # pulled everything of queue 0, nothing of queue 1
    m.rpc.observe_ms(10, 0, 2.0)
    m.rpc.observe_ms(10, 0, 50.0)
    m.rpc.observe_ms(11, 19, 0.5, True, "success")
    b.producers.register("PG", "ch1", "p1", "JAVA", int(MQVersion.V5_3_3))
    b.producers.register("PG2", "ch2", "p2", "JAVA", int(MQVersion.V5_3_3))
    b.producers.register("PG", "ch3", "p3", "CPP", 7)
    b.consumers.register("G", "ch4", "c1", "JAVA", int(MQVersion.V4_9_4),
                         ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING, None, [])
    cl = b.store.commitlog
    deadline = time.monotonic() + 10
    while b.store.dispatcher.dispatch_from < cl.max_offset and time.monotonic() < deadline:
        time.sleep(0.01)
    stored_q0 = b.store.message_store_time("T", 0, 1)
    stored_q1 = b.store.message_store_time("T", 1, 0)

    disk_before = _disk(b.store.root)
    before = time.time() * 1000
    reg = Scrape(metrics_registry(b))
    after = time.time() * 1000
    text = reg.text
    assert reg.names() >= {
        "rocketmq_messages_in", "rocketmq_messages_out", "rocketmq_throughput_in",
        "rocketmq_throughput_out", "rocketmq_message_size", "rocketmq_rpc_latency",
        "rocketmq_consumer_lag_messages", "rocketmq_consumer_lag_latency",
        "rocketmq_consumer_inflight_messages", "rocketmq_consumer_queueing_latency",
        "rocketmq_consumer_ready_messages", "rocketmq_producer_connections",
        "rocketmq_consumer_connections", "rocketmq_storage_size",
        "rocketmq_storage_flush_behind_bytes", "rocketmq_storage_dispatch_behind_bytes",
        "rocketmq_topic_number", "rocketmq_consumer_group_number", "rocketmq_broker_permission"}

    normal = {"topic": "T", "message_type": "normal", "is_system": "false"}
    assert _sample(reg, "rocketmq_messages_in_total", **normal) == 5 + 4
    assert _sample(reg, "rocketmq_throughput_in_total", **normal) == sum(sizes) + 4000
    assert _sample(reg, "rocketmq_messages_in_total", topic="T", message_type="delay",
                   is_system="false") == 1
    assert _sample(reg, "rocketmq_throughput_in_total", topic="T", message_type="delay",
                   is_system="false") == mixed[0]
    assert _sample(reg, "rocketmq_messages_in_total", topic="U", message_type="transaction",
                   is_system="false") == 1
    assert "%RETRY%G" not in text  # retry and DLQ topics are not messages in, as in Java
    # message size: each append's messages at its average size
    assert _sample(reg, "rocketmq_message_size_count", **normal) == 9
    assert _sample(reg, "rocketmq_message_size_sum", **normal) == sum(sizes) + 4000
    small = sizes[0]
    assert small < SIZE_BUCKETS[0] < sizes[3] < SIZE_BUCKETS[1]
    # queue 0's three and the batch's four (1000 bytes on average) are within 1 KiB
    assert _sample(reg, "rocketmq_message_size_bucket", le="1024.0", **normal) == 3 + 4
    assert _sample(reg, "rocketmq_message_size_bucket", le="4096.0", **normal) == 9
    assert _sample(reg, "rocketmq_message_size_bucket", le="+Inf", **normal) == 9

    out = {"topic": "T", "consumer_group": "G", "is_system": "false"}
    assert _sample(reg, "rocketmq_messages_out_total", **out) == 4
    assert _sample(reg, "rocketmq_throughput_out_total", **out) == 445

    rpc = {"protocol_type": "remoting", "request_code": "10", "response_code": "0",
           "is_long_polling": "false", "result": "success"}
    assert _sample(reg, "rocketmq_rpc_latency_count", **rpc) == 2
    assert _sample(reg, "rocketmq_rpc_latency_sum", **rpc) == 52.0
    assert _sample(reg, "rocketmq_rpc_latency_bucket", le="3.0", **rpc) == 1
    assert _sample(reg, "rocketmq_rpc_latency_bucket", le="100.0", **rpc) == 2
    assert _sample(reg, "rocketmq_rpc_latency_count", **{
        **rpc, "request_code": "11", "response_code": "19", "is_long_polling": "true"}) == 1

    lag = {"consumer_group": "G", "topic": "T", "is_retry": "false", "is_system": "false"}
    assert _sample(reg, "rocketmq_consumer_lag_messages", **lag) == (3 - 1) + (2 - 0)
    assert _sample(reg, "rocketmq_consumer_inflight_messages", **lag) == 3 - 1
    assert _sample(reg, "rocketmq_consumer_ready_messages", **lag) == 2
    oldest = min(stored_q0, stored_q1)
    lag_ms = _sample(reg, "rocketmq_consumer_lag_latency", **lag)
    assert lag_ms is not None and before - oldest - 1 <= lag_ms <= after - oldest + 1
    queueing = _sample(reg, "rocketmq_consumer_queueing_latency", **lag)
    assert queueing is not None and before - stored_q1 - 1 <= queueing <= after - stored_q1 + 1

    assert _sample(reg, "rocketmq_producer_connections", language="JAVA", version="V5_3_3",
                   protocol_type="remoting") == 2
    assert _sample(reg, "rocketmq_producer_connections", language="CPP", version="V3_0_0_BETA6_SNAPSHOT",
                   protocol_type="remoting") == 1
    assert _sample(reg, "rocketmq_consumer_connections", consumer_group="G", language="JAVA",
                   version="V4_9_4", consume_mode="push", protocol_type="remoting",
                   is_system="false") == 1

    assert _sample(reg, "rocketmq_topic_number") == len(b.topics.table)
    assert _sample(reg, "rocketmq_consumer_group_number") == len(b.subscriptions.table)
    assert _sample(reg, "rocketmq_broker_permission") == 6
    # the store only grows meanwhile (the next CommitLog segment may be preallocated)
    assert disk_before <= (_sample(reg, "rocketmq_storage_size") or 0) <= _disk(b.store.root)
    assert _sample(reg, "rocketmq_storage_dispatch_behind_bytes") == 0
    behind = _sample(reg, "rocketmq_storage_flush_behind_bytes")
    assert behind is not None and 0 <= behind <= cl.max_offset

    # the Grafana dashboard queries only series this scrape has
    queried = set(re.findall(r"rocketmq_[a-z_]+", json.dumps(json.loads(DASHBOARD.read_text()))))
    assert len(queried) >= 15
    assert queried <= {name for name, _ in reg.samples}


def test_lag_counts_from_the_queue_start(broker: Broker) -> None:
    """A group with no pull since the start: in-flight 0, every message not committed is lag
    and ready, and a committed offset below the queue's minimum counts from the minimum."""
    b = broker
    b.topics.create_plain("T", 1)
    _put(b, [MessageToStore(topic="T", body=b"x", queue_id=0) for _ in range(4)])
    b.offsets.commit("G2", "T", 0, 4)
    b.offsets.commit("G3", "T", 0, 1)
    reg = Scrape(metrics_registry(b))
    lag = {"topic": "T", "is_retry": "false", "is_system": "false"}
    assert _sample(reg, "rocketmq_consumer_lag_messages", consumer_group="G2", **lag) == 0
    assert _sample(reg, "rocketmq_consumer_lag_latency", consumer_group="G2", **lag) == 0
    assert _sample(reg, "rocketmq_consumer_queueing_latency", consumer_group="G2", **lag) == 0
    assert _sample(reg, "rocketmq_consumer_lag_messages", consumer_group="G3", **lag) == 3
    assert _sample(reg, "rocketmq_consumer_ready_messages", consumer_group="G3", **lag) == 3
    assert _sample(reg, "rocketmq_consumer_inflight_messages", consumer_group="G3", **lag) == 0


def test_metrics_off(tmp_path: Path) -> None:
    b = Broker(BrokerConfig(namesrv_addr="", metrics_port=0), _store_config(tmp_path / "s"))
    assert b.metrics is None
    with pytest.raises(ValueError, match="metricsPort=0"):
        metrics_registry(b)
    with pytest.raises(ConfigError, match="metricsPort"):
        BrokerConfig(metrics_port=70000)
    assert BrokerConfig.from_properties({"metricsPort": "5558"}).metrics_port == 5558
    assert BrokerConfig().metrics_port == 5557


def test_fold_in_is_per_topic() -> None:
    m = BrokerMetrics()
    msgs = [MessageToStore(topic=t, body=b"") for t in ("A", "B", "A")]
    m.fold_in(msgs, [(0, 10, 0, 0), (10, 20, 0, 0), (30, 30, 1, 0)])
    assert m.messages_in == {("A", "normal"): [2, 40], ("B", "normal"): [1, 20]}
    assert m.message_size[("A", "normal")].count == 2


def test_fold_in_bytes_are_the_records_not_a_segment_end_filler() -> None:
    m = BrokerMetrics(segment_size=1000)
    msgs = [MessageToStore(topic="A", body=b"") for _ in range(3)]
    m.fold_in(msgs, [(100, 300, 0, 0), (400, 300, 1, 0), (700, 300, 2, 0)])  # ends at 1000
    assert m.messages_in[("A", "normal")] == [3, 900]
    # the second record did not fit in the first segment: it starts the next one
    m.fold_in(msgs[:2], [(1600, 300, 3, 0), (2000, 300, 4, 0)])
    assert m.messages_in[("A", "normal")] == [5, 1500]
