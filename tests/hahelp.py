"""A 4.x master/slave pair in this process (manual roles, no controller) for the HA tests: a
NameServer on loopback, a master and a slave of one broker group with small stores (1 MiB
CommitLog segments, 200 ms HA heartbeats), and a RemotingClient to ask them.

Each test module names its group and what it sets beyond these defaults; the master's store is
under ``tmp/m``, the slave's under ``tmp/s``. Used by ``test_ha``, ``test_slave_sync`` and
``test_ha_status`` in ``tests/integration``; ``synchelp`` (the SYNC_MASTER tests) takes its
store keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

from brokerhelp import eventually, free_port
from rocketlite.acl.sign import Credentials
from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.formats import ha
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.bodies import KVTable
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.config import StoreConfig
from rocketlite.store.message_store import MessageStore

SEG = 1 << 20  # CommitLog segment size
TIMEOUT = 60.0  # how long ``caught_up`` waits


def store_props(root: Path, **extra: str) -> dict[str, str]:
    """The keys of a small store under ``root`` on free ports; ``extra`` adds or overrides."""
    props = {
        "storePathRootDir": str(root),
        "listenPort": "0",
        "haListenPort": "0",
        "mappedFileSizeCommitLog": str(SEG),
        "mappedFileSizeConsumeQueue": "20000",
        "maxHashSlotNum": "1024",
        "maxIndexNum": "40000",
        "flushIntervalCommitLog": "20",
        "flushIntervalConsumeQueue": "20",
        "haSendHeartbeatInterval": "200",
        "haHousekeepingInterval": "2000",
    }
    props.update(extra)
    return props


def store_config(root: Path, **extra: str) -> StoreConfig:
    return StoreConfig.from_properties(store_props(root, **extra))


def assert_same_commitlog(master_root: Path, slave_root: Path, top: int) -> list[str]:
    """The slave's CommitLog segments that the master wrote below ``top`` are the master's,
    byte for byte (one may be prepared ahead on either side); returns their names."""
    names = sorted(p.name for p in (master_root / "commitlog").iterdir() if int(p.name) < top)
    assert names
    for name in names:
        assert (slave_root / "commitlog" / name).read_bytes() == \
            (master_root / "commitlog" / name).read_bytes(), name
    return names


def _units(store: MessageStore) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    return {key: cq.get_units(cq.min_offset, cq.max_offset - cq.min_offset)
            for key, cq in sorted(store.queues.items())}


class Pair:
    """The brokers of group ``name`` (``master`` and ``slave``, None while down) registering with
    ``ns``. ``broker`` and ``store`` add broker.conf keys to every broker's config; ``topic``
    (name, queues) is created on each broker at start (the slave pulls topic configs only every
    10 s). With ``fixed_ports`` the master listens on ports chosen once, so it restarts where the
    slave and the clients look for it."""

    def __init__(self, tmp: Path, ns: NameServer, name: str, *,
                 broker: dict[str, str] | None = None, store: dict[str, str] | None = None,
                 topic: tuple[str, int] | None = None, fixed_ports: bool = False) -> None:
        self.tmp = tmp
        self.ns = ns
        self.ns_addr = f"127.0.0.1:{ns.port}"
        self.name = name
        self.broker_props = broker or {}
        self.store_props = store or {}
        self.topic = topic
        self.port = free_port() if fixed_ports else 0
        self.ha_port = free_port() if fixed_ports else 0
        self.master: Broker | None = None
        self.slave: Broker | None = None
        self.client = RemotingClient()

    def broker_config(self, broker_id: int) -> BrokerConfig:
        return BrokerConfig.from_properties({
            "namesrvAddr": self.ns_addr, "brokerName": self.name, "brokerId": str(broker_id),
        } | self.broker_props)

    async def start(self, broker_id: int, root: str, *, credentials: Credentials | None = None,
                    **extra: str) -> Broker:
        """Start a broker of the group with its store under ``tmp/root``: the master with
        brokerId 0, else the slave (``extra`` names its role); ``credentials`` sign its own
        requests (``acl.inner``)."""
        b = Broker(self.broker_config(broker_id),
                   store_config(self.tmp / root, **(self.store_props | extra)),
                   credentials=credentials)
        await b.start()
        if broker_id == 0:
            self.master = b
        else:
            self.slave = b
        if self.topic is not None:
            b.topics.create_plain(*self.topic)
        return b

    async def start_master(self, **extra: str) -> Broker:
        if self.port:
            extra = {"listenPort": str(self.port), "haListenPort": str(self.ha_port)} | extra
        return await self.start(0, "m", **extra)

    @property
    def master_ha_address(self) -> str:
        """Where the slave replicates from: the fixed HA port, else the running master's."""
        if self.ha_port:
            return f"127.0.0.1:{self.ha_port}"
        assert self.master is not None and self.master.ha_server is not None
        return f"127.0.0.1:{self.master.ha_server.port}"

    async def start_slave(self, *, credentials: Credentials | None = None, **extra: str) -> Broker:
        return await self.start(1, "s", brokerRole="SLAVE", credentials=credentials,
                                haMasterAddress=self.master_ha_address, **extra)

    async def stop(self, b: Broker) -> None:
        if b is self.master:
            self.master = None
        if b is self.slave:
            self.slave = None
        await b.close()

    async def stop_master(self) -> None:
        if self.master is not None:
            await self.stop(self.master)

    async def stop_slave(self) -> None:
        if self.slave is not None:
            await self.stop(self.slave)

    async def caught_up(self) -> float:
        """Wait until the slave holds and has dispatched the master's whole log (and the master
        dispatched it too); the seconds it took."""
        assert self.master is not None and self.slave is not None
        m, s = self.master.store, self.slave.store
        t0 = time.perf_counter()
        await eventually(lambda: s.commitlog.max_offset == m.commitlog.max_offset
                         and s.dispatcher.dispatch_from >= s.commitlog.max_offset
                         and m.dispatcher.dispatch_from >= m.commitlog.max_offset, TIMEOUT)
        return time.perf_counter() - t0

    def assert_identical(self) -> None:
        """The slave's store is the master's: the same ConsumeQueue units, and the same
        CommitLog segments below the master's max offset, byte for byte."""
        assert self.master is not None and self.slave is not None
        m, s = self.master.store, self.slave.store
        assert _units(s) == _units(m)
        top = m.commitlog.max_offset
        written = assert_same_commitlog(self.tmp / "m", self.tmp / "s", top)
        assert sorted(n.name for n in (self.tmp / "s" / "commitlog").iterdir()
                      if int(n.name) < top) == written

    async def call(self, broker: Broker, code: int, ext: dict[str, str] | None = None
                   ) -> RemotingCommand:
        return await self.client.invoke(f"127.0.0.1:{broker.port}",
                                        RemotingCommand.request(code, ext), 5.0)

    async def runtime_info(self, b: Broker) -> dict[str, str]:
        r = await self.call(b, RequestCode.GET_BROKER_RUNTIME_INFO)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return KVTable.from_json(r.body).table

    async def close(self) -> None:
        await self.client.close()
        await self.stop_slave()
        await self.stop_master()


@contextlib.asynccontextmanager
async def pair(tmp: Path, name: str, *, broker: dict[str, str] | None = None,
               store: dict[str, str] | None = None, topic: tuple[str, int] | None = None,
               fixed_ports: bool = False) -> AsyncIterator[Pair]:
    """A NameServer and a ``Pair`` of group ``name`` (the keywords are Pair's), all stopped at
    the end."""
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    p = Pair(tmp, ns, name, broker=broker, store=store, topic=topic, fixed_ports=fixed_ports)
    try:
        yield p
    finally:
        await p.close()
        await ns.close()


class FakeSlave:
    """A slave's HA connection that acks only the offsets it is told to (``report``);
    ``address`` is its local end, the peer the master sees."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        local = writer.get_extra_info("sockname")
        self.address = f"{local[0]}:{local[1]}"

    @classmethod
    async def connect(cls, address: str, offset: int | None = None) -> FakeSlave:
        """Connected to the HA server at ``address``; ``offset`` reported at once if given."""
        host, _, port = address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        s = cls(reader, writer)
        if offset is not None:
            await s.report(offset)
        return s

    async def report(self, offset: int) -> None:
        self.writer.write(ha.encode_report(offset))
        await self.writer.drain()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()
