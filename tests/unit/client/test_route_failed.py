"""ClientInstance.route_failed: a failed request's topic gets its route refreshed in the
background, once per topic however many requests fail together, again after the gap, never
before ``start`` nor after ``close``."""

from __future__ import annotations

import asyncio

from rocketlite.client.instance import ClientConfig, ClientInstance
from rocketlite.protocol.bodies import TopicRouteData


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
