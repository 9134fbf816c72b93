"""Dead letters on a real broker (not a test module): a consumer group with maxReconsumeTimes 0
fails each message once, so the broker moves them to ``%DLQ%{group}``. Shared by the resend-dlq
CLI test and the dashboard's tests."""

from __future__ import annotations

import asyncio

from brokerhelp import eventually
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.protocol.bodies import ConsumeFromWhere


async def make_dead_letters(ns: str, topic: str, group: str, bodies: list[bytes],
                            properties: dict[str, str] | None = None) -> None:
    """Send ``bodies`` to ``topic`` (tag ``T``, ``properties``), then let ``group`` fail each
    once: all end in ``%DLQ%{group}``."""
    failed: set[bytes] = set()

    def fail(msgs: list[MessageExt]) -> ConsumeStatus:
        failed.update(m.body for m in msgs)
        return ConsumeStatus.RECONSUME_LATER

    async with Producer(f"{group}-P", namesrv_addr=ns) as p:
        for body in bodies:
            await p.send(Message(topic, body, tags="T", properties=dict(properties or {})))
    c = PushConsumer(group, config=ClientConfig(namesrv_addr=ns, rebalance_interval=0.5,
                                                heartbeat_interval=1.0),
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                     max_reconsume_times=0)
    c.subscribe(topic, "*")
    c.register_listener(fail)
    await c.start()
    try:
        await eventually(lambda: len(failed) == len(set(bodies)), timeout=20)
        await asyncio.sleep(0.5)  # the last send-back's reply
    finally:
        await c.shutdown()
