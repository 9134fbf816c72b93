"""Push consumers against a real broker on loopback: concurrent and orderly, clustering and
broadcasting, where they start, tag filters, retries, restarts and groups of several."""

from __future__ import annotations

import asyncio
import collections
import itertools
from pathlib import Path

import pytest
from clientconf import Cluster, eventually

from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, OrderlyStatus, PushConsumer
from rocketlite.protocol.bodies import ConsumeFromWhere, MessageModel

pytestmark = pytest.mark.integration
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def fast(ns: str, **kw: float) -> ClientConfig:
    return ClientConfig(namesrv_addr=ns, rebalance_interval=kw.get("rebalance", 0.5),
                        persist_offset_interval=0.5, heartbeat_interval=1.0)


async def produce(cluster: Cluster, topic: str, n: int, start: int = 0,
                  tags: str | None = None) -> list[bytes]:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        futs = [p.send_async(Message(topic, b"m%d" % i, tags=tags, keys=f"k{i}"))
                for i in range(start, start + n)]
        await asyncio.gather(*futs)
    return [b"m%d" % i for i in range(start, start + n)]


class Sink:
    def __init__(self) -> None:
        self.msgs: list[MessageExt] = []

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        self.msgs += msgs
        return ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> list[bytes]:
        return sorted(m.body for m in self.msgs)


def consumer(cluster: Cluster, group: str, topic: str, sink: object, expression: str = "*",
             **kw: object) -> PushConsumer:
    kw.setdefault("consume_from_where", FIRST)
    c = PushConsumer(group, config=fast(cluster.ns_addr), **kw)  # type: ignore[arg-type]
    c.subscribe(topic, expression)
    c.register_listener(sink)  # type: ignore[arg-type]
    return c


async def test_concurrent_consumer_gets_exactly_what_was_sent(cluster: Cluster) -> None:
    sent = await produce(cluster, "PT1", 300)
    sink = Sink()
    c = consumer(cluster, "G1", "PT1", sink)
    await c.start()
    try:
        await eventually(lambda: len(sink.msgs) >= 300)
        await asyncio.sleep(0.2)
    finally:
        await c.shutdown()
    assert sink.bodies() == sorted(sent)
    assert {m.keys[0] for m in sink.msgs} == {f"k{i}" for i in range(300)}
    # the committed offsets are the queue ends: a restart starts after everything
    sink2 = Sink()
    c2 = consumer(cluster, "G1", "PT1", sink2)
    await c2.start()
    try:
        more = await produce(cluster, "PT1", 20, start=1000)
        await eventually(lambda: len(sink2.msgs) >= 20)
        await asyncio.sleep(0.3)
    finally:
        await c2.shutdown()
    assert sink2.bodies() == sorted(more)


async def test_new_group_from_last_offset_skips_the_backlog(cluster: Cluster) -> None:
    await produce(cluster, "PT2", 50)
    sink = Sink()
    c = consumer(cluster, "G2", "PT2", sink, consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
    await c.start()
    try:
        await eventually(lambda: len([q for q in c.queues if q.topic == "PT2"]) == 4)
        new = await produce(cluster, "PT2", 10, start=500)
        await eventually(lambda: len(sink.msgs) >= 10)
        await asyncio.sleep(0.2)
    finally:
        await c.shutdown()
    assert sink.bodies() == sorted(new)


async def test_tag_expression_filters(cluster: Cluster) -> None:
    a = await produce(cluster, "PT3", 20, tags="TagA")
    await produce(cluster, "PT3", 20, start=100, tags="TagC")
    b = await produce(cluster, "PT3", 20, start=200, tags="TagB")
    sink = Sink()
    c = consumer(cluster, "G3", "PT3", sink, "TagA || TagB")
    await c.start()
    try:
        await eventually(lambda: len(sink.msgs) >= 40)
        await asyncio.sleep(0.3)
    finally:
        await c.shutdown()
    assert sink.bodies() == sorted(a + b)


async def test_two_and_three_consumers_split_the_queues(cluster: Cluster) -> None:
    sent = await produce(cluster, "PT4", 400)
    sinks = [Sink() for _ in range(3)]
    cs = [consumer(cluster, "G4", "PT4", s) for s in sinks]
    await cs[0].start()
    await cs[1].start()
    try:
        await eventually(lambda: all(c.queues for c in cs[:2])
                         and not set(cs[0].queues) & set(cs[1].queues)
                         and len(cs[0].queues) + len(cs[1].queues) == 5)  # 4 queues + 1 retry queue
        await cs[2].start()
        more = await produce(cluster, "PT4", 200, start=1000)
        await eventually(lambda: sum(len(s.msgs) for s in sinks) >= 600)
        await asyncio.sleep(0.5)
    finally:
        for c in cs:
            await c.shutdown()
    got = [m.body for s in sinks for m in s.msgs]
    assert sorted(set(got)) == sorted(sent + more)  # nothing lost
    assert len(got) - len(set(got)) <= 50  # at-least-once: a handover may repeat a few


async def test_failed_messages_come_back_until_they_succeed(cluster: Cluster) -> None:
    await produce(cluster, "PT5", 3)
    attempts: collections.Counter[bytes] = collections.Counter()
    times: dict[bytes, list[int]] = collections.defaultdict(list)
    topics: set[str] = set()

    def flaky(msgs: list[MessageExt]) -> ConsumeStatus:
        for m in msgs:
            attempts[m.body] += 1
            times[m.body].append(m.reconsume_times)
            topics.add(m.topic)
        return ConsumeStatus.RECONSUME_LATER if attempts[msgs[0].body] < 3 else ConsumeStatus.CONSUME_SUCCESS

    c = consumer(cluster, "G5", "PT5", flaky)
    await c.start()
    try:
        await eventually(lambda: len(attempts) == 3 and all(v >= 3 for v in attempts.values()), 20)
        await asyncio.sleep(0.5)
    finally:
        await c.shutdown()
    assert all(v == 3 for v in attempts.values()), attempts
    assert all(t == [0, 1, 2] for t in times.values()), times
    assert topics == {"PT5"}  # retried copies are handed over under their original topic


async def test_orderly_consumer_sees_increasing_offsets_per_queue(cluster: Cluster) -> None:
    await produce(cluster, "PT6", 200)
    seen: dict[int, list[int]] = collections.defaultdict(list)
    failed_once: set[int] = set()

    def handler(msgs: list[MessageExt]) -> OrderlyStatus:
        m = msgs[0]
        if m.queue_offset == 5 and m.queue_id not in failed_once:
            failed_once.add(m.queue_id)
            return OrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        seen[m.queue_id].append(m.queue_offset)
        return OrderlyStatus.SUCCESS

    c = consumer(cluster, "G6", "PT6", handler, orderly=True, suspend_current_queue_time=0.05)
    await c.start()
    try:
        await eventually(lambda: sum(len(v) for v in seen.values()) >= 200, 20)
    finally:
        await c.shutdown()
    for offsets in seen.values():
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        assert offsets == list(range(len(offsets)))
    assert failed_once == set(seen)


async def test_orderly_offsets_stay_increasing_while_a_second_consumer_joins(cluster: Cluster) -> None:
    """A queue handed over to a joining consumer moves under the broker's lock: each consumer
    sees every queue's offsets strictly increasing, one consumer at a time per queue, and
    together they see everything (a handover may repeat what was not yet committed)."""
    sent = await produce(cluster, "PT6B", 400)
    seen: list[dict[int, list[int]]] = [collections.defaultdict(list), collections.defaultdict(list)]
    busy: dict[int, int] = {}  # queue id -> consumer index now inside the handler for it
    overlaps: list[int] = []
    bodies: set[bytes] = set()

    def handler_for(i: int) -> object:
        async def handler(msgs: list[MessageExt]) -> OrderlyStatus:
            m = msgs[0]
            if busy.setdefault(m.queue_id, i) != i:
                overlaps.append(m.queue_id)
            await asyncio.sleep(0.004)  # slow enough that the join lands mid-stream
            del busy[m.queue_id]
            seen[i][m.queue_id].append(m.queue_offset)
            bodies.add(m.body)
            return OrderlyStatus.SUCCESS
        return handler

    cs = [consumer(cluster, "G6B", "PT6B", handler_for(i), orderly=True) for i in range(2)]
    await cs[0].start()
    try:
        await eventually(lambda: sum(map(len, seen[0].values())) >= 40, 20)
        await cs[1].start()
        await eventually(lambda: len(bodies) == 400, 30)
    finally:
        for c in cs:
            await c.shutdown()
    assert sorted(bodies) == sorted(sent)
    assert seen[1], "the second consumer took no queue"
    for per_queue in seen:
        for offsets in per_queue.values():
            assert all(a < b for a, b in itertools.pairwise(offsets)), offsets
    assert not overlaps, f"two consumers inside one queue at once: {overlaps}"


async def test_broadcasting_gives_every_consumer_everything(cluster: Cluster, tmp_path: Path) -> None:
    sent = await produce(cluster, "PT7", 40)
    sinks = [Sink(), Sink()]
    cs = [consumer(cluster, "G7", "PT7", s, message_model=MessageModel.BROADCASTING,
                   offset_store_dir=tmp_path / f"o{i}") for i, s in enumerate(sinks)]
    for c in cs:
        await c.start()
    try:
        await eventually(lambda: all(len(s.msgs) >= 40 for s in sinks))
        await asyncio.sleep(0.2)
    finally:
        for c in cs:
            await c.shutdown()
    assert all(s.bodies() == sorted(sent) for s in sinks)
    assert all(list((tmp_path / f"o{i}").rglob("offsets.json")) for i in range(2))


@pytest.mark.parametrize("mode", ["orderly", "broadcasting"])
async def test_a_reset_by_the_broker_replays_from_the_reset_offsets(
        cluster: Cluster, tmp_path: Path, mode: str) -> None:
    """mqadmin resetOffsetByTime to 0 while the consumer runs (RESET_CONSUMER_CLIENT_OFFSET):
    an orderly consumer (its queues unlocked and locked again) and a broadcasting one (offsets in
    its local file) both get everything again, each queue in offset order."""
    from rocketlite.admin import AdminSession, reset_offset_by_time

    sent = await produce(cluster, "PTR", 40)
    seen: dict[int, list[int]] = collections.defaultdict(list)
    sink = Sink()

    def handler(msgs: list[MessageExt]) -> ConsumeStatus:
        seen[msgs[0].queue_id] += [m.queue_offset for m in msgs]
        return sink(msgs)

    kw: dict[str, object] = ({"orderly": True} if mode == "orderly" else
                             {"message_model": MessageModel.BROADCASTING,
                              "offset_store_dir": tmp_path / "offsets"})
    c = consumer(cluster, "GR", "PTR", handler, **kw)
    await c.start()
    try:
        await eventually(lambda: len(sink.msgs) >= 40)
        async with AdminSession(cluster.ns_addr) as s:
            reset = await reset_offset_by_time(s, "GR", "PTR", 0)
        assert [r.offset for r in reset] == [0] * 4
        await eventually(lambda: len(sink.msgs) >= 80)
        await asyncio.sleep(0.2)
    finally:
        await c.shutdown()
    assert sink.bodies() == sorted(sent + sent)
    for offsets in seen.values():  # per queue: 0..k, then 0..k again
        k = len(offsets) // 2
        assert offsets == list(range(k)) * 2
