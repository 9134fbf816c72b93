"""4.x master/slave replication (HA) between two brokers in one process on loopback: a slave's
CommitLog files end byte-identical to its master's and its own dispatcher builds the same
ConsumeQueues; an empty slave catches up, a restarted one resumes from its max offset, a diverged
one (more data than its master) is truncated; a slave refuses sends and serves pulls."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import hahelp
from brokerhelp import decode_records, free_port
from brokerhelp import eventually as wait_for
from hahelp import SEG, Pair, store_config
from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.common.errors import ConfigError
from rocketlite.formats import ha
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.bodies import TopicRouteData
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore

pytestmark = pytest.mark.integration

TOPIC = "HaTopic"
TIMEOUT = 60.0


def pair(tmp: Path) -> contextlib.AbstractAsyncContextManager[Pair]:
    return hahelp.pair(tmp, "broker-ha", store={"maxMessageSize": "65536"}, topic=(TOPIC, 4))


async def eventually(check: Callable[[], object], timeout: float = TIMEOUT) -> None:  # noqa: ASYNC109
    await wait_for(check, timeout)


def put(broker: Broker, n: int, seed: int) -> int:
    """``n`` messages of mixed sizes (16 B to 6 KiB) into the master's store, in batches as the
    send path appends them; returns the bytes of the bodies."""
    rnd = random.Random(seed)
    total = 0
    for start in range(0, n, 200):
        batch = []
        for i in range(start, min(n, start + 200)):
            size = rnd.choice((16, 100, 300, 1000, 6000))
            body = bytes([i % 251]) * size
            total += size
            batch.append(MessageToStore(
                topic=TOPIC, body=body, queue_id=i % 4, born_timestamp=1,
                properties=encode_properties({"TAGS": f"t{i % 3}", "KEYS": f"k{seed}-{i}"})))
        broker.store.put_messages(batch)
    return total


async def test_a_slave_catches_up_streams_and_resumes_byte_identical(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        master = await p.start_master()
        put(master, 100_000, seed=1)  # the issue: 100k messages of mixed sizes
        top = master.store.commitlog.max_offset
        assert top > 3 * SEG  # several segments rolled
        slave = await p.start_slave()
        seconds = await p.caught_up()
        print(f"\ncatch-up of an empty slave: {top / 1e6:.1f} MB in {seconds:.2f} s, "
              f"{top / 1e6 / seconds:.0f} MB/s")
        p.assert_identical()
        # live: appends stream as they come
        put(master, 3000, seed=2)
        await p.caught_up()
        p.assert_identical()
        assert master.ha_server is not None
        await eventually(lambda: master.ha_server is not None and [
            s.lag for s in master.ha_server.status().slaves] == [0])
        (seen,) = master.ha_server.status().slaves
        assert seen.acked_offset == master.store.commitlog.max_offset
        assert abs(seen.last_report_ms - time.time() * 1000) < 10_000
        fut = master.ha_server.wait_for_ack(master.store.commitlog.max_offset)
        assert fut.result(timeout=5) is None
        assert master.ha_server.slave_connected
        assert slave.ha_client is not None and slave.ha_client.status().connected
        # restarted: resumes from its max offset while the master goes on writing
        await p.stop_slave()
        put(master, 4000, seed=3)
        before = (tmp_path / "s" / "commitlog" / "00000000000000000000").stat().st_ino
        await p.start_slave()
        await p.caught_up()
        p.assert_identical()
        assert (tmp_path / "s" / "commitlog" / "00000000000000000000").stat().st_ino == before


async def test_a_slave_refuses_sends_serves_pulls_and_registers(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        master = await p.start_master()
        slave = await p.start_slave()
        h = SendMessageRequestHeader(
            producerGroup="PG", topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=4,
            queueId=0, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
            properties=encode_properties({"TAGS": "a"}))
        for broker in (master, slave):
            r = await p.client.invoke(
                f"127.0.0.1:{broker.port}",
                RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), b"hi"), 5.0)
            if broker is master:
                assert r.code == ResponseCode.SUCCESS, r.remark
            else:
                assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
                assert r.remark is not None and "slave mode" in r.remark
                assert "sends go to the master" in r.remark
        put(master, 100, seed=4)
        await p.caught_up()
        ph = PullMessageRequestHeader(
            consumerGroup="CG", topic=TOPIC, queueId=0, queueOffset=0, maxMsgNums=32,
            sysFlag=int(PullSysFlag.SUBSCRIPTION), commitOffset=0, suspendTimeoutMillis=0,
            subVersion=0, subscription="*", expressionType="TAG")
        r = await p.client.invoke(f"127.0.0.1:{slave.port}",
                                  RemotingCommand.request(RequestCode.PULL_MESSAGE, ph.to_ext()),
                                  5.0)
        assert r.code == ResponseCode.SUCCESS, r.remark
        got = decode_records(r.body)
        assert [m.body for m in got[:2]] == [b"hi", bytes([0]) * len(got[1].body)]
        assert len(got) == 26  # the send, then every fourth of the 100
        # the NameServer knows the slave under brokerId 1 with its HA address unset (a slave
        # serves no slaves) and the master's HA address
        await slave.register_all()
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        route = TopicRouteData.from_json(
            (await p.client.invoke(f"127.0.0.1:{p.ns.port}", cmd, 5.0)).body)
        addrs = route.brokerDatas[0].brokerAddrs
        assert addrs == {0: master.address, 1: slave.address}


async def test_a_diverged_slave_is_truncated_then_identical(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        master = await p.start_master()
        put(master, 3000, seed=5)
        cut = master.store.commitlog.max_offset
        put(master, 2000, seed=6)
        await p.start_slave()
        await p.caught_up()
        await p.stop_slave()
        await p.stop_master()
        # the master loses its tail (as a crash without the slave's copy would)
        lost = MessageStore(store_config(tmp_path / "m")).start()
        lost.truncate_commitlog(cut)
        lost.shutdown()
        master = await p.start_master()
        assert master.store.commitlog.max_offset == cut
        slave = await p.start_slave()
        assert slave.ha_client is not None
        await eventually(lambda: slave.ha_client is not None and slave.ha_client.truncations == 1)
        await p.caught_up()
        p.assert_identical()
        put(master, 1500, seed=7)  # different records where the slave's lost ones were
        await p.caught_up()
        p.assert_identical()
        assert [len(m.query_message(TOPIC, "k6-1999")) for m in (master.store, slave.store)] \
            == [0, 0]
        assert [len(m.query_message(TOPIC, "k7-1499")) for m in (master.store, slave.store)] \
            == [1, 1]


def test_role_and_broker_id_must_agree(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="SLAVE with brokerId=0"):
        Broker(BrokerConfig(), store_config(tmp_path, brokerRole="SLAVE",
                                            haMasterAddress="127.0.0.1:1"))
    with pytest.raises(ConfigError, match="a master has brokerId=0"):
        Broker(BrokerConfig(broker_id=1), store_config(tmp_path, brokerRole="SYNC_MASTER"))
    with pytest.raises(ConfigError, match="haMasterAddress"):  # nor a NameServer to learn it
        Broker(BrokerConfig(broker_id=1, namesrv_addr=""), store_config(tmp_path,
                                                                         brokerRole="SLAVE"))
    with pytest.raises(ConfigError, match="brokerRole"):
        store_config(tmp_path, brokerRole="MASTER")


async def test_the_slave_reconnects_to_a_restarted_master(tmp_path: Path) -> None:
    ha_port = str(free_port())
    async with pair(tmp_path) as p:
        master = await p.start_master(haListenPort=ha_port)
        put(master, 500, seed=8)
        slave = await p.start_slave()
        await p.caught_up()
        await p.stop_master()
        assert slave.ha_client is not None
        await eventually(lambda: slave.ha_client is not None and not slave.ha_client.connected)
        master = await p.start_master(haListenPort=ha_port)
        put(master, 500, seed=9)
        await p.caught_up()
        p.assert_identical()
        assert slave.ha_client.status().master_address == f"127.0.0.1:{ha_port}"


async def test_a_silent_slave_is_closed_and_frames_follow_the_protocol(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        master = await p.start_master(haHousekeepingInterval="300", haTransferBatchSize="4096")
        put(master, 50, seed=10)
        assert master.ha_server is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", master.ha_server.port)
        try:
            writer.write(ha.encode_report(0))
            phy, size = ha.decode_transfer_header(await reader.readexactly(12), 1 << 20)
            assert (phy, size) == (0, 4096)
            assert await reader.readexactly(size) == master.store.read_raw(0, 4096)
            t0 = time.monotonic()
            async with asyncio.timeout(5):
                while await reader.read(1 << 16):
                    pass  # the rest, then EOF: no report came within haHousekeepingInterval
            assert 0.1 < time.monotonic() - t0 < 3
            await eventually(lambda: master.ha_server is not None
                             and not master.ha_server.slave_connected)
        finally:
            writer.close()


async def test_a_master_whose_ha_port_is_taken_serves_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with pair(tmp_path) as p:
        port = str(p.ns.port)  # held by the NameServer
        master = await p.start_master(haListenPort=port)
        assert master.ha_server is not None and not master.ha_server.slave_connected
        put(master, 10, seed=11)
        assert master.store.commitlog.max_offset > 0
        # a port set by hand: an error (the derived default, listenPort + 1, only warns)
        assert [r.levelname for r in caplog.records if "cannot listen" in r.message] == ["ERROR"]
