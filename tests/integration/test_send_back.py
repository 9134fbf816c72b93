"""CONSUMER_SEND_MSG_BACK (36) end to end: a PushConsumer whose handler fails gets the message
again through ``%RETRY%{group}`` (delayed by the broker's schedule service), and one that always
fails sees it land in ``%DLQ%{group}``, readable by pull. Short delay levels (1s 2s 3s): a retry
waits 3 s."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from integration.client.clientconf import Cluster, eventually, open_cluster
from integration.test_schedule import LEVELS, real_topic_count
from rocketlite.admin import AdminSession, resend_dlq
from rocketlite.client.instance import ClientConfig
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.formats.delay import SCHEDULE_TOPIC
from rocketlite.formats.message_record import MessageRecord as RecordT
from rocketlite.formats.properties import decode_properties
from rocketlite.protocol.bodies import ConsumeFromWhere
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import ConsumerSendMsgBackRequestHeader
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with open_cluster(tmp_path, messageDelayLevel=LEVELS) as c:
        yield c


def fast(ns_addr: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=ns_addr, rebalance_interval=0.5, persist_offset_interval=0.5,
                        heartbeat_interval=1.0)


async def push(cluster: Cluster, group: str, topic: str, handler: object,
               max_reconsume_times: int | None = None) -> PushConsumer:
    c = PushConsumer(group, config=fast(cluster.ns_addr),
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                     max_reconsume_times=max_reconsume_times)
    c.subscribe(topic, "*")
    c.register_listener(handler)  # type: ignore[arg-type]
    await c.start()
    return c


async def test_failing_twice_is_consumed_three_times(cluster: Cluster) -> None:
    seen: list[MessageExt] = []

    def handler(msgs: list[MessageExt]) -> ConsumeStatus:
        seen.extend(msgs)
        return (ConsumeStatus.RECONSUME_LATER if len(seen) <= 2 else ConsumeStatus.CONSUME_SUCCESS)

    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        sent = await p.send(Message("BackT1", b"flaky"))
        c = await push(cluster, "BG1", "BackT1", handler)
        try:
            await eventually(lambda: len(seen) >= 3, timeout=15)
        finally:
            await c.shutdown()
    assert len(seen) == 3
    assert [m.reconsume_times for m in seen] == [0, 1, 2]
    assert all(m.msg_id == sent.msg_id and m.topic == "BackT1" for m in seen)
    assert seen[2].properties["ORIGIN_MESSAGE_ID"] == sent.msg_id
    broker = cluster.brokers["broker-a"]
    assert broker.send_back.sent_back == 2  # the broker took them: no client-side re-send
    assert broker.schedule.delivered == 2


async def test_always_failing_lands_in_the_dlq(cluster: Cluster) -> None:
    calls = Counter[str]()

    def handler(msgs: list[MessageExt]) -> ConsumeStatus:
        calls.update(m.msg_id for m in msgs)
        return ConsumeStatus.RECONSUME_LATER

    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        sent = await p.send(Message("BackT2", b"poison", tags="T"))
        c = await push(cluster, "BG2", "BackT2", handler, max_reconsume_times=1)
        broker = cluster.brokers["broker-a"]
        try:
            await eventually(lambda: broker.send_back.dead == 1, timeout=15)
        finally:
            await c.shutdown()
    assert calls[sent.msg_id] == 2  # first try + one retry
    tc = broker.topics.get("%DLQ%BG2")
    assert tc is not None and tc.readQueueNums == 1 and tc.perm & 0x4  # readable (see send_back)

    reader = LitePullConsumer("DLQ-reader", config=fast(cluster.ns_addr),
                              consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    reader.subscribe("%DLQ%BG2")
    await reader.start()
    try:
        got: list[MessageExt] = []
        for _ in range(20):
            got += await reader.poll(0.5)
            if got:
                break
    finally:
        await reader.shutdown()
    assert len(got) == 1
    m = got[0]
    assert m.body == b"poison" and m.msg_id == sent.msg_id and m.reconsume_times == 2
    assert m.properties["RETRY_TOPIC"] == "BackT2" and "DELAY" not in m.properties


async def test_unknown_group_and_bad_offset(cluster: Cluster) -> None:
    broker = cluster.brokers["broker-a"]
    broker.subscriptions.auto_create = False
    client = RemotingClient()
    try:
        def req(group: str, offset: int) -> RemotingCommand:
            h = ConsumerSendMsgBackRequestHeader(offset=offset, group=group, delayLevel=0)
            return RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, dict(h.to_ext()))
        r = await client.invoke(cluster.addr(), req("NoSuchGroup", 0), 3.0)
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        broker.subscriptions.auto_create = True
        r = await client.invoke(cluster.addr(), req("G", 1 << 40), 3.0)
        assert r.code == ResponseCode.SYSTEM_ERROR and "look message by offset failed" in (r.remark or "")
    finally:
        await client.close()


async def test_resend_dlq_sends_dead_letters_to_their_topic(cluster: Cluster) -> None:
    def handler(msgs: list[MessageExt]) -> ConsumeStatus:
        return ConsumeStatus.RECONSUME_LATER

    broker = cluster.brokers["broker-a"]
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        for i in range(3):
            await p.send(Message("BackT3", b"dead-%d" % i, tags="T", keys=[f"k{i}"],
                                 properties={"app": "x"}))
        c = await push(cluster, "BG3", "BackT3", handler, max_reconsume_times=0)
        try:
            await eventually(lambda: broker.send_back.dead == 3, timeout=10)
        finally:
            await c.shutdown()
    assert real_topic_count(broker, "BackT3") == 3
    async with AdminSession(cluster.ns_addr) as s:
        counts = await resend_dlq(s, "BG3", max_messages=2, idle_s=2.0)
    assert (counts.read, counts.resent, counts.skipped, counts.failed) == (2, 2, 0, 0)
    async with AdminSession(cluster.ns_addr) as s:
        counts = await resend_dlq(s, "BG3", idle_s=1.0)
    assert (counts.read, counts.resent) == (1, 1)  # only what the first run left
    assert real_topic_count(broker, "BackT3") == 6
    seen: list[MessageExt] = []
    c = await push(cluster, "BG3-check", "BackT3", lambda ms: seen.extend(ms))
    try:
        await eventually(lambda: len(seen) == 6)
    finally:
        await c.shutdown()
    assert sorted(m.body for m in seen) == sorted([b"dead-0", b"dead-1", b"dead-2"] * 2)
    assert all(m.tags == "T" and m.properties.get("app") == "x" for m in seen)


async def test_send_back_rules(cluster: Cluster) -> None:
    """The header's delay level (0 → 3 + reconsumeTimes, clamped to the table), a retry of a
    retry keeping RETRY_TOPIC and ORIGIN_MESSAGE_ID, the DLQ for delayLevel < 0 and past
    maxReconsumeTimes, never delayed."""
    broker = cluster.brokers["broker-a"]
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        sent = await p.send(Message("BackT4", b"body", tags="T", keys=["k"]))
    cq = broker.store.find_queue("BackT4", sent.queue.queueId)
    assert cq is not None
    [(phys, _, _)] = cq.get_units(sent.queue_offset, 1)

    client = RemotingClient()

    async def back(offset: int, level: int, max_times: int | None = None) -> RecordT:
        h = ConsumerSendMsgBackRequestHeader(offset=offset, group="BG4", delayLevel=level,
                                             originMsgId="ORIGIN", originTopic="BackT4",
                                             maxReconsumeTimes=max_times)
        before = broker.store.commitlog.max_offset
        r = await client.invoke(cluster.addr(), RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK, dict(h.to_ext())), 3.0)
        assert r.code == ResponseCode.SUCCESS, r.remark
        rec = broker.store.look_message(before)  # the record it just wrote
        assert rec is not None
        return rec

    try:
        first = await back(phys, 0)
        p1 = decode_properties(first.properties_text)
        assert (first.topic, first.queue_id, first.reconsume_times) == (SCHEDULE_TOPIC, 2, 1)
        assert p1["DELAY"] == "3"  # 3 + 0
        assert p1["REAL_TOPIC"] == "%RETRY%BG4" and p1["RETRY_TOPIC"] == "BackT4"
        assert p1["ORIGIN_MESSAGE_ID"] == "ORIGIN" and p1["UNIQ_KEY"] == sent.msg_id
        assert p1["TAGS"] == "T" and p1["KEYS"] == "k"
        tc = broker.topics.get("%RETRY%BG4")
        assert tc is not None and tc.perm == 6

        again = await back(first.commit_log_offset, 0)  # reconsumeTimes 1: 3 + 1, clamped to 3
        p2 = decode_properties(again.properties_text)
        assert again.reconsume_times == 2 and p2["DELAY"] == "3"
        assert p2["RETRY_TOPIC"] == "BackT4" and p2["ORIGIN_MESSAGE_ID"] == "ORIGIN"

        level1 = await back(phys, 1)
        assert (level1.queue_id, decode_properties(level1.properties_text)["DELAY"]) == (0, "1")

        dead = await back(phys, -1)
        assert (dead.topic, dead.reconsume_times) == ("%DLQ%BG4", 1)
        assert "DELAY" not in decode_properties(dead.properties_text)

        dead2 = await back(first.commit_log_offset, 0, max_times=1)  # 1 >= 1
        assert dead2.topic == "%DLQ%BG4" and dead2.reconsume_times == 2
        tc = broker.topics.get("%DLQ%BG4")
        assert tc is not None and tc.perm == 6 and tc.readQueueNums == 1
        assert (broker.send_back.sent_back, broker.send_back.dead) == (3, 2)
    finally:
        await client.close()
