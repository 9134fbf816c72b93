"""After a failover: ``ClientInstance.route_failed`` refreshes a failed request's topic route in
the background, once per topic however many requests fail together, again after the gap, never
before ``start`` nor after ``close``; a producer with latency fault tolerance stops avoiding a
broker name once the route names a new master for it."""

from __future__ import annotations

import asyncio

from rocketlite.client.instance import ClientConfig, ClientInstance
from rocketlite.client.producer import Producer
from rocketlite.protocol.bodies import BrokerData, QueueData, TopicRouteData


async def test_refreshes_are_per_topic_rate_limited_and_in_the_background() -> None:
    inst = ClientInstance(ClientConfig(namesrv_addr="127.0.0.1:1"))
    fetched: list[str] = []
    release = asyncio.Event()

    async def update_route(topic: str) -> TopicRouteData | None:
        fetched.append(topic)
        await release.wait()  # a slow NameServer: the caller must not wait for it
        return None

    inst.update_route = update_route  # type: ignore[method-assign]
    inst.route_refresh_gap = 0.05
    inst.route_failed("T")  # not started: nothing
    await asyncio.sleep(0)
    assert fetched == []
    await inst.start()
    try:
        for _ in range(1000):  # a burst of async sends failing on one dropped connection
            inst.route_failed("T")
        inst.route_failed("U")
        await asyncio.sleep(0)
        assert fetched == ["T", "U"]  # started, not waited for (they still wait on release)
        inst.route_failed("T")
        await asyncio.sleep(0)
        assert fetched == ["T", "U"]
        await asyncio.sleep(0.1)  # past the gap
        inst.route_failed("T")
        inst.route_failed("T")
        await asyncio.sleep(0)
        assert fetched == ["T", "U", "T"]
    finally:
        await inst.close()  # cancels the refreshes still waiting on the NameServer
    inst.route_failed("T")
    await asyncio.sleep(0)
    assert len(fetched) == 3


def route(**masters: str) -> TopicRouteData:
    """A route with 2 queues on each broker name, ``name=master address`` (and a slave)."""
    return TopicRouteData(
        queueDatas=[QueueData(brokerName=n, readQueueNums=2, writeQueueNums=2, perm=6)
                    for n in masters],
        brokerDatas=[BrokerData(brokerName=n, cluster="C", brokerAddrs={0: a, 1: "s:" + a})
                     for n, a in masters.items()])


def test_a_broker_name_with_a_new_master_is_no_longer_avoided() -> None:
    p = Producer("G", namesrv_addr="127.0.0.1:1", latency_fault_enable=True)
    fault = p.fault
    assert fault is not None
    p.on_route("T", route(a="h:1", b="h:2"))
    fault.update("a", 10, isolation=True)  # a send to a's master threw: avoided 600 s
    fault.update("b", 10, isolation=True)
    p.on_route("T", route(a="h:1", b="h:2"))  # the same masters: still avoided
    assert not fault.is_available("a") and not fault.is_available("b")
    p.on_route("T", route(a="h:3", b="h:2"))  # a failed over to h:3
    assert fault.is_available("a") and not fault.is_available("b")
    assert "a" not in fault
