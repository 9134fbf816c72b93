"""``format("rocketmq")`` as a source, against a live broker: batch bounds, streaming batches,
checkpoint restarts, and retention deleting messages under a running query."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.client import Message, Producer
from rocketlite.formats.properties import TAGS, encode_properties
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.spark.offsets import DataLossError, QueueRange
from rocketlite.spark.options import parse_source_options
from rocketlite.spark.topic_source import read_range
from rocketlite.store.message import MessageToStore

DEADLINE = 60.0


def wait_for(what: str, check: Callable[[], bool], timeout: float = DEADLINE) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` at the deadline."""
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def source(spark: Any, broker: Any, *, stream: bool = False, **options: str) -> Any:
    reader = spark.readStream if stream else spark.read
    reader = reader.format("rocketmq").option("nameserver", broker.ns_addr)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def offsets_of(rows: list[Any]) -> list[tuple[int, int]]:
    return sorted((r.queue_id, r.queue_offset) for r in rows)


@pytest.fixture(scope="module")
def producer(broker: Any) -> Iterator[Producer]:
    """A producer on the broker's loop that pins queues by ``MessageQueue`` (``broker.send`` with
    ``queue_id`` cannot: its selector reads ``q.queue_id`` where MessageQueue has ``queueId``)."""
    p = Producer("spark-source-tests", namesrv_addr=broker.ns_addr)
    broker.run(p.start())
    try:
        yield p
    finally:
        broker.run(p.shutdown())


def fill(broker: Any, producer: Producer, topic: str, per_queue: dict[int, int], *,
         tags: Callable[[int], str] | None = None, first: int = 0) -> None:
    """Send ``per_queue[q]`` messages to each queue q, bodies ``topic-q-i`` (i from ``first``)."""
    async def go() -> None:
        for qid, n in per_queue.items():
            mq = MessageQueue(topic, "broker-a", qid)
            for i in range(first, first + n):
                msg = Message(topic, f"{topic}-{qid}-{i}".encode(), tags=tags(i) if tags else None)
                await producer.send(msg, mq)
    broker.run(go())


# ------------------------------------------------------------------------------------------ batch


def test_batch_read_with_bounds_tags_and_timestamps(spark: Any, broker: Any, producer: Producer) -> None:
    topic = "SparkSrcBatch"
    broker.create_topic(topic, 2)
    fill(broker, producer, topic, {0: 30, 1: 20}, tags=lambda i: "even" if i % 2 == 0 else "odd")

    everything = source(spark, broker, subscribe=topic).collect()
    assert offsets_of(everything) == [(0, i) for i in range(30)] + [(1, i) for i in range(20)]
    row = next(r for r in everything if (r.queue_id, r.queue_offset) == (1, 7))
    assert (row.topic, row.broker_name, row.tags) == (topic, "broker-a", "odd")
    assert bytes(row.body) == f"{topic}-1-7".encode()
    assert row.msg_id and row.uniq_key == row.msg_id and row.properties[TAGS] == "odd"
    assert row.store_timestamp is not None and row.born_host and row.store_host

    bounded = source(spark, broker, subscribe=topic,
                     startingOffsets=json.dumps({topic: {"broker-a": {"0": 5, "1": -2}}}),
                     endingOffsets=json.dumps({topic: {"broker-a": {"0": 12}}})).collect()
    assert offsets_of(bounded) == [(0, i) for i in range(5, 12)] + [(1, i) for i in range(20)]

    assert len(source(spark, broker, subscribe=topic).limit(3).collect()) == 3  # a read stopped early

    evens = source(spark, broker, subscribe=topic, subExpression="even").select("queue_id", "queue_offset",
                                                                                  "tags").collect()
    assert offsets_of(evens) == [(0, i) for i in range(0, 30, 2)] + [(1, i) for i in range(0, 20, 2)]
    assert {r.tags for r in evens} == {"even"}

    # Search by time: every message stored at or after the 25th's store time, per queue.
    times = sorted(r.store_timestamp for r in everything)
    since = times[25]
    since_ms = int(since.timestamp() * 1000)
    later = source(spark, broker, subscribe=topic, startingTimestamp=str(since_ms)).collect()
    assert offsets_of(later) == offsets_of([r for r in everything if r.store_timestamp >= since])


def test_batch_read_subscribe_pattern_and_assign(spark: Any, broker: Any, producer: Producer) -> None:
    for t in ("SparkPatA", "SparkPatB", "SparkPatternNo"):
        broker.create_topic(t, 1)
        fill(broker, producer, t, {0: 3})
    rows = source(spark, broker, subscribePattern="SparkPat[AB]").select("topic", "queue_offset").collect()
    assert sorted((r.topic, r.queue_offset) for r in rows) == [(t, i) for t in ("SparkPatA", "SparkPatB")
                                                               for i in range(3)]
    assigned = source(spark, broker, assign=json.dumps({"SparkPatB": {"broker-a": [0]}})).collect()
    assert {r.topic for r in assigned} == {"SparkPatB"} and len(assigned) == 3
    assert source(spark, broker, subscribePattern="SparkNothing.*").count() == 0  # no partition at all


def test_option_errors_reach_the_user(spark: Any, broker: Any) -> None:
    with pytest.raises(Exception, match="maxOffsetsPerTrigger: only streaming queries"):
        source(spark, broker, subscribe="SparkSrcBatch", maxOffsetsPerTrigger="5").collect()
    with pytest.raises(Exception, match="topic 'SparkNoSuchTopic' does not exist"):
        source(spark, broker, subscribe="SparkNoSuchTopic").collect()
    with pytest.raises(Exception, match="endingOffsets: only batch queries"):
        source(spark, broker, stream=True, subscribe="SparkSrcBatch", endingOffsets="latest") \
            .writeStream.format("noop").start().awaitTermination(30)


# -------------------------------------------------------------------------------------- streaming


class Batches:
    """A ``foreachBatch`` sink keeping each micro-batch's (queue id, queue offset) pairs."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[tuple[int, int]]]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        self.batches.append((batch_id, offsets_of(df.select("queue_id", "queue_offset").collect())))

    @property
    def rows(self) -> list[tuple[int, int]]:
        return sorted(o for _, b in self.batches for o in b)


def start_stream(spark: Any, broker: Any, checkpoint: Path, sink: Batches, *, available_now: bool,
                 **options: str) -> Any:
    writer = source(spark, broker, stream=True, **options).writeStream.foreachBatch(sink) \
        .option("checkpointLocation", str(checkpoint))
    writer = writer.trigger(availableNow=True) if available_now else \
        writer.trigger(processingTime="200 milliseconds")
    return writer.start()


def run_available_now(spark: Any, broker: Any, checkpoint: Path, **options: str) -> Batches:
    sink = Batches()
    query = start_stream(spark, broker, checkpoint, sink, available_now=True, **options)
    assert query.awaitTermination(DEADLINE), "the availableNow query did not finish"
    assert query.exception() is None
    return sink


def test_stream_available_now_rate_limit_group_and_restart(spark: Any, broker: Any, producer: Producer,
                                                           tmp_path: Path) -> None:
    topic, group = "SparkSrcStream", "GID_spark_source_test"
    broker.create_topic(topic, 2)
    fill(broker, producer, topic, {0: 60, 1: 40})
    checkpoint = tmp_path / "checkpoint"

    first = run_available_now(spark, broker, checkpoint, subscribe=topic, startingOffsets="earliest",
                              maxOffsetsPerTrigger="30", group=group)
    # 30 per trigger, shared 60:40 over the queues; the last batch takes the rest.
    assert [len(b) for _, b in first.batches] == [30, 30, 30, 10]
    assert first.batches[0] == (0, [(0, i) for i in range(18)] + [(1, i) for i in range(12)])
    assert first.rows == [(0, i) for i in range(60)] + [(1, i) for i in range(40)]
    # The group's offsets (lag monitoring) trail by a batch: Spark commits batch N-1 while planning N.
    committed = tuple(broker.call(broker.broker.offsets.query, group, topic, q) for q in (0, 1))
    assert committed in {(54, 36), (60, 40)}

    # A crash after batch 3 was planned but before it was committed: drop its commit marker.
    (checkpoint / "commits" / "3").unlink()
    (checkpoint / "commits" / ".3.crc").unlink(missing_ok=True)
    fill(broker, producer, topic, {0: 5}, first=60)
    fill(broker, producer, topic, {1: 7}, first=40)
    again = run_available_now(spark, broker, checkpoint, subscribe=topic, startingOffsets="latest",
                              maxOffsetsPerTrigger="30", group=group)
    # Batch 3 is replayed with exactly its offsets, then only the new messages follow; the
    # checkpoint wins over startingOffsets.
    assert again.batches == [(3, first.batches[3][1]),
                             (4, [(0, i) for i in range(60, 65)] + [(1, i) for i in range(40, 47)])]


def test_stream_processing_time_from_latest(spark: Any, broker: Any, producer: Producer,
                                            tmp_path: Path) -> None:
    topic = "SparkSrcLive"
    broker.create_topic(topic, 2)
    fill(broker, producer, topic, {0: 10, 1: 10})  # before the query: not read (starts at latest)
    sink = Batches()
    query = start_stream(spark, broker, tmp_path / "checkpoint", sink, available_now=False, subscribe=topic)
    try:
        wait_for("the query's first trigger", lambda: bool(query.recentProgress))
        fill(broker, producer, topic, {0: 4, 1: 6}, first=10)
        wait_for("10 rows", lambda: len(sink.rows) >= 10)
    finally:
        query.stop()
    assert sink.rows == [(0, i) for i in range(10, 14)] + [(1, i) for i in range(10, 16)]


# -------------------------------------------------------------------------------------- retention
# Last in the module: expiring deletes every CommitLog file but the one being written, whatever
# topic its messages belong to.


def write_and_expire(broker: Any, topic: str, count: int, size: int) -> tuple[int, int]:
    """Append ``count`` messages of ``size`` bytes to queue 0 of ``topic`` (enough to roll the 1 MiB
    CommitLog files), then let retention delete every file but the current one as it would once
    ``fileReservedTime`` has passed. All on the broker's loop, so no request (a running query's
    included) sees a state in between. Returns the queue's (min, max) offsets afterwards."""
    store = broker.broker.store

    def go() -> tuple[int, int]:
        props = encode_properties({TAGS: "big"})
        store.put_messages_sync([MessageToStore(topic=topic, body=bytes([65 + i % 26]) * size, queue_id=0,
                                                properties=props) for i in range(count)])
        retention, clock = store.retention, store.retention.clock
        retention.clock = lambda: clock() + 1000 * 3600  # every file is now older than 72 h
        try:
            report = retention.run_once(manual=True)
        finally:
            retention.clock = clock
        assert report.commitlog_files_deleted > 0
        return store.min_offset_in_queue(topic, 0), store.max_offset_in_queue(topic, 0)

    result: tuple[int, int] = broker.call(go)
    return result


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_retention_under_a_running_query(spark: Any, broker: Any, producer: Producer, tmp_path: Path,
                                         fail_on_data_loss: bool) -> None:
    topic = f"SparkSrcRetention{fail_on_data_loss}"
    broker.create_topic(topic, 1)
    fill(broker, producer, topic, {0: 20})
    sink = Batches()
    query = start_stream(spark, broker, tmp_path / "checkpoint", sink, available_now=False, subscribe=topic,
                         startingOffsets="earliest", failOnDataLoss=str(fail_on_data_loss).lower())
    try:
        wait_for("the first 20 rows", lambda: len(sink.rows) >= 20)
        lo, hi = write_and_expire(broker, topic, 60, 40_000)
        assert 20 < lo < hi == 80  # offsets 20..lo-1 were never read, and are gone
        # An executor's read of a range planned before the deletion meets the same decision.
        opts = parse_source_options({"nameserver": broker.ns_addr, "subscribe": topic,
                                     "failondataloss": str(fail_on_data_loss)}, streaming=False)
        planned = QueueRange(topic, "broker-a", 0, 20, hi)
        if fail_on_data_loss:
            with pytest.raises(DataLossError, match=f"offsets 20..{lo - 1} are gone"):
                list(read_range(opts, planned, None))
        else:
            read = [n for batch in read_range(opts, planned, None) for n in batch["queue_offset"].to_pylist()]
            assert read == list(range(lo, hi))
        if fail_on_data_loss:
            wait_for("the query to fail", lambda: not query.isActive)
            error = str(query.exception())
            assert "failOnDataLoss=true" in error
            assert (f"topic '{topic}' broker 'broker-a' queue 0: messages at offsets 20..{lo - 1} "
                    "are gone") in error
            assert sink.rows == [(0, i) for i in range(20)]
        else:
            wait_for("the rows after the gap", lambda: (0, hi - 1) in sink.rows)
            assert query.isActive
            assert sink.rows == [(0, i) for i in range(20)] + [(0, i) for i in range(lo, hi)]
    finally:
        query.stop()
