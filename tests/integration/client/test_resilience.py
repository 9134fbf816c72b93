"""The client through failures: a broker restarted in the middle of a stream, and a broker of two
stopped while a producer with latency fault tolerance keeps sending."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from clientconf import Cluster, eventually
from test_push_consumer import Sink, consumer

from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer

pytestmark = pytest.mark.integration


async def test_broker_restart_mid_stream_loses_nothing(cluster: Cluster) -> None:
    sink = Sink()
    c = consumer(cluster, "GR", "RT", sink, pull_error_delay=0.1)
    sent: list[bytes] = []
    async with Producer("PG", namesrv_addr=cluster.ns_addr, send_timeout=1.0) as p:
        await p.send(Message("RT", b"first"))
        sent.append(b"first")
        await c.start()
        try:
            for i in range(300):
                if i == 100:
                    await cluster.stop_broker("broker-a")
                if i == 150:
                    await cluster.start_broker("broker-a")
                with contextlib.suppress(MQClientError, MQBrokerError):
                    await p.send(Message("RT", b"r%d" % i))
                    sent.append(b"r%d" % i)
                await asyncio.sleep(0.002)
            assert 200 <= len(sent) < 301  # the sends while the broker was down failed
            await eventually(lambda: set(sent) <= {m.body for m in sink.msgs}, 30)
        finally:
            await c.shutdown()


async def test_fault_tolerance_avoids_a_stopped_broker(cluster: Cluster) -> None:
    await cluster.start_broker("broker-b")
    config = ClientConfig(namesrv_addr=cluster.ns_addr)
    async with Producer("PG", config=config, latency_fault_enable=True, send_timeout=2.0) as p:
        first = [await p.send(Message("FT", b"w%d" % i)) for i in range(16)]
        assert {r.queue.brokerName for r in first} == {"broker-a", "broker-b"}
        await cluster.stop_broker("broker-b")
        results = [await p.send(Message("FT", b"x%d" % i)) for i in range(40)]  # no exception
        assert p.fault is not None and not p.fault.is_available("broker-b")
    assert {r.queue.brokerName for r in results} == {"broker-a"}
