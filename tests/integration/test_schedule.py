"""Delay levels end to end (S19): the first-party Producer sends with ``delay_level``, the broker
parks the message in SCHEDULE_TOPIC_XXXX and the schedule service delivers it to a PushConsumer
once the level's delay has passed. A short table (``messageDelayLevel=1s 2s 3s``) keeps it fast."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from integration.client.clientconf import Cluster, eventually, open_cluster
from rocketlite.broker.broker import Broker
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.formats.delay import SCHEDULE_TOPIC
from rocketlite.protocol.bodies import ConsumeFromWhere
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration

LEVELS = "1s 2s 3s"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """The client tests' cluster with a short delay level table."""
    async with open_cluster(tmp_path, messageDelayLevel=LEVELS) as c:
        yield c


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Sink:
    def __init__(self) -> None:
        self.got: list[tuple[int, MessageExt]] = []

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        t = now_ms()
        self.got += [(t, m) for m in msgs]
        return ConsumeStatus.CONSUME_SUCCESS


async def consumer(cluster: Cluster, group: str, topic: str, sink: Sink) -> PushConsumer:
    c = PushConsumer(group, config=ClientConfig(namesrv_addr=cluster.ns_addr,
                                                rebalance_interval=0.5,
                                                persist_offset_interval=0.5,
                                                heartbeat_interval=1.0),
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "*")
    c.register_listener(sink)
    await c.start()
    return c


def real_topic_count(broker: Broker, topic: str) -> int:
    return sum(cq.max_offset for q in range(8) if (cq := broker.store.find_queue(topic, q)))


async def test_each_level_delivers_within_its_window(cluster: Cluster) -> None:
    sink = Sink()
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await p.send(Message("DelayT1", b"warm-up"))
        c = await consumer(cluster, "DG1", "DelayT1", sink)
        try:
            await eventually(lambda: len(sink.got) == 1)
            sent: dict[bytes, tuple[int, str]] = {}
            for level in (1, 2, 3, 7):  # 7 is beyond the table: clamped to 3
                t = now_ms()
                r = await p.send(Message("DelayT1", b"L%d" % level, delay_level=level))
                sent[b"L%d" % level] = (t, r.msg_id)
            await eventually(lambda: len(sink.got) == 5, timeout=10)
        finally:
            await c.shutdown()
    for arrived, m in sink.got[1:]:
        t, msg_id = sent[m.body]
        delay = min(int(m.body[1:]), 3) * 1000
        assert m.msg_id == msg_id
        assert t + delay <= arrived <= t + delay + 1000, (m.body, arrived - t)
        assert "DELAY" not in m.properties and m.properties["REAL_TOPIC"] == "DelayT1"
    broker = cluster.brokers["broker-a"]
    assert broker.schedule.delivered == 4
    assert broker.store.find_queue(SCHEDULE_TOPIC, 2) is not None


async def test_restart_mid_delay_keeps_every_message(cluster: Cluster) -> None:
    n = 50
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await p.send(Message("DelayT2", b"warm-up"))
        for i in range(n):
            await p.send(Message("DelayT2", b"%d" % i, delay_level=1 + i % 3))
    broker = cluster.brokers["broker-a"]
    await eventually(lambda: broker.schedule.delivered > 0, timeout=5)
    await cluster.stop_broker("broker-a")  # mid-delay: level 1 delivered, 3 still waiting
    saved = json.loads((cluster.root / "broker-a/config/delayOffset.json").read_text())
    assert "1" in saved["offsetTable"]
    broker = await cluster.start_broker("broker-a")
    await eventually(lambda: real_topic_count(broker, "DelayT2") == n + 1, timeout=10)
    await asyncio.sleep(0.3)
    assert real_topic_count(broker, "DelayT2") == n + 1  # a clean restart repeats nothing

    client = RemotingClient()
    try:
        reply = await client.invoke(cluster.addr(), RemotingCommand.request(
            RequestCode.GET_ALL_DELAY_OFFSET, {}), 3.0)
    finally:
        await client.close()
    assert reply.code == ResponseCode.SUCCESS
    assert reply.body is not None
    table = json.loads(reply.body)["offsetTable"]
    assert sum(table.values()) == n
