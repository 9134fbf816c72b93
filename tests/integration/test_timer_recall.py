"""Recall over Remoting (RECALL_MESSAGE, 370) against a broker in the test's loop: the first-party
Producer sends delayed messages, a raw Remoting request recalls one; the recalled message is
never delivered, also when the broker is restarted between the recall and the due time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from integration.client.clientconf import Cluster, eventually, open_cluster
from rocketlite.broker.broker import Broker
from rocketlite.broker.recall import RecallProcessor, recall_handle
from rocketlite.broker.timer_divert import slot_time_ms
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.formats.message_record import MessageRecord
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration

PRECISION = 100
TOPIC = "RecallT"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def start(cluster: Cluster) -> Broker:
    """broker-a with a fine timer precision, RECALL_MESSAGE registered."""
    broker = await cluster.start_broker("broker-a", timerPrecisionMs=str(PRECISION))
    RecallProcessor(broker).register()
    return broker


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with open_cluster(tmp_path) as c:
        await c.stop_broker("broker-a")
        await start(c)
        yield c


def topic_records(broker: Broker, topic: str) -> list[MessageRecord]:
    out = []
    for qid in range(16):
        cq = broker.store.find_queue(topic, qid)
        if cq is None:
            continue
        for phys, _size, _tag in cq.get_units(cq.min_offset, 10_000):
            rec = broker.store.look_message(phys)
            assert rec is not None
            out.append(rec)
    return out


async def recall(cluster: Cluster, topic: str, handle: str) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(cluster.addr(), RemotingCommand.request(
            RequestCode.RECALL_MESSAGE, {"topic": topic, "recallHandle": handle,
                                         "producerGroup": "PG"}), 5.0)
    finally:
        await client.close()


async def send_two(cluster: Cluster, due: int) -> tuple[str, str]:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        keep = await p.send(Message(TOPIC, b"keep", deliver_time_ms=due))
        gone = await p.send(Message(TOPIC, b"gone", deliver_time_ms=due))
    return keep.msg_id, recall_handle(TOPIC, "broker-a", slot_time_ms(due, PRECISION), gone.msg_id)


async def test_recall_over_remoting(cluster: Cluster) -> None:
    due = now_ms() + 2000
    keep, handle = await send_two(cluster, due)
    r = await recall(cluster, TOPIC, handle)
    assert r.code == ResponseCode.SUCCESS, r.remark
    gone = r.ext_fields["msgId"]
    assert gone != keep
    broker = cluster.brokers["broker-a"]
    await eventually(lambda: len(topic_records(broker, TOPIC)) >= 1, timeout=10)
    await asyncio.sleep(max(0.0, (due - now_ms()) / 1000) + 0.5)
    assert [rec.properties["UNIQ_KEY"] for rec in topic_records(broker, TOPIC)] == [keep]
    assert broker.timer.stats.recalled == 1


async def test_recall_survives_a_restart(cluster: Cluster) -> None:
    due = now_ms() + 2500
    keep, handle = await send_two(cluster, due)
    assert (await recall(cluster, TOPIC, handle)).code == ResponseCode.SUCCESS
    await cluster.stop_broker("broker-a")  # the marker and its message wait in the wheel
    await asyncio.sleep(max(0.0, (due - now_ms()) / 1000) + 0.3)  # due while down
    broker = await start(cluster)
    await eventually(lambda: len(topic_records(broker, TOPIC)) >= 1, timeout=10)
    await asyncio.sleep(1.0)  # the caught-up slot is done; nothing more comes
    assert [rec.properties["UNIQ_KEY"] for rec in topic_records(broker, TOPIC)] == [keep]


async def test_remoting_refusals(cluster: Cluster) -> None:
    due = now_ms() + 60_000
    _, handle = await send_two(cluster, due)
    r = await recall(cluster, TOPIC, "bad-handle!")
    assert r.code == ResponseCode.ILLEGAL_OPERATION and r.remark == "recall handle is invalid"
    r = await recall(cluster, "NoSuchTopic", handle)
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    client = RemotingClient()
    try:
        r = await client.invoke(cluster.addr(), RemotingCommand.request(
            RequestCode.RECALL_MESSAGE, {"topic": TOPIC}), 5.0)
    finally:
        await client.close()
    assert r.code == ResponseCode.SYSTEM_ERROR and "recallHandle" in (r.remark or "")
