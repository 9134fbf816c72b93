"""ReceiveMessage over gRPC on the broker's POP service: the stream's shape, long polling,
redelivery after the invisible time, FIFO groups, messages past their attempts, and every
refused request's code (each still ending with the delivery timestamp)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from consumehelp import (
    Clock,
    ack,
    fast_limits,
    make_topic,
    pop_world,
    put,
    receive,
    receive_req,
)
from grpchelp import GrpcEnv

from rocketlite.broker.subscriptions import SubscriptionGroupConfig
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.formats.message_record import SYSFLAG_COMPRESSED, decode_record
from rocketlite.proxy import consumer
from rocketlite.proxy.pb import definition_pb2 as dpb

C = dpb.Code


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_limits(monkeypatch)


@pytest.fixture
async def gp(tmp_path: Path) -> AsyncIterator[tuple[GrpcEnv, Clock]]:
    async with pop_world(tmp_path / "store") as env:
        make_topic(env[0].broker, "T", 2)
        yield env


async def test_receive_streams_status_messages_then_the_delivery_time_and_ack_hides_them(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    keys = put(g.broker, "T", [b"m0", b"m1"], queue_id=1, tags="A", color="red")
    before = time.time()
    st, msgs = await receive(g, receive_req("T"))
    assert st.code == C.OK
    assert [m.body for m in msgs] == [b"m0", b"m1"]
    assert [m.system_properties.message_id for m in msgs] == keys
    for i, m in enumerate(msgs):
        sp = m.system_properties
        assert m.topic.name == "T" and sp.tag == "A" and dict(m.user_properties) == {"color": "red"}
        assert sp.body_digest.type == dpb.DigestType.MD5
        assert sp.body_digest.checksum == hashlib.md5(m.body).hexdigest().upper()
        assert sp.receipt_handle and sp.delivery_attempt == 1
        assert (sp.queue_id, sp.queue_offset) == (1, i)
        assert sp.invisible_duration.ToMilliseconds() == 15_000
        assert sp.born_timestamp.ToMilliseconds() >= int(before * 1000) - 1000
    r = await ack(g, "T", [m.system_properties.receipt_handle for m in msgs])
    assert r.status.code == C.OK
    assert [e.status.code for e in r.entries] == [C.OK, C.OK]
    assert [e.message_id for e in r.entries] == ["m0", "m1"]
    st, msgs = await receive(g, receive_req("T", poll_ms=100))
    assert st.code == C.MESSAGE_NOT_FOUND and not msgs


async def test_an_empty_receive_answers_message_not_found_when_the_poll_ends(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    t0 = time.monotonic()
    st, msgs = await receive(g, receive_req("T", poll_ms=300))
    took = time.monotonic() - t0
    assert st.code == C.MESSAGE_NOT_FOUND and not msgs
    assert 0.25 < took < 2.5


async def test_a_message_arriving_during_the_poll_is_delivered_at_once(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    t0 = time.monotonic()
    task = asyncio.ensure_future(receive(g, receive_req("T", poll_ms=3_000)))
    await asyncio.sleep(0.2)
    assert not task.done()
    put(g.broker, "T", [b"late"], queue_id=1)
    st, msgs = await asyncio.wait_for(task, 2.5)
    assert time.monotonic() - t0 < 2.0
    assert st.code == C.OK and [m.body for m in msgs] == [b"late"]


async def test_a_poll_ends_before_the_clients_deadline(gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    t0 = time.monotonic()
    # the poll asked for 3 s gets the deadline less the reserve: answered, not DEADLINE_EXCEEDED
    st, _ = await receive(g, receive_req("T", poll_ms=3_000), deadline_s=1.0)
    assert st.code == C.MESSAGE_NOT_FOUND
    assert 0.6 < time.monotonic() - t0 < 1.0


async def test_an_unacked_message_comes_back_after_its_invisible_time_as_attempt_two(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, clock = gp
    put(g.broker, "T", [b"again"])
    st, [m] = await receive(g, receive_req("T", invisible_ms=1_000))
    assert m.system_properties.delivery_attempt == 1
    st, _msgs = await receive(g, receive_req("T", poll_ms=100))
    assert st.code == C.MESSAGE_NOT_FOUND  # invisible meanwhile
    clock.offset += 1_001
    assert await g.broker.pop.revive.round() == 1
    st, [m2] = await receive(g, receive_req("T"))
    assert m2.body == b"again" and m2.topic.name == "T"
    assert m2.system_properties.delivery_attempt == 2
    assert m2.system_properties.message_id == m.system_properties.message_id
    assert "RETRY_TOPIC" not in m2.user_properties
    assert (await ack(g, "T", [m2.system_properties.receipt_handle])).status.code == C.OK


async def test_a_message_past_the_groups_attempts_goes_to_the_dlq_instead(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, clock = gp
    put(g.broker, "T", [b"dead"])
    _, [_m] = await receive(g, receive_req("T", group="G1", invisible_ms=1_000))
    clock.offset += 1_001
    assert await g.broker.pop.revive.round() == 1  # back through the retry topic, attempt 2
    # the group now allows one attempt: the front forwards the revived message, not the client
    g.broker.subscriptions.update(SubscriptionGroupConfig(groupName="G1", retryMaxTimes=0))
    st, msgs = await receive(g, receive_req("T", group="G1", poll_ms=100))
    assert st.code == C.MESSAGE_NOT_FOUND and not msgs
    dlq = g.broker.store.get_message("%DLQ%G1", 0, 0, 8)
    assert dlq.count == 1 and b"dead" in dlq.body
    clock.offset += 20_000
    await g.broker.pop.revive.round()
    st, msgs = await receive(g, receive_req("T", group="G1", poll_ms=100))
    assert st.code == C.MESSAGE_NOT_FOUND  # it was acked when forwarded


async def test_a_fifo_group_gets_one_batch_per_queue_in_order(gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    g.broker.subscriptions.update(SubscriptionGroupConfig(groupName="F",
                                                          consumeMessageOrderly=True))
    put(g.broker, "T", [b"f%d" % i for i in range(5)], queue_id=0, __SHARDINGKEY="k")
    st, first = await receive(g, receive_req("T", group="F", batch=3))
    assert [m.body for m in first] == [b"f0", b"f1", b"f2"]
    assert all(m.system_properties.message_group == "k" for m in first)
    assert all(m.system_properties.message_type == dpb.MessageType.FIFO for m in first)
    st, blocked = await receive(g, receive_req("T", group="F", poll_ms=100))
    assert st.code == C.MESSAGE_NOT_FOUND and not blocked  # the queue waits for its batch
    r = await ack(g, "T", [m.system_properties.receipt_handle for m in first], group="F")
    assert r.status.code == C.OK
    st, rest = await receive(g, receive_req("T", group="F"))
    assert [m.body for m in rest] == [b"f3", b"f4"]


async def test_a_tag_filter_delivers_only_its_tags(gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    put(g.broker, "T", [b"a"], tags="A")
    put(g.broker, "T", [b"b"], tags="B")
    st, msgs = await receive(g, receive_req("T", tag="B"))
    assert st.code == C.OK and [m.body for m in msgs] == [b"b"]


@pytest.mark.parametrize(("kw", "code"), [
    ({"topic": "Nope"}, C.TOPIC_NOT_FOUND),
    ({"topic": ""}, C.ILLEGAL_TOPIC),
    ({"topic": "rmq_sys_REVIVE_LOG_DefaultCluster"}, C.ILLEGAL_TOPIC),
    ({"group": ""}, C.ILLEGAL_CONSUMER_GROUP),
    ({"group": "CID_RMQ_SYS_X"}, C.ILLEGAL_CONSUMER_GROUP),
    ({"batch": 0}, C.BAD_REQUEST),
    ({"batch": 33}, C.BAD_REQUEST),
    ({"invisible_ms": 50}, C.ILLEGAL_INVISIBLE_TIME),
    ({"invisible_ms": 3600_001}, C.ILLEGAL_INVISIBLE_TIME),
    ({"ftype": dpb.FilterType.SQL, "tag": "a > 1"}, C.ILLEGAL_FILTER_EXPRESSION),
])
async def test_bad_receives_get_their_code_and_a_reason(
        gp: tuple[GrpcEnv, Clock], kw: dict[str, object], code: int) -> None:
    g, _ = gp
    args: dict[str, object] = {"topic": "T", **kw}
    st, msgs = await receive(g, receive_req(**args))  # type: ignore[arg-type]
    assert st.code == code and st.message and not msgs


async def test_a_deadline_too_short_for_a_poll_is_an_illegal_polling_time(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    st, _ = await receive(g, receive_req("T"), deadline_s=0.05)
    assert st.code == C.ILLEGAL_POLLING_TIME and "deadline" in st.message


async def test_an_unknown_group_is_not_found_without_auto_creation(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    g.broker.subscriptions.auto_create = False
    st, _ = await receive(g, receive_req("T", group="Unknown"))
    assert st.code == C.CONSUMER_GROUP_NOT_FOUND and "Unknown" in st.message


async def test_too_many_held_receives_answer_too_many_requests(tmp_path: Path) -> None:
    async with pop_world(tmp_path / "store", popPollingSize="1") as (g, _):
        make_topic(g.broker, "T", 1)
        held = asyncio.ensure_future(receive(g, receive_req("T", poll_ms=2_000)))
        await asyncio.sleep(0.2)
        st, msgs = await receive(g, receive_req("T", poll_ms=2_000))
        assert st.code == C.TOO_MANY_REQUESTS and not msgs
        put(g.broker, "T", [b"x"])
        st, msgs = await asyncio.wait_for(held, 3)
        assert st.code == C.OK and [m.body for m in msgs] == [b"x"]


class _Ctx:
    """The few ServicerContext calls ReceiveMessage makes, for driving its stream by hand."""

    def time_remaining(self) -> float:
        return 5.0

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-mq-client-version", "5.1.2"),)


async def test_messages_not_sent_when_the_stream_breaks_are_visible_again_soon(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, clock = gp
    put(g.broker, "T", [b"s0", b"s1", b"s2"])
    stream = consumer.receive_message(g.front.ctx, receive_req("T", invisible_ms=60_000),
                                      _Ctx())  # type: ignore[arg-type]
    # status, s0, s1: asking for s1 tells the stream s0 was written; s1's write is the one
    # that fails when the client has gone
    first = [await anext(stream) for _ in range(3)]
    assert first[0].status.code == C.OK and first[1].message.body == b"s0"
    await stream.aclose()  # the client went away: s1 and s2 count as not sent
    clock.offset += 1_001  # past the 1 s NACK, far within the 60 s of s0
    assert await g.broker.pop.revive.round() == 2
    _st, msgs = await receive(g, receive_req("T"))
    assert sorted(m.body for m in msgs) == [b"s1", b"s2"]
    assert all(m.system_properties.delivery_attempt == 2 for m in msgs)


async def test_a_message_sent_by_a_4x_remoting_producer_is_received_whole(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    body = b"z" * 5000  # compressed by the 4.x producer (4 KiB and more), inflated for 5.x
    async with Producer("P4", namesrv_addr=f"127.0.0.1:{g.namesrv.port}") as p:
        sent = await p.send(Message("T", body, tags="TagR", keys=["k1", "k2"],
                                    properties={"color": "blue"}))
    stored = g.broker.store.get_message("T", sent.queue.queueId, sent.queue_offset, 1)
    assert decode_record(stored.body).sys_flag & SYSFLAG_COMPRESSED  # type: ignore[union-attr]
    st, [m] = await receive(g, receive_req("T"))
    sp = m.system_properties
    assert st.code == C.OK and m.body == body
    assert sp.body_digest.checksum == hashlib.md5(body).hexdigest().upper()
    assert sp.message_id == sent.msg_id
    assert (sp.tag, list(sp.keys)) == ("TagR", ["k1", "k2"])
    assert dict(m.user_properties) == {"color": "blue"}
    assert (sp.queue_id, sp.queue_offset) == (sent.queue.queueId, sent.queue_offset)
    assert (await ack(g, "T", [sp.receipt_handle])).status.code == C.OK
