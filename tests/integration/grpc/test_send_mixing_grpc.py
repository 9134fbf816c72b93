"""4.x and 5.x clients on one topic: messages a 5.x client sends over gRPC and a 4.x producer
sends over Remoting are read alike by a 4.x consumer (body, tag, keys, properties, message id)."""

from __future__ import annotations

import time

from grpchelp import GrpcEnv
from sendhelp import message, send

from rocketlite.client.instance import ClientConfig
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.protocol.bodies import ConsumeFromWhere, TopicConfig
from rocketlite.proxy.pb import definition_pb2 as pb


async def test_a_4x_consumer_reads_what_5x_and_4x_producers_sent(g: GrpcEnv) -> None:
    g.broker.topics.update(TopicConfig(topicName="MIX1", readQueueNums=2, writeQueueNums=2))
    ns = f"127.0.0.1:{g.namesrv.port}"
    v5 = message("MIX1", b"from-5x", tag="T5", keys=("key5",), props={"origin": "grpc"})
    r = await send(g, v5)
    assert r.status.code == pb.Code.OK
    async with Producer("PG-MIX", namesrv_addr=ns) as p:
        await p.send(Message("MIX1", b"from-4x", tags="T4", keys="key4"))
    cfg = ClientConfig(namesrv_addr=ns, rebalance_interval=0.5, persist_offset_interval=0.5,
                       heartbeat_interval=1.0)
    async with LitePullConsumer("GC-MIX", config=cfg, broker_suspend_max=1.0,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET) as c:
        c.assign(await c.fetch_queues("MIX1"))
        got: list[MessageExt] = []
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            got += await c.poll(0.5)
    by_body = {m.body: m for m in got}
    assert set(by_body) == {b"from-5x", b"from-4x"}
    m5 = by_body[b"from-5x"]
    assert m5.tags == "T5" and m5.keys == ["key5"]
    assert m5.properties["origin"] == "grpc"
    assert m5.msg_id == r.entries[0].message_id  # the client's id is the message's UNIQ_KEY
    assert by_body[b"from-4x"].tags == "T4"
