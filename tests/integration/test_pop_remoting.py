"""POP_MESSAGE (200050), ACK_MESSAGE (200051) and CHANGE_MESSAGE_INVISIBLETIME (200053) over a
real socket: the reply headers a Remoting client builds its handles from, the body of raw records,
the answer codes of RocketMQ (SUCCESS, POLLING_TIMEOUT, NO_MESSAGE, SYSTEM_ERROR, TOPIC_NOT_EXIST,
SUBSCRIPTION_GROUP_NOT_EXIST; INVALID_PARAMETER for a malformed handle or header)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from brokerhelp import decode_records
from integration.test_broker import Env, eventually, running
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketlite.protocol.pop_info import ReceiptHandle
from storehelp import wait_dispatched

pytestmark = pytest.mark.integration

RC = ResponseCode


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with running(tmp_path / "store", {"reviveInterval": "60000"}) as e:
        e.broker.topics.update(TopicConfig(topicName="PT", readQueueNums=2, writeQueueNums=2))
        yield e


async def sent(env: Env, topic: str, body: bytes, queue_id: int) -> None:
    """Send one message and wait until it is readable (dispatch may be a round behind)."""
    assert (await env.send(topic, body, queue_id=queue_id)).code == RC.SUCCESS
    wait_dispatched(env.broker.store)


async def pop(env: Env, queue_id: int = -1, n: int = 32, poll_ms: int = 0, exp: str = "*",
              order: bool = False, group: str = "PG1", topic: str = "PT") -> RemotingCommand:
    h = PopMessageRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id, maxMsgNums=n,
                                invisibleTime=30_000, pollTime=poll_ms,
                                bornTime=int(time.time() * 1000), initMode=0, expType="TAG",
                                exp=exp, order=order)
    cmd = RemotingCommand.request(RequestCode.POP_MESSAGE, h.to_ext())
    return await env.client.invoke(env.addr, cmd, 5 + poll_ms / 1000)


def handle_of(reply: RemotingCommand, topic: str, queue_id: int, offset: int) -> str:
    """What MQClientAPIImpl.processPopResponse computes for a message from the reply headers."""
    h = PopMessageResponseHeader.from_ext(reply.ext_fields)
    assert h.startOffsetInfo is not None
    starts = {}
    for entry in h.startOffsetInfo.split(";"):
        retry, q, so = entry.split(" ")
        starts[(retry, int(q))] = int(so)
    retry = "1" if topic.startswith("%RETRY%") else "0"
    return ReceiptHandle(starts[(retry, queue_id)], h.popTime, h.invisibleTime, h.reviveQid,
                         int(retry), "broker-t", queue_id, offset).encode()


async def test_pop_ack_change_over_remoting(env: Env) -> None:
    for i in range(3):
        await sent(env, "PT", b"p%d" % i, i % 2)
    r = await pop(env)
    assert r.code == RC.SUCCESS, r.remark
    h = PopMessageResponseHeader.from_ext(r.ext_fields)
    assert h.invisibleTime == 30_000 and 0 <= h.reviveQid < 8 and h.restNum == 0
    recs = decode_records(r.body)
    assert sorted(x.body for x in recs) == [b"p0", b"p1", b"p2"]
    assert h.msgOffsetInfo is not None
    listed = {(int(e.split(" ")[1]), int(o)) for e in h.msgOffsetInfo.split(";")
              for o in e.split(" ")[2].split(",")}
    assert listed == {(x.queue_id, x.queue_offset) for x in recs}
    none = await pop(env)
    assert none.code == RC.POLLING_TIMEOUT and none.remark == "NO_MESSAGE_IN_QUEUE"
    first = recs[0]
    extra = handle_of(r, first.topic, first.queue_id, first.queue_offset)
    ack = AckMessageRequestHeader(consumerGroup="PG1", topic="PT", queueId=first.queue_id,
                                  extraInfo=extra, offset=first.queue_offset)
    a = await env.call(RequestCode.ACK_MESSAGE, ack.to_ext())
    assert a.code == RC.SUCCESS, a.remark
    second = recs[1]
    ch = ChangeInvisibleTimeRequestHeader(
        consumerGroup="PG1", topic="PT", queueId=second.queue_id,
        extraInfo=handle_of(r, second.topic, second.queue_id, second.queue_offset),
        offset=second.queue_offset, invisibleTime=60_000)
    c = await env.call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ch.to_ext())
    assert c.code == RC.SUCCESS, c.remark
    out = ChangeInvisibleTimeResponseHeader.from_ext(c.ext_fields)
    assert out.invisibleTime == 60_000 and out.popTime >= h.popTime
    # the old handle is acked by the change; the Remoting client's 7-field form works too
    seven = " ".join(handle_of(r, second.topic, second.queue_id, 0).split(" ")[:7])
    ch2 = ChangeInvisibleTimeRequestHeader(consumerGroup="PG1", topic="PT",
                                           queueId=second.queue_id, extraInfo=seven,
                                           offset=second.queue_offset, invisibleTime=1000)
    assert (await env.call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ch2.to_ext())).code == \
        RC.SUCCESS


async def test_answer_codes(env: Env) -> None:
    t0 = time.monotonic()
    r = await pop(env, poll_ms=200)
    assert r.code == RC.POLLING_TIMEOUT and time.monotonic() - t0 >= 0.19
    assert (await pop(env, topic="NoSuchTopic")).code == RC.TOPIC_NOT_EXIST
    assert (await pop(env, queue_id=7)).code == RC.SYSTEM_ERROR
    assert (await pop(env, n=100)).code == RC.SYSTEM_ERROR
    h = PopMessageRequestHeader(consumerGroup="PG1", topic="PT", queueId=-1, maxMsgNums=1,
                                invisibleTime=30_000, pollTime=0,
                                bornTime=int(time.time() * 1000) - 5000, initMode=0)
    late = await env.call(RequestCode.POP_MESSAGE, h.to_ext())
    assert late.code == RC.POLLING_TIMEOUT and "timeout too much" in (late.remark or "")
    outside = AckMessageRequestHeader(consumerGroup="PG1", topic="PT", queueId=0,
                                      extraInfo="0 1000 1000 0 0 broker-t 0 5", offset=5)
    a = await env.call(RequestCode.ACK_MESSAGE, outside.to_ext())
    assert a.code == RC.NO_MESSAGE and "offset is illegal" in (a.remark or "")
    bad = AckMessageRequestHeader(consumerGroup="PG1", topic="PT", queueId=0,
                                  extraInfo="garbage", offset=0)
    a = await env.call(RequestCode.ACK_MESSAGE, bad.to_ext())
    assert a.code == RC.INVALID_PARAMETER and "fields" in (a.remark or "")
    expired = AckMessageRequestHeader(consumerGroup="PG1", topic="PT", queueId=0,
                                      extraInfo="0 1000 1000 0 0 broker-t 0 0", offset=0)
    a = await env.call(RequestCode.ACK_MESSAGE, expired.to_ext())
    assert a.code == RC.NO_MESSAGE and "invisible time ended" in (a.remark or "")
    missing = await env.call(RequestCode.ACK_MESSAGE, {"consumerGroup": "PG1"})
    assert missing.code == RC.INVALID_PARAMETER and "missing" in (missing.remark or "")


async def test_unknown_group_over_remoting(tmp_path: Path) -> None:
    async with running(tmp_path / "s", {"autoCreateSubscriptionGroup": "false"}) as env:
        env.broker.topics.update(TopicConfig(topicName="PT", readQueueNums=1, writeQueueNums=1))
        assert (await pop(env)).code == RC.SUBSCRIPTION_GROUP_NOT_EXIST


async def test_orderly_pop_reports_order_counts(env: Env) -> None:
    for i in range(2):
        await sent(env, "PT", b"o%d" % i, 0)
    r = await pop(env, queue_id=0, order=True)
    assert r.code == RC.SUCCESS
    h = PopMessageResponseHeader.from_ext(r.ext_fields)
    assert h.reviveQid == 999 and h.orderCountInfo == "0 qo0%0 0;0 qo0%1 0"
    assert (await pop(env, queue_id=0, order=True)).code == RC.POLLING_TIMEOUT  # blocked


async def test_batch_ack(env: Env) -> None:
    for i in range(3):
        await sent(env, "PT", b"b%d" % i, 0)
    r = await pop(env, queue_id=0)
    h = PopMessageResponseHeader.from_ext(r.ext_fields)
    bits = base64.b64encode((0b101).to_bytes(1, "little")).decode()  # offsets 0 and 2
    body = {"brokerName": "broker-t", "acks": [{
        "c": "PG1", "t": "PT", "r": "0", "so": 0, "q": 0, "rq": h.reviveQid, "pt": h.popTime,
        "it": h.invisibleTime, "b": bits}]}
    a = await env.call(RequestCode.BATCH_ACK_MESSAGE, body=json.dumps(body).encode())
    assert a.code == RC.SUCCESS, a.remark
    svc = env.broker.pop
    # past the revive time and the default 1 s popAckTimeInterval
    svc.clock = lambda: h.popTime + h.invisibleTime + 2000  # type: ignore[method-assign]
    assert await svc.revive.round() == 1  # only offset 1 comes back
    bad = await env.call(RequestCode.BATCH_ACK_MESSAGE, body=b'{"acks": [{"c": "PG1"}]}')
    assert bad.code == RC.INVALID_PARAMETER and "lacks 't'" in (bad.remark or "")
    expired = dict(body["acks"][0], pt=1000)  # type: ignore[arg-type]
    e = await env.call(RequestCode.BATCH_ACK_MESSAGE,
                       body=json.dumps({"acks": [expired]}).encode())
    assert e.code == RC.NO_MESSAGE and "2 of the acks refused" in (e.remark or "")


async def test_ack_of_a_retry_message_names_the_retry_topic(env: Env) -> None:
    """The Java Remoting client acks with the real topic (``%RETRY%{group}_{topic}``)."""
    await sent(env, "PT", b"r0", 0)
    r = await pop(env, queue_id=0)
    h = PopMessageResponseHeader.from_ext(r.ext_fields)
    svc = env.broker.pop
    svc.clock = lambda: h.popTime + h.invisibleTime + 2000  # type: ignore[method-assign]
    assert await svc.revive.round() == 1
    again = await pop(env)
    [m] = decode_records(again.body)
    assert m.topic == "%RETRY%PG1_PT" and m.reconsume_times == 1
    ack = AckMessageRequestHeader(consumerGroup="PG1", topic=m.topic, queueId=m.queue_id,
                                  extraInfo=handle_of(again, m.topic, m.queue_id, m.queue_offset),
                                  offset=m.queue_offset)
    a = await env.call(RequestCode.ACK_MESSAGE, ack.to_ext())
    assert a.code == RC.SUCCESS, a.remark
    h2 = PopMessageResponseHeader.from_ext(again.ext_fields)
    svc.clock = lambda: h2.popTime + h2.invisibleTime + 2000  # type: ignore[method-assign]
    assert await svc.revive.round() == 0


async def test_held_pop_answers_when_a_message_arrives(env: Env) -> None:
    held = asyncio.ensure_future(pop(env, poll_ms=5000))
    await eventually(lambda: env.broker.pop.polling.count > 0)
    t0 = time.monotonic()
    assert (await env.send("PT", b"late", queue_id=1)).code == RC.SUCCESS
    r = await asyncio.wait_for(held, 5)
    assert r.code == RC.SUCCESS and time.monotonic() - t0 < 1.0
    assert [m.body for m in decode_records(r.body)] == [b"late"]
