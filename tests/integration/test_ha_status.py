"""Replication observability and the master's address from the NameServer, with two brokers in
one process and a NameServer on loopback: GET_BROKER_RUNTIME_INFO's replication keys and
GET_BROKER_HA_STATUS (``HARuntimeInfo``) through ``rocketlite admin haStatus``; the lag grows while
the slave applies nothing and returns to 0 once it caught up; a slave without ``haMasterAddress``
replicates from the HA address the NameServer answers (and follows a new one); a slave with it
keeps it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import hahelp
from brokerhelp import eventually, free_port
from hahelp import Pair, assert_same_commitlog
from rocketlite.broker.broker import Broker
from rocketlite.cli.main import app
from rocketlite.formats.properties import encode_properties
from rocketlite.store.message import MessageToStore

pytestmark = pytest.mark.integration

TOPIC = "HaStatusT"
TIMEOUT = 30.0
runner = CliRunner()


def nodes(tmp: Path) -> contextlib.AbstractAsyncContextManager[Pair]:
    return hahelp.pair(tmp, "broker-hs", broker={"registerNameServerPeriod": "300"},
                       store={"haHousekeepingInterval": "3000"}, topic=(TOPIC, 2))


def put(b: Broker, n: int, seed: int) -> None:
    b.store.put_messages([
        MessageToStore(topic=TOPIC, body=bytes([i % 251]) * (100 + i % 900), queue_id=i % 2,
                       born_timestamp=1, properties=encode_properties({"KEYS": f"k{seed}-{i}"}))
        for i in range(n)])


def caught_up(master: Broker, slave: Broker) -> bool:
    return slave.store.commitlog.max_offset == master.store.commitlog.max_offset


async def ha_status(*args: str) -> Any:
    """``rocketlite admin haStatus ARGS --json`` (in a thread: the command runs its own loop)."""
    r = await asyncio.to_thread(runner.invoke, app, ["admin", "haStatus", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


async def test_runtime_info_and_ha_status_show_the_lag(tmp_path: Path) -> None:
    async with nodes(tmp_path) as n:
        master = await n.start(0, "m")
        assert master.ha_server is not None
        put(master, 2000, seed=1)
        slave = await n.start(1, "s", brokerRole="SLAVE",
                              haMasterAddress=f"127.0.0.1:{master.ha_server.port}")
        assert slave.ha_client is not None
        await eventually(lambda: caught_up(master, slave))
        top = master.store.commitlog.max_offset

        info = await n.runtime_info(master)
        assert info["brokerRole"] == "ASYNC_MASTER"
        assert info["haServerAddr"] == f"127.0.0.1:{master.ha_server.port}"
        assert (info["haSlaveNum"], info["haInSyncSlaveNum"]) == ("1", "1")
        assert info["commitLogMaxOffset"] == str(top)
        await eventually(lambda: master.admin._ha_summary()["slaveFallBehindMuch"] == "0")
        sinfo = await n.runtime_info(slave)
        assert sinfo["brokerRole"] == "SLAVE"
        assert sinfo["haMasterAddress"] == f"127.0.0.1:{master.ha_server.port}"
        assert sinfo["haConnected"] == "true"
        assert sinfo["masterAddr"] == master.address  # from the NameServer's reply
        assert sinfo["haMasterMaxOffset"] == str(top)
        assert "haSlaveNum" not in sinfo and "haMasterAddress" not in info

        (view,) = await ha_status("-b", master.address)
        assert view["master"] is True and view["maxOffset"] == top
        (sl,) = view["slaves"]
        assert sl["ackedOffset"] == top and sl["lagBytes"] == 0 and sl["lagSeconds"] == 0
        assert sl["inSync"] is True and sl["transferFromWhere"] == 0
        (cview,) = await ha_status("-n", f"127.0.0.1:{n.ns.port}", "-c", "DefaultCluster")
        assert cview["broker"] == master.address and len(cview["slaves"]) == 1
        (slave_view,) = await ha_status("-b", slave.address)
        last_read = slave_view.pop("lastReadTimestamp")  # heartbeats move it every 200 ms
        assert abs(last_read - time.time() * 1000) < 2000
        assert slave_view == {"broker": slave.address, "master": False,
                              "masterHaAddress": f"127.0.0.1:{master.ha_server.port}",
                              "maxOffset": top}
        text = await asyncio.to_thread(runner.invoke, app, ["admin", "haStatus", "-b", slave.address])
        assert text.exit_code == 0, text.output
        assert f"slave {slave.address} of HA address 127.0.0.1:{master.ha_server.port}: " \
            f"CommitLog max offset {top}, last frame from the master 20" in text.stdout

        # The slave stops applying (its connection stays up, reporting its old offset): the
        # lag in bytes is what the master wrote since, the lag in time grows by the second.
        dropped: list[int] = []

        def drop(phy: int, body: bytes) -> bool:
            dropped.append(len(body))
            return False

        slave.ha_client._apply = drop  # type: ignore[method-assign]
        put(master, 500, seed=2)
        grown = master.store.commitlog.max_offset - top
        await eventually(lambda: sum(dropped) >= grown)
        (v1,) = await ha_status("-b", master.address)
        await asyncio.sleep(0.6)
        (v2,) = await ha_status("-b", master.address)
        (s1,), (s2,) = v1["slaves"], v2["slaves"]
        assert s1["ackedOffset"] == s2["ackedOffset"] == top
        assert s1["lagBytes"] == s2["lagBytes"] == grown
        print(f"\nslave not applying: lag {s1['lagBytes']} B, {s1['lagSeconds']} s, "
              f"0.6 s later {s2['lagSeconds']} s")
        assert s2["lagSeconds"] >= s1["lagSeconds"] + 0.5, (s1, s2)
        assert s1["lagSeconds"] > 0
        info = await n.runtime_info(master)
        assert info["slaveFallBehindMuch"] == str(grown)
        assert int(info["haSlaveLagMillis"]) >= int(s2["lagSeconds"] * 1000)
        text = await asyncio.to_thread(runner.invoke, app,
                                       ["admin", "haStatus", "-b", master.address])
        assert text.exit_code == 0, text.output
        assert f"master {master.address}: CommitLog max offset {top + grown}, 1 slave(s), " \
            "1 in sync" in text.stdout
        assert "lag (bytes)" in text.stdout and "OK" in text.stdout

        # It applies again: the next frame is beyond its log, it reconnects, catches up.
        del slave.ha_client._apply
        await eventually(lambda: caught_up(master, slave))

        async def zero() -> bool:
            (v,) = await ha_status("-b", master.address)
            return [(s["lagBytes"], s["lagSeconds"]) for s in v["slaves"]] == [(0, 0)]

        deadline = time.monotonic() + TIMEOUT
        while not await zero():
            assert time.monotonic() < deadline, "the lag did not return to 0"
            await asyncio.sleep(0.1)
        assert slave.ha_client.truncations == 0
        assert_same_commitlog(tmp_path / "m", tmp_path / "s", master.store.commitlog.max_offset)

        # A stopped slave leaves the list; slaveFallBehindMuch still counts from its last ack.
        await n.stop(slave)
        await eventually(lambda: not master.ha_server.slave_connected)  # type: ignore[union-attr]
        acked = master.store.commitlog.max_offset
        put(master, 100, seed=3)
        (v,) = await ha_status("-b", master.address)
        assert v["slaves"] == []
        info = await n.runtime_info(master)
        assert info["haSlaveNum"] == "0"
        assert info["slaveFallBehindMuch"] == str(master.store.commitlog.max_offset - acked)
        assert info["haSlaveLagMillis"] == "0"


async def test_ha_status_exits_1_when_the_broker_cannot_be_reached() -> None:
    addr = f"127.0.0.1:{free_port()}"
    r = await asyncio.to_thread(runner.invoke, app, ["admin", "haStatus", "-b", addr])
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach broker {addr}"), lines
    r = await asyncio.to_thread(runner.invoke, app, ["admin", "haStatus", "-n", addr,
                                                     "-c", "DefaultCluster"])
    assert r.exit_code == 1 and f"cannot reach NameServer {addr}" in r.stderr
    r = await asyncio.to_thread(runner.invoke, app, ["admin", "haStatus", "-c", "DefaultCluster"])
    assert r.exit_code == 2 and "needs -n" in r.output
    r = await asyncio.to_thread(runner.invoke, app, ["admin", "haStatus"])
    assert r.exit_code == 2 and "exactly one of" in r.output


async def test_a_slave_learns_its_master_from_the_namesrv_and_follows_it(tmp_path: Path) -> None:
    async with nodes(tmp_path) as n:
        master = await n.start(0, "m")
        assert master.ha_server is not None
        put(master, 1500, seed=4)
        slave = await n.start(1, "s", brokerRole="SLAVE")  # no haMasterAddress
        assert slave.ha_client is not None
        assert slave.ha_client.master_address == master.ha_address
        await eventually(lambda: caught_up(master, slave))
        put(master, 300, seed=5)
        await eventually(lambda: caught_up(master, slave))
        assert slave.master_addr == master.address
        top = master.store.commitlog.max_offset
        await eventually(lambda: slave.store.dispatcher.dispatch_from >= top)
        assert_same_commitlog(tmp_path / "m", tmp_path / "s", top)

        # The master comes back with another HA port: the slave follows the NameServer's answer.
        await n.stop(master)
        new_port = free_port()
        master = await n.start(0, "m", haListenPort=str(new_port))
        assert master.ha_address == f"127.0.0.1:{new_port}"
        put(master, 400, seed=6)
        await eventually(lambda: slave.ha_client is not None
                         and slave.ha_client.master_address == f"127.0.0.1:{new_port}")
        await eventually(lambda: caught_up(master, slave))
        assert_same_commitlog(tmp_path / "m", tmp_path / "s", master.store.commitlog.max_offset)


async def test_a_slave_with_ha_master_address_keeps_it(tmp_path: Path) -> None:
    async with nodes(tmp_path) as n:
        master = await n.start(0, "m")
        assert master.ha_server is not None
        configured = f"localhost:{master.ha_server.port}"  # not what the NameServer answers
        slave = await n.start(1, "s", brokerRole="SLAVE", haMasterAddress=configured)
        assert slave.ha_client is not None
        put(master, 200, seed=7)
        await eventually(lambda: caught_up(master, slave))
        await eventually(lambda: slave.master_addr == master.address)  # a reply was read
        await asyncio.sleep(0.7)  # two more registrations
        assert slave.ha_client.master_address == configured
        assert (await n.runtime_info(slave))["haMasterAddress"] == configured
