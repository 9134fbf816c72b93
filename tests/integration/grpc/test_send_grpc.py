"""SendMessage through the generated stub: what is stored for NORMAL, FIFO and DELAY messages,
the per-entry answer, one store call per request, and every refusal's code."""

from __future__ import annotations

import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from grpchelp import GrpcEnv, grpc_world
from sendhelp import message, records, send, wait_records

from rocketlite.formats.message_id import decode_message_id
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.producer import consistent_hash
from rocketlite.store.message_store import PutResult

C = pb.Code


def topic(g: GrpcEnv, name: str, queues: int = 4, kind: str | None = None, perm: int = 6) -> None:
    g.broker.topics.update(TopicConfig(topicName=name, readQueueNums=queues,
                                       writeQueueNums=queues, perm=perm,
                                       attributes={"message.type": kind} if kind else {}))


def test_consistent_hash_is_guavas() -> None:
    # Values of Guava's Hashing.consistentHash (its HashingTest: input 0 stays in bucket 0;
    # growing the buckets moves an input only to the new bucket).
    assert consistent_hash(0, 1) == 0
    for value in (1, -7, 123456789, 2**40):
        prev = consistent_hash(value, 1)
        for n in range(2, 50):
            b = consistent_hash(value, n)
            assert 0 <= b < n
            assert b == prev or b == n - 1
            prev = b


async def test_normal_messages_are_stored_with_their_properties(g: GrpcEnv) -> None:
    topic(g, "N1")
    m1 = message("N1", b"body-1", props={"color": "red"})
    m2 = message("N1", b"body-2", tag=None, keys=())
    r = await send(g, m1, m2)
    assert r.status.code == C.OK
    assert [e.status.code for e in r.entries] == [C.OK, C.OK]
    assert [e.message_id for e in r.entries] == [m1.system_properties.message_id,
                                                 m2.system_properties.message_id]
    assert [e.transaction_id for e in r.entries] == ["", ""]
    recs = await wait_records(g, "N1", 2)
    assert len({rec.queue_id for rec in recs}) == 1  # one request, one queue
    by_body = {rec.body: rec for rec in recs}
    p1 = by_body[b"body-1"].properties
    assert p1["TAGS"] == "TagA" and p1["KEYS"] == "k1 k2" and p1["color"] == "red"
    assert p1["UNIQ_KEY"] == m1.system_properties.message_id
    assert by_body[b"body-1"].born_host == b"\x7f\x00\x00\x01"
    assert by_body[b"body-1"].born_timestamp == m1.system_properties.born_timestamp.seconds * 1000
    assert sorted(e.offset for e in r.entries) == sorted(rec.queue_offset for rec in recs)
    p2 = by_body[b"body-2"].properties
    assert "TAGS" not in p2 and "KEYS" not in p2
    # counted as messages in, as a Remoting send is (bytes as stored)
    assert g.broker.metrics is not None
    assert g.broker.metrics.messages_in[("N1", "normal")] == [2, sum(r.total_size for r in recs)]


async def test_one_request_is_one_store_call(g: GrpcEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    topic(g, "N2")
    store = g.broker.store
    calls = []
    real = store.put_messages

    def counting(msgs):  # type: ignore[no-untyped-def]
        calls.append(len(msgs))
        return real(msgs)

    monkeypatch.setattr(store, "put_messages", counting)
    r = await send(g, *[message("N2", b"x%d" % i) for i in range(10)])
    assert r.status.code == C.OK and len(r.entries) == 10
    assert calls == [10]


async def test_fifo_messages_of_a_group_go_to_one_queue(g: GrpcEnv) -> None:
    topic(g, "F1", queues=8, kind="FIFO")
    for i in range(6):
        r = await send(g, message("F1", b"a%d" % i, group="order-1"))
        assert r.status.code == C.OK
    r = await send(g, message("F1", b"b", group="order-2"))
    assert r.status.code == C.OK
    recs = await wait_records(g, "F1", 7)
    a = [rec for rec in recs if rec.body.startswith(b"a")]
    assert len({rec.queue_id for rec in a}) == 1
    assert [rec.body for rec in a] == [b"a%d" % i for i in range(6)]  # in order
    assert a[0].properties["__SHARDINGKEY"] == "order-1"


async def test_a_delay_message_is_readable_only_after_its_time(tmp_path: Path) -> None:
    async with grpc_world(tmp_path / "s", {"timerPrecisionMs": "100"}) as g:
        topic(g, "D1", queues=1)
        due = int(time.time() * 1000) + 1200
        r = await send(g, message("D1", b"later", deliver_ms=due))
        assert r.status.code == C.OK
        assert records(g, "D1") == []
        recs = await wait_records(g, "D1", 1, within=10)
        assert time.time() * 1000 >= due - 100
        assert [rec.body for rec in recs] == [b"later"]
        assert recs[0].properties["UNIQ_KEY"] == r.entries[0].message_id


async def test_an_unknown_topic_is_created_or_not_found(tmp_path: Path, g: GrpcEnv) -> None:
    r = await send(g, message("AUTO1"))
    assert r.status.code == C.OK and g.broker.topics.get("AUTO1") is not None
    async with grpc_world(tmp_path / "s", {"autoCreateTopicEnable": "false"}) as g2:
        r = await send(g2, message("NOPE"))
        assert r.status.code == C.TOPIC_NOT_FOUND and "NOPE" in r.status.message
        assert [e.status.code for e in r.entries] == [C.TOPIC_NOT_FOUND]


@pytest.mark.parametrize(("build", "code", "words"), [
    (lambda: message("E1", b""), C.MESSAGE_BODY_EMPTY, "empty"),
    (lambda: message("E1", b"x" * (256 << 10 | 1)), C.MESSAGE_BODY_TOO_LARGE, "max"),
    (lambda: message("E1", tag="a|b"), C.ILLEGAL_MESSAGE_TAG, "'|'"),
    (lambda: message("E1", tag="  "), C.ILLEGAL_MESSAGE_TAG, "whitespace"),
    (lambda: message("E1", keys=("ok", "bad\x01")), C.ILLEGAL_MESSAGE_KEY, "control"),
    (lambda: message("E1", props={"UNIQ_KEY": "x"}), C.ILLEGAL_MESSAGE_PROPERTY_KEY, "system"),
    (lambda: message("E1", props={"a\x02": "x"}), C.ILLEGAL_MESSAGE_PROPERTY_KEY, "control"),
    (lambda: message("E1", msg_id=""), C.ILLEGAL_MESSAGE_ID, "id"),
    (lambda: message("E1", deliver_ms=int(time.time() * 1000) + 10 * 86_400_000),
     C.ILLEGAL_DELIVERY_TIME, "timerMaxDelaySec"),
    (lambda: message("E1", deliver_ms=-5), C.ILLEGAL_DELIVERY_TIME, "delivery time"),
    (lambda: message("E1", kind=pb.MessageType.FIFO), C.ILLEGAL_MESSAGE_GROUP, "needs a message"),
    (lambda: message("E1", group="g1", kind=pb.MessageType.NORMAL),
     C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "says it is NORMAL"),
    (lambda: message("E1", group=" "), C.ILLEGAL_MESSAGE_GROUP, "blank"),
    (lambda: message("E1", group="g" * 64), C.ILLEGAL_MESSAGE_GROUP, "longer"),
    (lambda: message("NORMAL_ONLY", group="g1"), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
     "takes NORMAL"),
    (lambda: message("bad topic!"), C.ILLEGAL_TOPIC, "bad topic"),
    (lambda: message("RMQ_SYS_TRANS_HALF_TOPIC"), C.ILLEGAL_TOPIC, "system topic"),
    (lambda: message("rmq_sys_REVIVE_LOG_C"), C.ILLEGAL_TOPIC, "system topic"),
    (lambda: message("READ_ONLY"), C.FORBIDDEN, "forbidden"),
])
async def test_refusals(g: GrpcEnv, build, code, words) -> None:  # type: ignore[no-untyped-def]
    topic(g, "E1")
    topic(g, "NORMAL_ONLY", kind="NORMAL")
    topic(g, "READ_ONLY", perm=4)
    bad = build()
    r = await send(g, message("E1", b"good"), bad) if bad.topic.name == "E1" else await send(g, bad)
    assert r.status.code == code, r.status
    assert words in r.status.message
    assert all(e.status.code == code for e in r.entries)
    assert records(g, "E1") == []  # nothing of a refused request is stored


async def test_mixed_topics_and_empty_requests_are_corrupted(g: GrpcEnv) -> None:
    topic(g, "E1")
    topic(g, "E2")
    r = await send(g, message("E1"), message("E2"))
    assert r.status.code == C.MESSAGE_CORRUPTED and "one topic" in r.status.message
    r = await send(g)
    assert r.status.code == C.MESSAGE_CORRUPTED


async def test_sync_flush_answers_after_the_group_commit(tmp_path: Path) -> None:
    async with grpc_world(tmp_path / "s", flushDiskType="SYNC_FLUSH") as g:
        topic(g, "S1")
        r = await send(g, message("S1", b"durable"))
        assert r.status.code == C.OK
        recs = await wait_records(g, "S1", 1)
        assert g.broker.store.commitlog.flushed_offset >= recs[0].commit_log_offset


async def test_transaction_id_is_the_half_records_offset_id(g: GrpcEnv) -> None:
    topic(g, "X1")
    r = await send(g, message("X1", kind=pb.MessageType.TRANSACTION))
    assert r.status.code == C.OK
    _, _, offset = decode_message_id(r.entries[0].transaction_id)
    rec = g.broker.store.look_message(offset)
    assert rec is not None and rec.topic == "RMQ_SYS_TRANS_HALF_TOPIC"
    assert rec.properties["UNIQ_KEY"] == r.entries[0].message_id
    assert rec.properties["PGROUP"] == "X1" and rec.properties["REAL_TOPIC"] == "X1"
    assert records(g, "X1") == []  # not readable before its commit


async def test_a_flush_not_done_in_time_is_master_persistence_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with grpc_world(tmp_path / "s", flushDiskType="SYNC_FLUSH",
                          syncFlushTimeout="200") as g:
        topic(g, "S2")
        store = g.broker.store
        real = store.put_messages

        def never_flushed(msgs):  # type: ignore[no-untyped-def]
            put = real(msgs)
            return PutResult(put.results, Future())

        monkeypatch.setattr(store, "put_messages", never_flushed)
        r = await send(g, message("S2", b"slow"))
        assert r.status.code == C.MASTER_PERSISTENCE_TIMEOUT and "not flushed" in r.status.message
        e = r.entries[0]
        assert e.status.code == C.MASTER_PERSISTENCE_TIMEOUT and e.message_id  # stored all the same
        assert len(await wait_records(g, "S2", 1)) == 1
