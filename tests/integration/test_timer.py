"""Timer messages end to end: the first-party Producer sends with ``deliver_time_ms``
(TIMER_DELIVER_MS), a PushConsumer receives; a broker in the test's loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from integration.client.clientconf import Cluster, eventually, open_cluster
from rocketlite.client.errors import MQBrokerError
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.protocol.bodies import ConsumeFromWhere
from rocketlite.protocol.codes import ResponseCode

pytestmark = pytest.mark.integration


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """The client tests' cluster (whose fixture lives in their folder)."""
    async with open_cluster(tmp_path) as c:
        yield c


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Sink:
    """Records each message with the time it arrived."""

    def __init__(self) -> None:
        self.got: list[tuple[int, MessageExt]] = []

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        t = now_ms()
        self.got += [(t, m) for m in msgs]
        return ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> list[bytes]:
        return sorted(m.body for _, m in self.got)


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


async def create_topic(p: Producer, topic: str) -> None:
    """A first plain message creates the topic, so the consumer has queues before timers come."""
    await p.send(Message(topic, b"warm-up"))


async def test_message_arrives_at_its_deliver_time(cluster: Cluster) -> None:
    sink = Sink()
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await create_topic(p, "TimerT1")
        c = await consumer(cluster, "TG1", "TimerT1", sink)
        try:
            await eventually(lambda: len(sink.got) == 1)
            deliver = now_ms() + 3000
            sent = await p.send(Message("TimerT1", b"later", deliver_time_ms=deliver))
            await eventually(lambda: len(sink.got) == 2, timeout=10)
        finally:
            await c.shutdown()
    arrived, m = sink.got[1]
    assert m.body == b"later" and m.msg_id == sent.msg_id
    assert deliver <= arrived <= deliver + 1000 + 500, arrived - deliver  # 1 s precision + slack
    assert m.properties["TIMER_DELIVER_MS"] == str(deliver)
    assert "REAL_TOPIC" not in m.properties and "TIMER_OUT_MS" in m.properties
    assert cluster.brokers["broker-a"].timer.stats.delivered == 1


async def test_delay_beyond_the_maximum_is_refused(cluster: Cluster) -> None:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        far = now_ms() + 4 * 86_400_000  # timerMaxDelaySec is 3 days
        with pytest.raises(MQBrokerError) as e:
            await p.send(Message("TimerT2", b"x", deliver_time_ms=far))
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert "max delay 259200000ms" in str(e.value)


async def test_a_time_in_the_past_is_delivered_now(cluster: Cluster) -> None:
    sink = Sink()
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await create_topic(p, "TimerT3")
        c = await consumer(cluster, "TG3", "TimerT3", sink)
        try:
            await eventually(lambda: len(sink.got) == 1)
            sent_at = now_ms()
            await p.send(Message("TimerT3", b"past", deliver_time_ms=sent_at - 60_000))
            await eventually(lambda: len(sink.got) == 2)
        finally:
            await c.shutdown()
    arrived, m = sink.got[1]
    assert m.body == b"past" and arrived - sent_at < 1000
    assert "TIMER_OUT_MS" not in m.properties  # never went through the wheel


async def test_many_messages_in_the_same_second(cluster: Cluster) -> None:
    sink = Sink()
    n = 400
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await create_topic(p, "TimerT4")
        c = await consumer(cluster, "TG4", "TimerT4", sink)
        try:
            await eventually(lambda: len(sink.got) == 1)
            second = (now_ms() // 1000 + 3) * 1000
            futs = [p.send_async(Message("TimerT4", b"%d" % i, deliver_time_ms=second + i % 1000))
                    for i in range(n)]
            await asyncio.gather(*futs)
            assert now_ms() < second, "sending took too long for this test"
            await eventually(lambda: len(sink.got) == n + 1, timeout=15)
        finally:
            await c.shutdown()
    timed = [(t, m) for t, m in sink.got if m.body != b"warm-up"]
    assert sorted(m.body for _, m in timed) == sorted(b"%d" % i for i in range(n))
    for arrived, m in timed:
        deliver = int(m.properties["TIMER_DELIVER_MS"])
        assert deliver <= arrived <= deliver + 1000 + 1000, (m.body, arrived - deliver)


async def test_clean_restart_delivers_pending_messages_once(cluster: Cluster) -> None:
    n = 30
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await create_topic(p, "TimerT5")
        base = now_ms() + 1500
        for i in range(n):
            await p.send(Message("TimerT5", b"%d" % i, deliver_time_ms=base + i * 100))
    await cluster.stop_broker("broker-a")  # everything still pending in the wheel
    await asyncio.sleep(max(0.0, (base + n * 100 - now_ms()) / 1000) + 0.5)  # due while down
    await cluster.start_broker("broker-a")
    sink = Sink()
    c = await consumer(cluster, "TG5", "TimerT5", sink)
    try:
        await eventually(lambda: len(sink.got) >= n + 1, timeout=15)
        await asyncio.sleep(1.5)  # nothing more comes
    finally:
        await c.shutdown()
    assert sink.bodies() == sorted([b"warm-up", *(b"%d" % i for i in range(n))])


async def test_a_broker_with_the_wheel_disabled_refuses_timer_messages(cluster: Cluster) -> None:
    await cluster.stop_broker("broker-a")
    broker = await cluster.start_broker("broker-a", timerWheelEnable="false")
    # after the transactional diverter (index 0: a prepared message is never timed)
    assert broker.diverters[1] == broker.timer.divert
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await p.send(Message("TimerT6", b"plain"))  # other messages are unaffected
        with pytest.raises(MQBrokerError) as e:
            await p.send(Message("TimerT6", b"x", deliver_time_ms=now_ms() + 5000))
    assert e.value.code == ResponseCode.SYSTEM_ERROR
    assert "timerWheelEnable is false" in str(e.value)
