"""The NameServer drops a broker whose registration connection closes (RocketMQ's
``onChannelDestroy``), not only after 120 s of silence: a SIGKILLed master leaves the cluster
info and the topic route at once (its slave stays, so consumers read there), a killed slave
leaves the master's route as it was; a broker that registered again on another connection
stays when the old one closes, and a broker whose NameServer connection closes under it
registers again at once, so its route never gaps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import hahelp
from brokerhelp import ServerProcess, broker_process, eventually, free_port
from rocketlite.namesrv.route_info import DEFAULT_BROKER_TIMEOUT_MS
from rocketlite.namesrv.server import CLOSE_GRACE_S, NameServer
from rocketlite.protocol import headers as h
from rocketlite.protocol.bodies import ClusterInfo, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration

GROUP = "broker-nc"
TOPIC = "SELF_TEST_TOPIC"  # every broker has it; a slave registers it too
# Well below the 120 s a silent broker is kept: the removal can only come from the close.
WITHIN_S = 10.0
assert WITHIN_S * 1000 < DEFAULT_BROKER_TIMEOUT_MS


async def group_addrs(client: RemotingClient, ns: str) -> dict[int, str]:
    r = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3.0)
    assert r.code == ResponseCode.SUCCESS, r.remark
    bd = ClusterInfo.from_json(r.body).brokerAddrTable.get(GROUP)
    return dict(bd.brokerAddrs) if bd is not None else {}


async def route_addrs(client: RemotingClient, ns: str) -> dict[int, str] | None:
    """The group's addresses in TOPIC's route; None when the route has no queue of the group."""
    r = await client.invoke(ns, RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 3.0)
    if r.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    route = TopicRouteData.from_json(r.body)
    if GROUP not in {q.brokerName for q in route.queueDatas}:
        return None
    return next(dict(b.brokerAddrs) for b in route.brokerDatas if b.brokerName == GROUP)


async def until(get: Callable[[], Awaitable[object]], expected: object) -> None:
    """Wait until ``get()`` gives ``expected``, at most WITHIN_S."""
    deadline = time.monotonic() + WITHIN_S
    while (got := await get()) != expected:
        assert time.monotonic() < deadline, f"{got} after {WITHIN_S} s, not {expected}"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("killed", ["master", "slave"])
async def test_a_killed_broker_leaves_the_routes_at_once(
    ns: tuple[NameServer, RemotingClient, str], tmp_path: Path, killed: str
) -> None:
    _, client, addr = ns
    ha_port = free_port()
    master, m_addr = broker_process(tmp_path, addr, GROUP, 0, ha_port=ha_port)
    slave: ServerProcess | None = None
    try:
        await asyncio.to_thread(master.wait_ready, 60)
        slave, s_addr = broker_process(tmp_path, addr, GROUP, 1)
        await asyncio.to_thread(slave.wait_ready, 60)
        both = {0: m_addr, 1: s_addr}
        await until(lambda: route_addrs(client, addr), both)
        victim, survivor = (master, slave) if killed == "master" else (slave, master)
        victim.kill()  # SIGKILL: no unregister, only the kernel closing its sockets
        left = {1: s_addr} if killed == "master" else {0: m_addr}
        await until(lambda: group_addrs(client, addr), left)
        # the topic route too: a master's queues stay with its slave, for consumers to read
        assert await route_addrs(client, addr) == left
        assert survivor.proc.poll() is None
    finally:
        if slave is not None:
            slave.kill()
        master.kill()


def register_cmd() -> RemotingCommand:
    hdr = h.RegisterBrokerRequestHeader(
        brokerName=GROUP, brokerAddr="127.0.0.1:10911", clusterName="DefaultCluster",
        haServerAddr="127.0.0.1:10912", brokerId=0, compressed=False)
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, hdr.to_ext())


async def test_a_registration_on_a_new_connection_outlives_the_old_one(
    ns: tuple[NameServer, RemotingClient, str]
) -> None:
    _, client, addr = ns
    old, new = RemotingClient(), RemotingClient()
    try:
        for c in (old, new):
            assert (await c.invoke(addr, register_cmd(), 5)).code == ResponseCode.SUCCESS
        await old.close()
        await asyncio.sleep(CLOSE_GRACE_S * 3)  # the close is long past its grace
        assert await group_addrs(client, addr) == {0: "127.0.0.1:10911"}
        await new.close()
        await until(lambda: group_addrs(client, addr), {})
    finally:
        await old.close()
        await new.close()


async def test_a_broker_registers_again_when_its_namesrv_connection_closes(
    tmp_path: Path
) -> None:
    async with hahelp.pair(tmp_path, GROUP) as p:
        broker = await p.start_master()
        routes = p.ns.routes
        removed: list[str] = []
        channel_closed = routes.channel_closed

        def recorded(channel: object) -> list[str]:
            out = channel_closed(channel)
            removed.extend(out)
            return out

        routes.channel_closed = recorded  # type: ignore[method-assign]
        await eventually(lambda: broker.address in routes.live)
        await asyncio.sleep(1.0)  # the registrations of the start are over: the broker is idle
        first = routes.live[broker.address].channel
        assert first is not None
        first.close()  # type: ignore[attr-defined]  # a Connection: as an idle sweep closes it
        # Through three graces the broker never leaves the route: it registered again on a
        # new connection before the grace of the closed one ran out.
        end = time.monotonic() + CLOSE_GRACE_S * 3
        while time.monotonic() < end:
            assert broker.address in routes.live
            await asyncio.sleep(0.02)
        assert removed == []
        now = routes.live[broker.address].channel
        assert now is not None and now is not first and now.is_open  # type: ignore[attr-defined]
