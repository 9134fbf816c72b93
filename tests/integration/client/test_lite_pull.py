"""Lite pull consumers against a real broker on loopback: assign and subscribe modes, seeking,
committing, pausing and looking up offsets by time."""

from __future__ import annotations

import asyncio
import time

import pytest
from clientconf import Cluster, eventually

from rocketlite.client.errors import MQClientError
from rocketlite.client.instance import ClientConfig
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.protocol.bodies import ConsumeFromWhere, MessageQueue

pytestmark = pytest.mark.integration
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def fast(ns: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=ns, rebalance_interval=0.5, persist_offset_interval=0.5,
                        heartbeat_interval=1.0)


def lite(cluster: Cluster, group: str, **kw: object) -> LitePullConsumer:
    kw.setdefault("consume_from_where", FIRST)
    kw.setdefault("broker_suspend_max", 1.0)
    return LitePullConsumer(group, config=fast(cluster.ns_addr), **kw)  # type: ignore[arg-type]


async def produce(cluster: Cluster, topic: str, n: int, start: int = 0,
                  queue: MessageQueue | None = None) -> list[bytes]:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        for i in range(start, start + n):
            await p.send(Message(topic, b"m%d" % i), queue)
    return [b"m%d" % i for i in range(start, start + n)]


async def drain(c: LitePullConsumer, n: int, quiet: float = 0.5) -> list[MessageExt]:
    """Poll until ``n`` messages came, then check nothing more comes for ``quiet`` s."""
    got: list[MessageExt] = []
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        got += await c.poll(0.5)
    got += await c.poll(quiet)
    return got


def bodies(msgs: list[MessageExt]) -> list[bytes]:
    return sorted(m.body for m in msgs)


async def test_assign_poll_reads_exactly_what_was_sent(cluster: Cluster) -> None:
    sent = await produce(cluster, "LT1", 60)
    async with lite(cluster, "LG1", pull_batch_size=7) as c:
        queues = await c.fetch_queues("LT1")
        assert len(queues) == 4
        c.assign(queues)
        got = await drain(c, 60)
        assert bodies(got) == sorted(sent)
        assert all(len(b) <= 7 for b in [got[i:i + 7] for i in range(0, len(got), 7)])
        with pytest.raises(MQClientError):
            c.subscribe("LT1")


async def test_seek_and_seek_to_begin_read_again(cluster: Cluster) -> None:
    sent = await produce(cluster, "LT2", 40)
    async with lite(cluster, "LG2") as c:
        queues = await c.fetch_queues("LT2")
        c.assign(queues)
        first = await drain(c, 40)
        assert bodies(first) == sorted(sent)
        for mq in queues:
            await c.seek_to_begin(mq)
        assert bodies(await drain(c, 40)) == sorted(sent)
        mq = queues[0]
        in_q0 = sorted(m.queue_offset for m in first if m.queue_id == mq.queueId)
        await c.seek(mq, 2)
        again = await drain(c, len(in_q0) - 2)
        assert sorted(m.queue_offset for m in again) == in_q0[2:]
        assert {m.queue_id for m in again} == {mq.queueId}
        with pytest.raises(MQClientError):
            await c.seek(mq, 10_000)


async def test_seek_to_end_reads_only_new_messages(cluster: Cluster) -> None:
    await produce(cluster, "LT3", 30)
    async with lite(cluster, "LG3") as c:
        queues = await c.fetch_queues("LT3")
        c.assign(queues)
        for mq in queues:
            await c.seek_to_end(mq)
        await c.poll(0.3)  # whatever was buffered before the seek is gone
        new = await produce(cluster, "LT3", 12, start=100)
        assert bodies(await drain(c, 12)) == sorted(new)


async def test_subscribe_two_consumers_split_the_queues(cluster: Cluster) -> None:
    sent = await produce(cluster, "LT4", 80)
    c1, c2 = lite(cluster, "LG4"), lite(cluster, "LG4")
    c1.subscribe("LT4")
    c2.subscribe("LT4")
    with pytest.raises(MQClientError):
        c1.assign([MessageQueue("LT4", "broker-a", 0)])
    await c1.start()
    await c2.start()
    try:
        await eventually(lambda: len(c1.owned_queues()) == 2 and len(c2.owned_queues()) == 2)
        assert not set(c1.owned_queues()) & set(c2.owned_queues())
        assert all(not mq.topic.startswith("%RETRY%") for mq in c1.owned_queues())
        got: list[MessageExt] = []
        deadline = time.monotonic() + 10
        while len(got) < 80 and time.monotonic() < deadline:
            got += await c1.poll(0.2) + await c2.poll(0.2)
        got += await c1.poll(0.3) + await c2.poll(0.3)
    finally:
        await c1.shutdown()
        await c2.shutdown()
    assert bodies(got) == sorted(sent)
    # auto_commit: a new consumer of the group has nothing left to read
    async with lite(cluster, "LG4") as c3:
        c3.subscribe("LT4")
        more = await produce(cluster, "LT4", 8, start=500)
        assert bodies(await drain(c3, 8)) == sorted(more)


async def test_commit_then_new_consumer_starts_after_it(cluster: Cluster) -> None:
    sent = await produce(cluster, "LT5", 40)
    async with lite(cluster, "LG5", auto_commit=False) as c:
        queues = await c.fetch_queues("LT5")
        c.assign(queues)
        assert bodies(await drain(c, 40)) == sorted(sent)
        await c.commit_sync()
        ends = {mq: await c._api().max_offset(mq) for mq in queues}
        assert {mq: await c.committed(mq) for mq in queues} == ends
    more = await produce(cluster, "LT5", 10, start=100)
    async with lite(cluster, "LG5") as c2:
        c2.assign(await c2.fetch_queues("LT5"))
        assert bodies(await drain(c2, 10)) == sorted(more)


async def test_without_commit_a_new_consumer_reads_again(cluster: Cluster) -> None:
    sent = await produce(cluster, "LT6", 20)
    async with lite(cluster, "LG6", auto_commit=False) as c:
        c.assign(await c.fetch_queues("LT6"))
        assert bodies(await drain(c, 20)) == sorted(sent)
    async with lite(cluster, "LG6") as c2:
        c2.assign(await c2.fetch_queues("LT6"))
        assert bodies(await drain(c2, 20)) == sorted(sent)


async def test_pause_stops_a_queue(cluster: Cluster) -> None:
    await produce(cluster, "LT7", 1)  # creates the topic
    async with lite(cluster, "LG7") as c:
        queues = await c.fetch_queues("LT7")
        c.assign(queues)
        await drain(c, 1, quiet=0.2)
        q0, q1 = queues[0], queues[1]
        c.pause([q0])
        a = await produce(cluster, "LT7", 5, start=10, queue=q0)
        b = await produce(cluster, "LT7", 5, start=20, queue=q1)
        assert bodies(await drain(c, 5)) == sorted(b)
        c.resume([q0])
        assert bodies(await drain(c, 5)) == sorted(a)


async def test_offset_for_timestamp(cluster: Cluster) -> None:
    mq = MessageQueue("LT8", "broker-a", 1)
    await produce(cluster, "LT8", 1)  # creates the topic
    await produce(cluster, "LT8", 6, queue=mq)
    await asyncio.sleep(0.05)
    ts = int(time.time() * 1000)
    await asyncio.sleep(0.05)
    later = await produce(cluster, "LT8", 4, start=50, queue=mq)
    async with lite(cluster, "LG8") as c:
        c.assign([mq])
        offset = await c.offset_for_timestamp(mq, ts)
        await c.seek(mq, offset)
        assert bodies(await drain(c, 4)) == sorted(later)


async def test_a_full_buffer_pulls_again_once_polls_drain_it_to_half(cluster: Cluster) -> None:
    """Flow control: a queue whose buffer holds ``pull_threshold_for_queue`` messages stops
    pulling; a poll that takes it down to half the threshold lets the pull go on at once."""
    mq = MessageQueue("LTF", "broker-a", 2)
    created = await produce(cluster, "LTF", 1, start=99)  # creates the topic: any queue
    sent = await produce(cluster, "LTF", 30, queue=mq)
    async with lite(cluster, "LGF", pull_batch_size=5, pull_threshold_for_queue=10) as c:
        c.assign([mq])
        q = c._queues[mq]
        await eventually(lambda: len(q.buffer) == 10 and not q.room.is_set())
        first = await c.poll(1.0)
        assert len(first) == 5 and q.room.is_set()  # 5 left: half the threshold
        got = await drain(c, 25)
        assert [m.body for m in first + got if m.body not in created] == sent


async def test_a_reset_by_the_broker_repositions_a_subscribed_consumer(cluster: Cluster) -> None:
    """mqadmin resetOffsetByTime while the consumer runs: the broker's RESET_CONSUMER_CLIENT_OFFSET
    drops what it buffered and it polls again from the reset offsets; its commits then go on from
    there up to the end of each queue."""
    from rocketlite.admin import AdminSession, consumer_progress, reset_offset_by_time

    sent = await produce(cluster, "LTR", 20)
    async with lite(cluster, "LGR") as c:
        c.subscribe("LTR")
        assert bodies(await drain(c, 20)) == sorted(sent)
        await c.commit_sync()
        async with AdminSession(cluster.ns_addr) as s:
            reset = await reset_offset_by_time(s, "LGR", "LTR", 0)
            assert [(r.queue_id, r.offset) for r in reset] == [(q, 0) for q in range(4)]
            assert bodies(await drain(c, 20)) == sorted(sent)
            await c.commit_sync()
            (p,) = await consumer_progress(s, "LGR")
        assert len(p.queues) == 4 and p.diff_total == 0
        assert sum(q.consumer_offset for q in p.queues) == 20
