"""Controller mode's runtime role switches in one process (a real etcd, an in-process NameServer
and election watcher, two ``Broker`` objects): the first broker is elected and runs as master,
the second follows it; when the master's lease is lost and the other is elected, the old master
steps down at runtime (store refuses sends, HA server stopped, registered under its own id) and
replicates from the new master, which took over its services and brokerId 0 in the route."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from brokerhelp import free_port
from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.transaction.end import EndRequest, EndResult
from rocketlite.common.errors import SlaveModeError
from rocketlite.controller.etcd import EtcdController
from rocketlite.controller.watcher import ElectionWatcher
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.bodies import ClusterInfo
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageToStore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

GROUP = "g"


async def eventually(check: Callable[[], object], within: float) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def make_broker(tmp: Path, broker_id: int, ns_port: int, etcd: str) -> Broker:
    bc = BrokerConfig(broker_name=GROUP, broker_id=broker_id, namesrv_addr=f"127.0.0.1:{ns_port}",
                      enable_controller_mode=True, controller_addr=etcd, controller_lease_ttl=2)
    sc = StoreConfig(store_path_root_dir=tmp / f"b{broker_id}", listen_port=free_port(),
                     ha_listen_port=free_port(), broker_role="SYNC_MASTER",
                     mapped_file_size_commit_log=1 << 20, ha_send_heartbeat_interval=500)
    return Broker(bc, sc)


def end_transaction(broker: Broker) -> EndResult | None:
    """How ``broker`` takes a producer's commit of a half message that does not exist: SLAVE
    on a slave, another refusal on a master (only a master decides transactions)."""
    now = broker.transactions.end.decide(EndRequest("PG", 0, True, 0), lambda r, m: None)
    return None if now is None else now[0]


def message(body: bytes) -> MessageToStore:
    return MessageToStore(topic="T", body=body, queue_id=0)


async def route(client: RemotingClient, ns_port: int) -> dict[int, str]:
    r = await client.invoke(f"127.0.0.1:{ns_port}",
                            RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3.0)
    assert r.code == ResponseCode.SUCCESS, r.remark
    bd = ClusterInfo.from_json(r.body).brokerAddrTable.get(GROUP)
    return dict(bd.brokerAddrs) if bd is not None else {}


async def test_a_master_that_lost_its_lease_steps_down_and_follows(tmp_path: Path,
                                                                   etcd_url: str) -> None:
    ns = NameServer("127.0.0.1", 0)
    await ns.start()
    ctl = EtcdController(etcd_url)
    watcher = ElectionWatcher(ctl, "DefaultCluster", sweep_interval=0.5)
    watcher.start()
    client = RemotingClient()
    a = make_broker(tmp_path, 1, ns.port, etcd_url)
    b = make_broker(tmp_path, 2, ns.port, etcd_url)
    try:
        await a.start()
        assert a.role is not None
        # is_master is set before the master's services start (in threads): wait for them too
        await eventually(lambda: a.role is not None and a.role.is_master and a.schedule.running,
                         15)
        assert not a.store.slave and a.ha_server is not None and a.send.transfer is not None
        assert a.timer.running and a.schedule.running
        assert end_transaction(a) not in (EndResult.SLAVE, EndResult.OK)
        a.store.put_messages_sync([message(b"before")])

        await b.start()
        assert b.role is not None and b.ha_client is not None
        await eventually(lambda: b.ha_client is not None and b.ha_client.connected, 15)
        with pytest.raises(SlaveModeError):
            b.store.put_messages_sync([message(b"refused")])
        assert not b.timer.running
        assert end_transaction(b) is EndResult.SLAVE
        assert b.admin._ha_summary()["brokerRole"] == "SLAVE"  # configured SYNC_MASTER
        await eventually(lambda: b.store.commitlog.max_offset == a.store.commitlog.max_offset, 15)
        assert await route(client, ns.port) == {0: a.address, 2: b.address}
        for _ in range(100):  # A reports B in sync: only then may B be elected
            if (await ctl.get_group("DefaultCluster", GROUP)).state.sync_state_set == (1, 2):
                break
            await asyncio.sleep(0.1)
        assert (await ctl.get_group("DefaultCluster", GROUP)).state.sync_state_set == (1, 2)

        # A's lease is lost (as in a partition longer than the TTL): its loop is held while the
        # watcher elects B, then A reads the state again.
        assert a.role._task is not None
        a.role._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await a.role._task
        assert a.role.registration is not None
        await a.role.registration.close()
        await eventually(lambda: b.role is not None and b.role.is_master and b.schedule.running,
                         15)
        assert not b.store.slave and b.ha_server is not None and b.timer.running
        # brokerId 2, master now: it decides transactions (the live role, not brokerId 0)
        assert end_transaction(b) not in (EndResult.SLAVE, EndResult.OK)
        assert b.admin._ha_summary()["brokerRole"] == "SYNC_MASTER"
        # "T" was written on A's store without a topic config (as a topic created on the old
        # master after the last slave sync): B adopts it from its replicated ConsumeQueues
        t = b.topics.get("T")
        assert t is not None and t.readQueueNums == t.writeQueueNums == 1
        view = await ctl.get_group("DefaultCluster", GROUP)
        assert view.state.master_id == 2 and view.state.master_epoch == 2
        assert view.state.epochs[-1] == (2, b.store.commitlog.max_offset)

        await a.role.follow_once()  # registers again, steps down, follows B
        assert not a.role.is_master and a.role.route_id == 1
        assert a.store.slave and a.ha_server is None and a.send.transfer is None
        assert not a.timer.running and not a.schedule.running
        assert end_transaction(a) is EndResult.SLAVE
        assert a.admin._ha_summary()["brokerRole"] == "SLAVE"
        with pytest.raises(SlaveModeError):
            a.store.put_messages_sync([message(b"refused")])
        assert a.ha_client is not None and a.ha_client.master_address == b.ha_address
        b.store.put_messages_sync([message(b"after")])
        await eventually(lambda: a.store.commitlog.max_offset == b.store.commitlog.max_offset, 15)
        got: dict[int, str] = {}
        for _ in range(50):
            got = await route(client, ns.port)
            if got == {0: b.address, 1: a.address}:
                break
            await asyncio.sleep(0.1)
        assert got == {0: b.address, 1: a.address}
    finally:
        await client.close()
        await b.close()
        await a.close()
        await watcher.stop()
        await ctl.close()
        await ns.close()
