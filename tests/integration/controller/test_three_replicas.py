"""Three replicas of one group on one host (issue 20): the master tells its slaves' HA
connections apart by the local address each publishes in its replica record, so a stalled
slave leaves the SyncStateSet while the other stays, and on the master's death only the
caught-up slave may be elected.

A real etcd, a NameServer running the election watcher and three brokers started with
``rocketlite broker -c conf --controller etcd://...``, all on 127.0.0.1, SYNC_MASTER,
``haMaxGapNotInSync`` 64 KiB. Broker 1 is elected first; brokers 2 and 3 follow it. Broker 2 is
paused (SIGSTOP; its lease TTL is long enough that it stays a live replica meanwhile) and 2 MiB
of SEND_OK sends go on (broker 3 acks them): broker 2 leaves the set, broker 3 stays. With the
host rule the master used before, broker 3's connection put both in the set. Broker 1 is then
SIGKILLed and broker 2 resumed: broker 3 is elected within the failover limit (broker 2, alive,
a lower brokerId and holding maybe every byte its socket buffers took, is no candidate), every
acknowledged message is read back from it, and broker 2 follows it and rejoins the set.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from brokerhelp import pull_queue
from failoverhelp import (
    FAILOVER_LIMIT_S,
    controller_group,
    read_back,
    send_ok,
    wait_in_sync,
    wait_master,
)
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.client.send_types import SendStatus
from rocketlite.controller.etcd import EtcdController
from rocketlite.controller.state import GroupView, Replica, replica_key
from rocketlite.remoting.client import RemotingClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP = "broker-3r"
TOPIC = "ThreeReplicas"
MAX_GAP = 64 * 1024
BODY = 32 * 1024
PAUSED_SENDS = 64  # 2 MiB, 32 times the gap


async def group(etcd: EtcdController) -> GroupView:
    return await etcd.get_group("DefaultCluster", GROUP)


async def record_versions(etcd: EtcdController) -> dict[int, int]:
    """brokerId → its replica key's etcd version (1 + the rewrites of its record)."""
    out = {}
    for b in (1, 2, 3):
        kv = await etcd.client.get(replica_key("DefaultCluster", GROUP, b).encode())
        out[b] = kv.version if kv is not None else 0
    return out


async def readable(client: RemotingClient, addr: str, body: bytes, within: float) -> None:
    """Wait until a pull from ``addr`` returns ``body`` (a slave serves pulls)."""
    deadline = time.monotonic() + within
    while True:
        for q in range(8):
            if any(m.body == body for m in await pull_queue(client, addr, TOPIC, q)):
                return
        assert time.monotonic() < deadline, f"{body!r} not readable from {addr}"
        await asyncio.sleep(0.5)


async def test_a_stalled_slave_leaves_the_set_and_is_never_elected(tmp_path: Path,
                                                                   etcd_url: str) -> None:
    gap = {"haMaxGapNotInSync": str(MAX_GAP)}
    # the slave to pause (broker 2) keeps its lease through the pause: a live replica out of
    # the set
    extras: list[dict[str, str] | None] = [gap, gap | {"controllerLeaseTtl": "30"}, gap]
    async with controller_group(tmp_path, etcd_url, GROUP, extras) as g:
        ns, client, etcd = g.ns, g.client, g.etcd
        master, stalled, caught_up = g.nodes
        producer = Producer("ThreeReplicasPG", config=ClientConfig(namesrv_addr=ns,
                                                                    poll_name_server_interval=0.5),
                            send_timeout=5.0, compress_over=1 << 30)  # BODY bytes stored
        try:
            await producer.start()
            acked: set[bytes] = set()
            await send_ok(producer, TOPIC, b"warm-up", 30)
            acked.add(b"warm-up")
            await wait_in_sync(etcd, GROUP, {1, 2, 3}, 15)
            # the slaves copy the topic's config from the master every 10 s: until broker 3 has it,
            # as master it would refuse pulls of the topic (TOPIC_NOT_EXIST)
            await readable(client, caught_up.address, b"warm-up", 30)
            view = await group(etcd)
            clients = {b: view.replicas[b].ha_client_addr for b in (2, 3)}
            assert all(c and c.startswith("127.0.0.1:") for c in clients.values()), clients
            assert clients[2] != clients[3]

            with stalled.paused():
                before, started = await record_versions(etcd), time.monotonic()
                for i in range(PAUSED_SENDS):
                    body = b"%06d" % i + b"x" * (BODY - 6)
                    r = await producer.send(Message(TOPIC, body))
                    assert r.status is SendStatus.SEND_OK, r.status  # broker 3 acked it
                    acked.add(body)
                await wait_in_sync(etcd, GROUP, {1, 3}, 10)
                view = await group(etcd)
                assert 2 in view.replicas, "the paused slave's lease lapsed: the test proves nothing"
                # broker 3 published the offset it reached; the paused broker 2 could not
                deadline = time.monotonic() + 10
                while view.replicas[3].max_offset - view.replicas[2].max_offset <= MAX_GAP:
                    assert time.monotonic() < deadline, view.replicas
                    await asyncio.sleep(0.2)
                    view = await group(etcd)
                assert view.replicas[3].epoch == view.replicas[2].epoch == view.state.master_epoch
                took, after = time.monotonic() - started, await record_versions(etcd)
                print(f"record rewrites in the {took:.2f} s since the pause: "
                      f"{ {b: after[b] - before[b] for b in after} }")
                killed = time.monotonic()
                master.kill()
            # broker 2 runs again (and publishes what it holds) while the election is pending

            await wait_master(client, ns, GROUP, caught_up.address, FAILOVER_LIMIT_S)
            print(f"broker 3 master in the route {time.monotonic() - killed:.2f} s after SIGKILL")
            view = await group(etcd)
            assert view.state.master_id == 3, view.state
            assert 2 in view.replicas  # alive throughout, never a candidate
            await read_back(client, caught_up.address, TOPIC, acked)

            # broker 2 follows the new master, catches up and joins its set again
            await wait_in_sync(etcd, GROUP, {2, 3}, 20)
            await send_ok(producer, TOPIC, b"after", 30)
            assert (await group(etcd)).state.master_id == 3
            assert "follows master 3" in stalled.log()
        finally:
            await producer.shutdown()


async def test_elections_take_the_published_offsets_of_live_set_members(etcd_url: str) -> None:
    """At the etcd level: records rewritten under their lease carry (epoch, max offset); a new
    master is the live SyncStateSet member with the highest of them, never a replica outside
    the set however far it is; a record cannot be rewritten once its lease is gone."""
    c = "DefaultCluster"

    def rec(bid: int) -> Replica:
        return Replica(bid, f"127.0.0.1:{10911 + 10 * bid}", f"127.0.0.1:{10912 + 10 * bid}", "")

    async with EtcdController(etcd_url) as ctl:
        regs = {b: await ctl.register_replica(c, GROUP, rec(b), ttl=10) for b in (1, 2, 3, 4)}
        try:
            first = await ctl.elect_master(c, GROUP)
            assert first is not None and first.master_id == 1  # nothing published: lowest id
            await ctl.alter_sync_state_set(c, GROUP, 1, first.master_epoch, {1, 2, 3})
            # 2 and 3 in the set, 3 further; 4 outside the set, furthest of all
            for b, offset in ((2, 5_000), (3, 9_000), (4, 10**9)):
                assert await regs[b].update(rec(b).published(f"127.0.0.1:4000{b}", offset, 1))
            view = await ctl.get_group(c, GROUP)
            assert view.replicas[3] == rec(3).published("127.0.0.1:40003", 9_000, 1)
            await regs[1].close()  # the master goes
            second = await ctl.elect_master(c, GROUP)
            assert second is not None and second.master_id == 3
            # a record whose lease is gone cannot be rewritten (nor recreated)
            await regs[4].close()
            assert not await regs[4].update(rec(4).published("", 1, 1))
            assert 4 not in (await ctl.get_group(c, GROUP)).replicas
        finally:
            for r in regs.values():
                await r.close()
