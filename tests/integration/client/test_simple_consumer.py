"""SimpleConsumer (POP over Remoting) against real brokers on loopback: receive and ack, redelivery
after the invisible time, changing it, batch acks, tag filters, two consumers sharing a group, two
brokers in turn, orderly pops, the broker's refusals as errors, and the sync wrapper."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from clientconf import Cluster, eventually

from rocketlite.client import MQBrokerError, MQClientError
from rocketlite.client.broker_api import BrokerApi
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer, SendResult
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.client.simple_consumer import PopMessage, SimpleConsumer
from rocketlite.client.sync import SyncSimpleConsumer
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.bodies import ConsumeFromWhere, MessageQueue
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.pop_info import POP_CK, ReceiptHandle

pytestmark = pytest.mark.integration

# revive scans every 100 ms and waits 100 ms for late acks: an unacked message of 1 s comes back
# within about 1.3 s
FAST = {"reviveInterval": "100", "popAckTimeInterval": "100"}
INVISIBLE = 1.0


@pytest.fixture
async def pc(tmp_path: Path) -> AsyncIterator[Cluster]:
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    c = Cluster(tmp_path, ns)
    try:
        await c.start_broker("broker-a", **FAST)
        yield c
    finally:
        await c.close()


def config(c: Cluster) -> ClientConfig:
    return ClientConfig(namesrv_addr=c.ns_addr, heartbeat_interval=1.0)


def simple(c: Cluster, group: str, subs: dict[str, str], **kw: object) -> SimpleConsumer:
    kw.setdefault("await_duration", 0.5)
    kw.setdefault("consume_from_where", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    return SimpleConsumer(group, config=config(c), subscriptions=subs, **kw)  # type: ignore[arg-type]


async def produce(c: Cluster, topic: str, bodies: list[bytes], tags: str | None = None,
                  queue: MessageQueue | None = None) -> list[SendResult]:
    async with Producer("SP", namesrv_addr=c.ns_addr) as p:
        if queue is not None:
            await p.publish_queues(topic)  # creates the topic
        return [await p.send(Message(topic, b, tags=tags, keys=[b.decode()]), queue)
                for b in bodies]


async def receive_n(sc: SimpleConsumer, n: int, invisible: float = INVISIBLE,
                    timeout: float = 10.0, batch: int = 16) -> list[PopMessage]:  # noqa: ASYNC109
    got: list[PopMessage] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += await sc.receive(batch, invisible)
    return got


async def quiet(sc: SimpleConsumer, seconds: float) -> list[PopMessage]:
    """Everything received during ``seconds`` (expected: nothing)."""
    got: list[PopMessage] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got += await sc.receive(16, 30)
    return got


async def test_receive_then_ack_is_not_redelivered_and_unacked_comes_back(pc: Cluster) -> None:
    sent = await produce(pc, "ST1", [b"m%d" % i for i in range(5)])
    async with simple(pc, "SG1", {"ST1": "*"}) as sc:
        got = await receive_n(sc, 5)
        assert sorted(m.body for m in got) == [b"m%d" % i for i in range(5)]
        assert {m.msg_id for m in got} == {r.msg_id for r in sent}
        for m in got:
            assert isinstance(m, PopMessage) and isinstance(m, MessageExt)
            assert m.topic == "ST1" and m.delivery_attempt == 1 and not m.fifo
            assert m.keys == [m.body.decode()]
            h = ReceiptHandle.parse(m.receipt_handle)
            assert (h.broker_name, h.queue_id, h.msg_queue_offset) == ("broker-a", m.queue_id,
                                                                       m.queue_offset)
            assert m.properties[POP_CK] == m.receipt_handle
            assert h.invisible_time == 1000 and m.invisible_until_ms == h.revive_time
        keep = next(m for m in got if m.body == b"m3")
        for m in got:
            if m is not keep:
                await sc.ack(m)
        back = await receive_n(sc, 1, invisible=30, timeout=5)
        assert [m.body for m in back] == [b"m3"]
        again = back[0]
        assert again.delivery_attempt == 2 and again.topic == "ST1"
        assert again.msg_id == keep.msg_id
        assert ReceiptHandle.parse(again.receipt_handle).retry == 1  # from the retry topic
        await sc.ack(again)
        assert await quiet(sc, 1.0 + INVISIBLE) == []


async def test_change_invisible_duration(pc: Cluster) -> None:
    await produce(pc, "ST2", [b"a", b"b"])
    async with simple(pc, "SG2", {"ST2": "*"}) as sc:
        got = await receive_n(sc, 2, invisible=30)
        assert len(got) == 2
        soon, late = sorted(got, key=lambda m: m.body)
        old = soon.receipt_handle
        await sc.change_invisible_duration(soon, dt.timedelta(milliseconds=300))
        assert soon.receipt_handle != old and soon.properties[POP_CK] == soon.receipt_handle
        assert soon.handle.invisible_time == 300
        back = await receive_n(sc, 1, invisible=30, timeout=5)
        assert [m.body for m in back] == [b"a"] and back[0].delivery_attempt == 2
        await sc.change_invisible_duration(late, 60)  # the new handle acks
        await sc.ack(late)
        await sc.ack(back[0])
        assert await quiet(sc, 1.0) == []


async def test_ack_many_with_one_batch_ack(pc: Cluster) -> None:
    await produce(pc, "ST3", [b"x%d" % i for i in range(20)])
    async with simple(pc, "SG3", {"ST3": "*"}) as sc:
        got = await receive_n(sc, 20, batch=32)
        assert len(got) == 20
        await sc.ack_many(list(got))
        await sc.ack_many([])
        assert await quiet(sc, 1.0 + INVISIBLE) == []


async def test_tag_filter(pc: Cluster) -> None:
    await produce(pc, "ST4", [b"a1", b"a2"], tags="TagA")
    await produce(pc, "ST4", [b"b1"], tags="TagB")
    await produce(pc, "ST4", [b"c1"], tags="TagC")
    async with simple(pc, "SG4", {"ST4": "TagA || TagC"}) as sc:
        got = await receive_n(sc, 3, invisible=30)
        got += await quiet(sc, 0.5)
        assert sorted(m.body for m in got) == [b"a1", b"a2", b"c1"]
        assert {m.tags for m in got} == {"TagA", "TagC"}
        await sc.ack_many(list(got))


async def test_two_topics_in_turn_and_one_batch_ack_for_both(pc: Cluster) -> None:
    await produce(pc, "ST13a", [b"a0", b"a1"])
    await produce(pc, "ST13b", [b"b0"])
    async with simple(pc, "SG13", {"ST13a": "*", "ST13b": "*"}) as sc:
        got = await receive_n(sc, 3, invisible=INVISIBLE)
        assert sorted((m.topic, m.body) for m in got) == [("ST13a", b"a0"), ("ST13a", b"a1"),
                                                           ("ST13b", b"b0")]
        await sc.ack_many(list(got))
        assert await quiet(sc, 1.0 + INVISIBLE) == []


async def test_two_consumers_of_a_group_share_without_duplicates(pc: Cluster) -> None:
    bodies = [b"s%d" % i for i in range(60)]
    await produce(pc, "ST5", bodies)
    seen: list[list[bytes]] = [[], []]

    async def run(i: int, sc: SimpleConsumer) -> None:
        deadline = time.monotonic() + 10
        while sum(map(len, seen)) < len(bodies) and time.monotonic() < deadline:
            msgs = await sc.receive(4, 30)
            seen[i] += [m.body for m in msgs]
            for m in msgs:
                await sc.ack(m)

    async with simple(pc, "SG5", {"ST5": "*"}) as a, simple(pc, "SG5", {"ST5": "*"}) as b:
        ids = await BrokerApi(a.instance).consumer_ids("SG5", "ST5")  # type: ignore[arg-type]
        assert sorted(ids) == sorted([a.instance.client_id, b.instance.client_id])  # type: ignore[union-attr]
        await asyncio.gather(run(0, a), run(1, b))
    assert sorted(seen[0] + seen[1]) == sorted(bodies)  # each once
    assert seen[0] and seen[1]


async def test_every_broker_of_the_route_in_turn(pc: Cluster) -> None:
    await pc.start_broker("broker-b", **FAST)
    async with Producer("SP", namesrv_addr=pc.ns_addr) as p:
        queues = await p.publish_queues("ST6")
        for name in ("broker-a", "broker-b"):
            mq = next(q for q in queues if q.brokerName == name)
            await p.send(Message("ST6", name.encode()), mq)
    async with simple(pc, "SG6", {"ST6": "*"}) as sc:
        got = await receive_n(sc, 2, invisible=30)
        assert sorted(m.body for m in got) == [b"broker-a", b"broker-b"]
        assert {m.broker_name for m in got} == {"broker-a", "broker-b"}
        for m in got:
            assert m.handle.broker_name == m.body.decode()
        await sc.ack_many(list(got))  # one batch ack per broker
        assert await quiet(sc, 1.0 + INVISIBLE) == []


async def test_fifo_pops_one_batch_in_flight(pc: Cluster) -> None:
    mq = MessageQueue("ST7", "broker-a", 0)
    await produce(pc, "ST7", [b"o%d" % i for i in range(6)], queue=mq)
    async with simple(pc, "SG7", {"ST7": "*"}, fifo=True) as sc:
        first = await sc.receive(3, 30)
        assert [m.body for m in first] == [b"o0", b"o1", b"o2"]
        assert all(m.fifo and m.handle.is_order for m in first)
        assert await sc.receive(3, 30) == []  # the queue waits for the batch's acks
        await sc.ack_many(list(first))
        second = await receive_n(sc, 3, invisible=0.5)
        assert [m.body for m in second] == [b"o3", b"o4", b"o5"]
        again = await receive_n(sc, 3, invisible=30, timeout=5)  # not acked: the same batch
        assert [m.body for m in again] == [b"o3", b"o4", b"o5"]
        assert [m.delivery_attempt for m in again] == [2, 2, 2]
        for m in again:
            await sc.ack(m)


async def test_fifo_receive_whose_answer_was_lost_gets_the_batch_again(pc: Cluster) -> None:
    mq = MessageQueue("ST11", "broker-a", 1)
    await produce(pc, "ST11", [b"f0", b"f1"], queue=mq)
    async with simple(pc, "SG11", {"ST11": "*"}, fifo=True) as sc:
        assert sc.api is not None
        real_pop = sc.api.pop
        ids: list[str | None] = []

        async def lost(*args: object, **kw: object) -> object:
            ids.append(kw.get("attempt_id"))  # type: ignore[arg-type]
            await real_pop(*args, **kw)  # type: ignore[arg-type]
            raise MQClientError("the answer was lost")

        sc.api.pop = lost  # type: ignore[method-assign]
        with pytest.raises(MQClientError, match="lost"):
            await sc.receive(2, 30)
        sc.api.pop = real_pop  # type: ignore[method-assign]
        got = await sc.receive(2, 30)  # the same attempt id: the batch, not a blocked queue
        assert [m.body for m in got] == [b"f0", b"f1"]
        assert [m.delivery_attempt for m in got] == [1, 1]
        assert ids[0] is not None and sc._attempts == {}
        await sc.change_invisible_duration(got[0], 60)  # an orderly handle changes too
        await sc.ack_many(list(got))
        assert await sc.receive(2, 30) == []


async def test_a_4x_push_group_and_a_pop_group_on_one_topic_each_get_everything(
        pc: Cluster) -> None:
    bodies = [b"mix%d" % i for i in range(12)]
    await produce(pc, "ST12", bodies)
    pushed: list[bytes] = []

    def handle(msgs: list[MessageExt]) -> ConsumeStatus:
        pushed.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    push = PushConsumer("PushG12", config=ClientConfig(namesrv_addr=pc.ns_addr,
                                                       rebalance_interval=0.5),
                        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    push.subscribe("ST12", "*")
    push.register_listener(handle)
    async with push, simple(pc, "PopG12", {"ST12": "*"}) as sc:
        popped = await receive_n(sc, len(bodies), invisible=30)
        await sc.ack_many(list(popped))
        await eventually(lambda: len(pushed) >= len(bodies))
    assert sorted(m.body for m in popped) == sorted(bodies)
    assert sorted(pushed) == sorted(bodies)


async def test_errors_carry_the_broker_s_reason(pc: Cluster) -> None:
    await produce(pc, "ST8", [b"e"])
    async with simple(pc, "SG8", {"ST8": "*"}) as sc:
        m = (await receive_n(sc, 1, invisible=0.3))[0]
        await asyncio.sleep(0.5)
        with pytest.raises(MQBrokerError) as e:
            await sc.ack(m)  # its invisible time is over
        assert e.value.code == ResponseCode.NO_MESSAGE and "invisible time ended" in e.value.remark
        with pytest.raises(MQBrokerError) as e:
            await sc.change_invisible_duration(m, 5)
        assert e.value.code == ResponseCode.NO_MESSAGE
        with pytest.raises(MQBrokerError) as e:
            await sc.ack_many([m])
        assert e.value.code == ResponseCode.NO_MESSAGE and "1 of the acks refused" in e.value.remark
        bad = (await receive_n(sc, 1, invisible=30))[0]
        h = bad.handle
        bad._set_handle(ReceiptHandle(h.ck_queue_offset, h.pop_time, h.invisible_time,
                                      h.revive_qid, h.retry, h.broker_name, 77,
                                      h.msg_queue_offset))
        with pytest.raises(MQBrokerError) as e:
            await sc.ack(bad)
        assert e.value.code == ResponseCode.INVALID_PARAMETER and "queueId[77]" in e.value.remark
        far = PopMessage.of(bad, ReceiptHandle(0, h.pop_time, h.invisible_time, h.revive_qid,
                                               0, "broker-a", 0, 10_000), "ST8", 0, h.pop_time)
        with pytest.raises(MQBrokerError) as e:  # past the bit set: an ACK_MESSAGE of its own
            await sc.ack_many([far])
        assert e.value.code == ResponseCode.NO_MESSAGE and "offset is illegal" in e.value.remark
        bad._set_handle(h)
        with pytest.raises(MQBrokerError) as e:
            await sc.ack_many([far, bad])  # bad's batch ack is sent, far's ack refused
        assert e.value.code == ResponseCode.NO_MESSAGE and "offset is illegal" in e.value.remark
        plain = MessageExt("ST8", b"", {}, 0, 0, 0, 0, 0, 0, 0, "", "", 0, 0, 0, "", "")
        with pytest.raises(MQClientError, match="without a receipt handle"):
            await sc.ack(plain)
        with pytest.raises(MQClientError, match="max_messages 33"):
            await sc.receive(33)
        with pytest.raises(MQClientError, match="invisible_duration"):
            await sc.receive(1, -1)
    async with simple(pc, "SG8", {"NoSuchTopic": "*"}) as sc:
        with pytest.raises(MQClientError, match="no route for topic 'NoSuchTopic'"):
            await sc.receive()
    with pytest.raises(MQClientError, match="not started"):
        await simple(pc, "SG8", {"ST8": "*"}).receive()


async def test_unknown_group_is_refused(tmp_path: Path) -> None:
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    c = Cluster(tmp_path, ns)
    try:
        await c.start_broker("broker-a", autoCreateSubscriptionGroup="false", **FAST)
        await produce(c, "ST9", [b"u"])
        async with simple(c, "NoSuchGroup", {"ST9": "*"}) as sc:
            with pytest.raises(MQBrokerError) as e:
                await sc.receive()
            assert e.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            assert "NoSuchGroup" in e.value.remark
    finally:
        await c.close()


async def test_sync_wrapper(pc: Cluster) -> None:
    await produce(pc, "ST10", [b"p0", b"p1", b"p2"])

    def work() -> tuple[list[bytes], list[PopMessage]]:
        with SyncSimpleConsumer("SG10", config=config(pc), subscriptions={"ST10": "*"},
                                await_duration=0.5,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
                                ) as sc:
            got: list[PopMessage] = []
            deadline = time.monotonic() + 10
            while len(got) < 3 and time.monotonic() < deadline:
                got += sc.receive(16, dt.timedelta(seconds=30))
            sc.ack(got[0])
            sc.change_invisible_duration(got[1], 30)
            sc.ack(got[1])
            sc.ack_many(got[2:])
            return sorted(m.body for m in got), sc.receive(16, 30)

    bodies, rest = await asyncio.to_thread(work)
    assert bodies == [b"p0", b"p1", b"p2"] and rest == []
