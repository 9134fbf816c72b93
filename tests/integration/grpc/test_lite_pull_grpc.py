"""The lite-pull RPCs over gRPC: PullMessage streams status, messages and the next offset, holds
a pull at the queue's end until a message arrives; offsets are stored, read and looked up; each
bad request gets its v2 code."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time

import pytest
from consumehelp import collect, fast_limits, make_topic, ms, put, queue, resource
from google.protobuf.timestamp_pb2 import Timestamp
from grpchelp import GrpcEnv, client_metadata

from rocketlite.proxy.pb import definition_pb2 as dpb
from rocketlite.proxy.pb import service_pb2 as spb

MD = client_metadata()
C = dpb.Code


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_limits(monkeypatch)


def pull_req(topic: str, offset: int, queue_id: int = 0, batch: int = 32, group: str = "G",
             poll_ms: int | None = None, tag: str = "*",
             ftype: int = dpb.FilterType.TAG) -> spb.PullMessageRequest:
    r = spb.PullMessageRequest(group=resource(group), message_queue=queue(topic, queue_id),
                               offset=offset, batch_size=batch,
                               filter_expression=dpb.FilterExpression(type=ftype,  # type: ignore[arg-type]
                                                                      expression=tag))
    if poll_ms is not None:
        r.long_polling_timeout.CopyFrom(ms(poll_ms))
    return r


async def pull(g: GrpcEnv, req: spb.PullMessageRequest, deadline_s: float = 5
               ) -> tuple[dpb.Status, list[dpb.Message], int | None]:
    rs = await collect(g.stub.PullMessage(req, timeout=deadline_s, metadata=MD))
    assert rs[0].WhichOneof("content") == "status"
    messages = [r.message for r in rs if r.WhichOneof("content") == "message"]
    nexts = [r.next_offset for r in rs if r.WhichOneof("content") == "next_offset"]
    if nexts:
        assert rs[-1].WhichOneof("content") == "next_offset"
    return rs[0].status, messages, nexts[0] if nexts else None


async def test_pull_streams_status_messages_and_next_offset(g: GrpcEnv) -> None:
    make_topic(g.broker, "LP", 2)
    keys = put(g.broker, "LP", [b"m0", b"m1", b"m2"], queue_id=1, tags="A", color="red")
    st, msgs, nxt = await pull(g, pull_req("LP", 0, queue_id=1))
    assert st.code == C.OK
    assert [m.body for m in msgs] == [b"m0", b"m1", b"m2"]
    assert [m.system_properties.message_id for m in msgs] == keys
    assert [m.system_properties.queue_offset for m in msgs] == [0, 1, 2]
    assert all(m.system_properties.queue_id == 1 for m in msgs)
    assert msgs[0].system_properties.tag == "A"
    assert dict(msgs[0].user_properties) == {"color": "red"}
    assert msgs[1].system_properties.body_digest.checksum == hashlib.md5(b"m1").hexdigest().upper()
    assert msgs[0].system_properties.delivery_attempt == 1
    assert nxt == 3
    st, msgs, nxt = await pull(g, pull_req("LP", 1, queue_id=1, batch=1))
    assert [m.body for m in msgs] == [b"m1"] and nxt == 2


async def test_pull_at_the_end_answers_message_not_found_after_the_poll(g: GrpcEnv) -> None:
    make_topic(g.broker, "LP")
    put(g.broker, "LP", [b"m0"])
    t0 = time.monotonic()
    st, msgs, nxt = await pull(g, pull_req("LP", 1, poll_ms=300))
    took = time.monotonic() - t0
    assert st.code == C.MESSAGE_NOT_FOUND and not msgs and nxt == 1
    assert 0.25 < took < 2.5


async def test_a_message_arriving_during_the_poll_is_delivered_at_once(g: GrpcEnv) -> None:
    make_topic(g.broker, "LP")
    t0 = time.monotonic()
    task = asyncio.ensure_future(pull(g, pull_req("LP", 0, poll_ms=3000)))
    await asyncio.sleep(0.2)
    assert not task.done()
    put(g.broker, "LP", [b"late"])
    st, msgs, nxt = await asyncio.wait_for(task, 2)
    assert time.monotonic() - t0 < 1.5
    assert st.code == C.OK and [m.body for m in msgs] == [b"late"] and nxt == 1


async def test_the_tag_filter_skips_other_tags_and_moves_the_offset_on(g: GrpcEnv) -> None:
    make_topic(g.broker, "LP")
    put(g.broker, "LP", [b"a0", b"a1"], tags="A")
    put(g.broker, "LP", [b"b0"], tags="B")
    st, msgs, nxt = await pull(g, pull_req("LP", 0, tag="B"))
    assert st.code == C.OK and [m.body for m in msgs] == [b"b0"] and nxt == 3
    st, msgs, nxt = await pull(g, pull_req("LP", 0, tag="C", poll_ms=100))
    assert st.code == C.MESSAGE_NOT_FOUND and not msgs and nxt == 3


async def test_an_offset_past_the_end_is_illegal_and_corrected(g: GrpcEnv) -> None:
    make_topic(g.broker, "LP")
    put(g.broker, "LP", [b"m0", b"m1"])
    st, msgs, nxt = await pull(g, pull_req("LP", 50))
    # the store's correction, as RocketMQ's getMessage: the min offset while that is 0
    assert st.code == C.ILLEGAL_OFFSET and "50" in st.message and not msgs and nxt == 0


@pytest.mark.parametrize(("req", "code"), [
    (pull_req("Nope", 0), C.TOPIC_NOT_FOUND),
    (pull_req("", 0), C.ILLEGAL_TOPIC),
    (pull_req("LP", 0, group=""), C.ILLEGAL_CONSUMER_GROUP),
    (pull_req("LP", 0, group="bad group"), C.ILLEGAL_CONSUMER_GROUP),
    (pull_req("LP", 0, queue_id=9), C.BAD_REQUEST),
    (pull_req("LP", -1), C.ILLEGAL_OFFSET),
    (pull_req("LP", 0, batch=0), C.BAD_REQUEST),
    (pull_req("LP", 0, batch=33), C.BAD_REQUEST),
    (pull_req("LP", 0, tag="a > 1", ftype=dpb.FilterType.SQL), C.ILLEGAL_FILTER_EXPRESSION),
])
async def test_bad_pulls_get_their_code_and_a_reason(g: GrpcEnv, req: spb.PullMessageRequest,
                                                     code: int) -> None:
    make_topic(g.broker, "LP")
    st, msgs, nxt = await pull(g, req)
    assert st.code == code and st.message and not msgs and nxt is None


async def test_an_unknown_group_is_not_found_without_auto_creation(g: GrpcEnv) -> None:
    make_topic(g.broker, "LP")
    g.broker.subscriptions.auto_create = False
    st, _, _ = await pull(g, pull_req("LP", 0, group="Unknown"))
    assert st.code == C.CONSUMER_GROUP_NOT_FOUND and "Unknown" in st.message


async def test_offsets_are_updated_read_and_missing_ones_not_found(g: GrpcEnv) -> None:
    make_topic(g.broker, "LP", 2)
    put(g.broker, "LP", [b"m0", b"m1", b"m2"], queue_id=1)
    mq = queue("LP", 1)
    r = await g.stub.GetOffset(spb.GetOffsetRequest(group=resource("G"), message_queue=mq),
                               timeout=5, metadata=MD)
    assert r.status.code == C.OFFSET_NOT_FOUND and "G" in r.status.message
    u = await g.stub.UpdateOffset(spb.UpdateOffsetRequest(group=resource("G"), message_queue=mq,
                                                          offset=2), timeout=5, metadata=MD)
    assert u.status.code == C.OK
    assert g.broker.offsets.query("G", "LP", 1) == 2
    r = await g.stub.GetOffset(spb.GetOffsetRequest(group=resource("G"), message_queue=mq),
                               timeout=5, metadata=MD)
    assert r.status.code == C.OK and r.offset == 2
    for bad in (-1, 4):
        u = await g.stub.UpdateOffset(spb.UpdateOffsetRequest(
            group=resource("G"), message_queue=mq, offset=bad), timeout=5, metadata=MD)
        assert u.status.code == C.ILLEGAL_OFFSET
    assert g.broker.offsets.query("G", "LP", 1) == 2
    u = await g.stub.UpdateOffset(spb.UpdateOffsetRequest(
        group=resource("G"), message_queue=queue("Nope"), offset=0), timeout=5, metadata=MD)
    assert u.status.code == C.TOPIC_NOT_FOUND


async def test_query_offset_by_policy(g: GrpcEnv) -> None:
    make_topic(g.broker, "LP")
    put(g.broker, "LP", [b"m0", b"m1"])
    await asyncio.sleep(0.02)
    t = int(time.time() * 1000)
    await asyncio.sleep(0.02)
    put(g.broker, "LP", [b"m2"])

    async def query(policy: int, ts: int | None = None) -> spb.QueryOffsetResponse:
        req = spb.QueryOffsetRequest(message_queue=queue("LP"),
                                     query_offset_policy=policy)  # type: ignore[arg-type]
        if ts is not None:
            req.timestamp.CopyFrom(Timestamp(seconds=ts // 1000, nanos=ts % 1000 * 1_000_000))
        return await g.stub.QueryOffset(req, timeout=5, metadata=MD)

    assert (await query(dpb.QueryOffsetPolicy.BEGINNING)).offset == 0
    assert (await query(dpb.QueryOffsetPolicy.END)).offset == 3
    r = await query(dpb.QueryOffsetPolicy.TIMESTAMP, t)
    assert r.status.code == C.OK and r.offset == 2
    r = await query(dpb.QueryOffsetPolicy.TIMESTAMP)
    assert r.status.code == C.BAD_REQUEST and "timestamp" in r.status.message


async def test_an_unreadable_broker_or_topic_is_forbidden(g: GrpcEnv) -> None:
    make_topic(g.broker, "WO", perm=2)  # write only
    st, _, _ = await pull(g, pull_req("WO", 0))
    assert st.code == C.FORBIDDEN and "WO" in st.message
    make_topic(g.broker, "LP")
    g.broker.config = dataclasses.replace(g.broker.config, broker_permission=2)
    st, _, _ = await pull(g, pull_req("LP", 0))
    assert st.code == C.FORBIDDEN and "not readable" in st.message
