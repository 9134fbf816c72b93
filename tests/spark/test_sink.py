"""The topic sink (``write`` / ``writeStream`` ``.format("rocketmq")``) against a broker in this
process, read back through the client: at-least-once in batch and streaming with every column,
and exactly-once: a failed batch leaves nothing visible, a replayed batchId (checkpoint surgery,
SPARK.md #11) writes nothing twice, and a commit cut short between its marks is resumed without
duplicates."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from rocketlite.broker.topics import TRANS_HALF_TOPIC
from rocketlite.client.broker_api import BrokerApi, PullStatus
from rocketlite.client.instance import ClientConfig, ClientInstance
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer, SendResult
from rocketlite.client.transaction import HalfProducer
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.spark.sink_client import (
    MarkerStore,
    commit_exactly_once,
    end_all,
    send_halves,
    send_rows,
)
from rocketlite.spark.sink_rows import Action, Marker, SinkError, Target, UniqKeys, uniq_key

if TYPE_CHECKING:
    from conftest import BrokerThread  # tests/spark/conftest.py's: a type only

DEADLINE = 30.0


def eventually(check: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.05)


def dispatched(broker: BrokerThread) -> None:
    """Wait until the store has indexed everything written (consume queues are read next)."""
    store = broker.broker.store
    eventually(lambda: store.dispatcher.dispatch_from >= store.commitlog.max_offset, "dispatch")


def read_topic(broker: BrokerThread, topic: str) -> list[MessageExt]:
    """Every message of ``topic``, pulled through the client queue by queue."""
    dispatched(broker)

    async def go() -> list[MessageExt]:
        inst = ClientInstance(ClientConfig(namesrv_addr=broker.ns_addr))
        await inst.start()
        try:
            route = await inst.update_route(topic)
            assert route is not None, f"no route for {topic}"
            api, out = BrokerApi(inst), []
            for qd in route.queueDatas:
                for q in range(qd.readQueueNums):
                    offset = 0
                    while True:
                        r = await api.pull("sink-test-reader", MessageQueue(topic, qd.brokerName, q),
                                           offset, 256)
                        if r.status is not PullStatus.FOUND:
                            break
                        out += r.messages
                        offset = r.next_begin_offset
            return out
        finally:
            await inst.close()

    return broker.run(go())


def counters(broker: BrokerThread) -> tuple[int, int, int]:
    """(half messages stored, commits, rollbacks) so far."""
    b = broker.broker
    return (b.store.max_offset_in_queue(TRANS_HALF_TOPIC, 0), b.transactions.end.commits,
            b.transactions.end.rollbacks)


def write_files(folder: Path, batches: list[list[dict[str, Any]]]) -> None:
    """One JSON-lines file per micro-batch, mtimes in order (the file source reads oldest first)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = time.time() - 1000
    for i, rows in enumerate(batches):
        path = folder / f"part-{i:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (base + i, base + i))


def uncommit(checkpoint: Path, batch: int) -> None:
    """Make Spark replay ``batch`` on restart: its commit log entry and checksum go."""
    (checkpoint / "commits" / str(batch)).unlink()
    (checkpoint / "commits" / f".{batch}.crc").unlink()


# -- at-least-once -----------------------------------------------------------------------------


def test_batch_write_every_column_and_topic_rules(spark: Any, broker: BrokerThread) -> None:
    broker.create_topic("SinkA", 2)
    broker.create_topic("SinkB", 2)
    broker.create_topic("SinkC", 2)
    rows = [("SinkA" if i % 4 else "SinkB", f"body-{i}".encode(), f"T{i % 3}", [f"k{i}", "shared"],
             {"i": str(i)}, i % 2 if i % 4 else None) for i in range(60)]
    df = spark.createDataFrame(rows, "topic STRING, body BINARY, tags STRING, keys ARRAY<STRING>, "
                                     "properties MAP<STRING,STRING>, queue_id INT").repartition(3)
    expected = dict(df.rdd.mapPartitionsWithIndex(
        lambda p, it: [(r.body, uniq_key("alo-batch", 0, p, i)) for i, r in enumerate(it)]).collect())
    (df.write.format("rocketmq").option("nameserver", broker.ns_addr).option("sinkId", "alo-batch")
       .option("batchSize", "7").mode("append").save())

    got = read_topic(broker, "SinkA") + read_topic(broker, "SinkB")
    assert len(got) == 60
    for m in got:
        i = int(m.body.decode().split("-")[1])
        assert m.topic == ("SinkA" if i % 4 else "SinkB")
        assert m.tags == f"T{i % 3}" and m.keys == [f"k{i}", "shared"]
        assert m.properties["i"] == str(i)
        assert m.uniq_key == m.msg_id == expected[m.body]
        if i % 4:
            assert m.queue_id == i % 2  # the queue_id column pins the queue
    # without a queue_id, each batch goes to the producer's next queue (its start is random)
    assert {m.queue_id for m in got if m.topic == "SinkB"} <= {0, 1}

    # The topic option overrides the column; a string body is sent as UTF-8.
    small = spark.createDataFrame([("Nowhere", f"é{i}") for i in range(5)], "topic STRING, body STRING")
    small.write.format("rocketmq").option("nameserver", broker.ns_addr).option("topic", "SinkC") \
        .mode("append").save()
    assert sorted(m.body.decode() for m in read_topic(broker, "SinkC")) == [f"é{i}" for i in range(5)]

    with pytest.raises(Exception, match="column 'body' is int"):
        spark.range(1).selectExpr("1 AS body").write.format("rocketmq") \
            .option("nameserver", broker.ns_addr).option("topic", "SinkC").mode("append").save()
    with pytest.raises(Exception, match="only appends"):
        small.write.format("rocketmq").option("nameserver", broker.ns_addr).mode("overwrite").save()
    with pytest.raises(Exception, match=r"unknown option\(s\) tpoic"):
        small.write.format("rocketmq").option("nameserver", broker.ns_addr).option("tpoic", "x") \
            .mode("append").save()


def test_stream_at_least_once_keys_follow_query_batch_partition_row(
        spark: Any, broker: BrokerThread, tmp_path: Path) -> None:
    broker.create_topic("SinkStream", 2)
    batches = [[{"body": f"b{b}-r{r}", "tags": f"batch{b}"} for r in range(15)] for b in range(3)]
    write_files(tmp_path / "in", batches)
    stream = (spark.readStream.schema("body STRING, tags STRING").option("maxFilesPerTrigger", 1)
              .json(str(tmp_path / "in")))
    q = (stream.writeStream.format("rocketmq").option("nameserver", broker.ns_addr)
         .option("topic", "SinkStream").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(120), "the query did not finish within 120 s"
    finally:
        q.stop()
    assert q.exception() is None
    got = read_topic(broker, "SinkStream")
    assert sorted(m.body.decode() for m in got) == sorted(r["body"] for b in batches for r in b)
    for m in got:
        b, r = (int(x[1:]) for x in m.body.decode().split("-"))
        assert m.tags == f"batch{b}"
        assert m.uniq_key == uniq_key(q.id, b, 0, r)  # one file per batch: one partition


# -- exactly-once ------------------------------------------------------------------------------


def test_exactly_once_failed_batch_leaves_nothing_visible(spark: Any, broker: BrokerThread) -> None:
    broker.create_topic("SinkFail", 2)
    halves, commits, rollbacks = counters(broker)
    # Partition 1 (ids 200-399) fails at id 350, after sending 150 half messages.
    df = spark.range(0, 400, 1, 2).selectExpr(
        "CASE WHEN id = 350 THEN NULL ELSE CAST(CONCAT('m', id) AS BINARY) END AS body")
    with pytest.raises(Exception, match="partition 1 row 150: body is null"):
        (df.write.format("rocketmq").option("nameserver", broker.ns_addr).option("topic", "SinkFail")
           .option("deliveryGuarantee", "exactly_once").option("maxInFlight", "16").mode("append").save())
    sent = counters(broker)[0] - halves
    assert sent >= 150  # the failing task had sent its first 150 rows as half messages
    eventually(lambda: counters(broker)[2] - rollbacks >= 150, "the failing task rolls back its own")
    assert read_topic(broker, "SinkFail") == []
    assert counters(broker)[1] == commits  # nothing was committed


def test_exactly_once_stream_failure_then_replays(spark: Any, broker: BrokerThread, tmp_path: Path) -> None:
    from pyspark.errors import StreamingQueryException
    from pyspark.sql.functions import col, udf

    broker.create_topic("SinkEO", 2)
    flag = tmp_path / "fail-on-b1-r7"
    flag.touch()

    @udf("string", useArrow=False)
    def check(body: str) -> str:
        if body == "b1-r7" and os.path.exists(str(flag)):
            raise ValueError("poisoned row")
        return body

    batches = [[{"body": f"b{b}-r{r}"} for r in range(20)] for b in range(3)]
    write_files(tmp_path / "in", batches)
    ck = tmp_path / "ck"

    def run(fails: bool = False) -> Any:
        stream = (spark.readStream.schema("body STRING").option("maxFilesPerTrigger", 1)
                  .json(str(tmp_path / "in")).select(check(col("body")).alias("body")))
        q = (stream.writeStream.format("rocketmq").option("nameserver", broker.ns_addr)
             .option("topic", "SinkEO").option("deliveryGuarantee", "exactly_once")
             .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
        try:
            if fails:
                with pytest.raises(StreamingQueryException, match="poisoned row"):
                    q.awaitTermination(120)
            else:
                assert q.awaitTermination(120), "the query did not finish within 120 s"
        finally:
            q.stop()  # a hung query must not keep running in the shared session
        return q

    def bodies() -> list[str]:
        return sorted(m.body.decode() for m in read_topic(broker, "SinkEO"))

    q = run(fails=True)
    assert q.exception() is not None
    assert bodies() == sorted(f"b0-r{r}" for r in range(20))  # batch 1 failed: none of it is visible
    flag.unlink()
    q = run()  # batch 1 again, then 2
    everything = sorted(r["body"] for b in batches for r in b)
    assert q.exception() is None and bodies() == everything
    group, qid = f"rocketlite-sink-{q.id}", 0
    marker = broker.call(broker.broker.offsets.query, group, "SinkEO", qid)
    assert Marker.decode(marker) == Marker(2, True)

    # Batch 2 committed, but Spark did not log it: the replay's half messages are rolled back.
    _, commits, rollbacks = counters(broker)
    uncommit(ck, 2)
    assert run().exception() is None
    assert bodies() == everything
    assert counters(broker)[1:] == (commits, rollbacks + 20)

    # Batch 2 marked in progress (a commit cut short): every row is found visible, none re-sent.
    broker.call(broker.broker.offsets.commit, group, "SinkEO", qid, Marker(2, False).encode())
    uncommit(ck, 2)
    assert run().exception() is None
    assert bodies() == everything
    assert counters(broker)[1:] == (commits, rollbacks + 40)
    assert Marker.decode(broker.call(broker.broker.offsets.query, group, "SinkEO", qid)) == Marker(2, True)


def test_resume_commits_only_what_a_cut_short_commit_missed(broker: BrokerThread) -> None:
    """No Spark: the protocol of ``sink_client`` with real half messages. A first commit of
    batch 5 made 4 of 10 rows visible and died before marking it done; the replay's commit
    commits the other 6 and rolls back the 4 duplicates."""
    broker.create_topic("SinkResume", 2)
    keys = UniqKeys("resume-sink", 5, 0)

    def rows() -> list[tuple[Message, Target, str]]:
        return [(Message("SinkResume", f"row-{i}".encode(), uniq_key=keys.key(i)), Target("SinkResume"),
                 f"row {i}") for i in range(10)]

    async def go() -> tuple[Action, Action, Marker | None]:
        p = HalfProducer("rocketlite-spark-sink", namesrv_addr=broker.ns_addr)
        await p.start()
        try:
            markers = MarkerStore(p, "SinkResume", "resume-sink")
            first = await send_halves(p, rows(), max_in_flight=4, timeout=3)
            await markers.write(Marker(5, done=False))
            await end_all(p, first[:4], True, max_in_flight=4, timeout=3)  # ... and the driver dies
            replay = await send_halves(p, rows(), max_in_flight=4, timeout=3)
            resumed = await commit_exactly_once(p, replay, 5, markers, max_in_flight=4, timeout=3)
            again = await send_halves(p, rows(), max_in_flight=4, timeout=3)
            skipped = await commit_exactly_once(p, again, 5, markers, max_in_flight=4, timeout=3)
            return resumed, skipped, await markers.read()
        finally:
            await p.shutdown()

    resumed, skipped, marker = broker.run(go())
    assert (resumed, skipped, marker) == (Action.RESUME, Action.SKIP, Marker(5, True))
    got = read_topic(broker, "SinkResume")
    assert sorted(m.body for m in got) == sorted(f"row-{i}".encode() for i in range(10))
    assert sorted(m.uniq_key or "" for m in got) == sorted(keys.key(i) for i in range(10))



def test_send_paths_roll_back_on_a_bad_row_and_check_queues(broker: BrokerThread) -> None:
    """No Spark: a row failing midway makes ``send_halves`` roll back what it sent before it
    raises; a queue_id the topic lacks fails naming the row and the queues there are."""
    broker.create_topic("SinkPaths", 2)
    halves, commits, rollbacks = counters(broker)

    def rows(bad_at: int, queue_id: int | None = None) -> Iterator[tuple[Message, Target, str]]:
        for i in range(20):
            if i == bad_at:
                raise SinkError(f"row {i}: body is null")
            yield Message("SinkPaths", b"r%d" % i), Target("SinkPaths", queue_id), f"row {i}"

    async def go() -> None:
        p = HalfProducer("rocketlite-spark-sink", namesrv_addr=broker.ns_addr)
        await p.start()
        try:
            with pytest.raises(SinkError, match="row 12"):
                await send_halves(p, rows(12), max_in_flight=4, timeout=3)
            with pytest.raises(SinkError, match=r"row 0: topic 'SinkPaths' has no writable queue 7 "
                                                r"\(it has broker-a:0, broker-a:1\)"):
                await send_rows(p, rows(99, queue_id=7), batch_size=4, max_in_flight=2, timeout=3)
        finally:
            await p.shutdown()

    broker.run(go())
    assert counters(broker) == (halves + 12, commits, rollbacks + 12)
    assert read_topic(broker, "SinkPaths") == []


def test_exactly_once_task_row_cap_rolls_back_and_fails(broker: BrokerThread) -> None:
    """No Spark: a task past ``max_rows`` (option maxRowsPerTask) rolls back the half messages
    it sent and fails pointing at smaller batches or more partitions."""
    broker.create_topic("SinkCap", 2)
    halves, commits, rollbacks = counters(broker)

    def rows() -> Iterator[tuple[Message, Target, str]]:
        for i in range(20):
            yield Message("SinkCap", b"r%d" % i), Target("SinkCap"), f"partition 0 row {i}"

    async def go() -> int:
        p = HalfProducer("rocketlite-spark-sink", namesrv_addr=broker.ns_addr)
        await p.start()
        try:
            with pytest.raises(SinkError, match=r"partition 0 row 8: .*maxRowsPerTask=8 .*"
                                                r"maxOffsetsPerTrigger.*more partitions"):
                await send_halves(p, rows(), max_in_flight=4, timeout=3, max_rows=8)
            full = await send_halves(p, rows(), max_in_flight=4, timeout=3, max_rows=20)
            await end_all(p, full, False, max_in_flight=4, timeout=3)
            return len(full)
        finally:
            await p.shutdown()

    assert broker.run(go()) == 20  # exactly at the cap is fine
    assert counters(broker) == (halves + 28, commits, rollbacks + 28)
    assert read_topic(broker, "SinkCap") == []


def test_at_least_once_pending_bytes_cap_flushes_the_largest_batch(broker: BrokerThread) -> None:
    """No Spark: with open batches on many queues, more than ``max_pending_bytes`` of bodies
    in them sends the largest early; every row still arrives once."""
    broker.create_topic("SinkBytes", 4)
    batches: list[int] = []

    class Recording(Producer):
        async def send_batch(self, msgs: Sequence[Message], queue: MessageQueue | None = None,
                             *, timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
            batches.append(sum(len(m.body) for m in msgs))
            return await super().send_batch(msgs, queue, timeout=timeout)

    rows = [(Message("SinkBytes", b"%03d" % i + b"x" * 97), Target("SinkBytes", i % 4), f"row {i}")
            for i in range(40)]

    async def go() -> int:
        p = Recording("rocketlite-spark-sink", namesrv_addr=broker.ns_addr)
        await p.start()
        try:
            return await send_rows(p, rows, batch_size=256, max_in_flight=2, timeout=3,
                                   max_pending_bytes=450)
        finally:
            await p.shutdown()

    assert broker.run(go()) == 40
    # Without the cap: 4 batches of 1000 bytes. With it no batch outgrows 450 held + the new row.
    assert sum(batches) == 4000 and len(batches) > 4 and max(batches) <= 500
    got = read_topic(broker, "SinkBytes")
    assert sorted(m.body[:3] for m in got) == sorted(b"%03d" % i for i in range(40))
