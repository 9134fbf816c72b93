"""Helpers of the SYNC_MASTER tests (not a test module): a master, a slave (in this process or
a ``python -m rocketlite broker`` process) and a fake slave that acks only when told, all on
loopback."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import hahelp
from brokerhelp import READY, ServerProcess, eventually, free_port
from hahelp import FakeSlave
from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.ha.transfer import GroupTransfer
from rocketlite.formats.properties import encode_properties
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import SendMessageRequestHeader
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.config import StoreConfig

TOPIC = "SyncTopic"

__all__ = ["READY", "TOPIC", "FakeSlave", "World", "eventually", "send_request", "world"]


def store_props(root: Path, **extra: str) -> dict[str, str]:
    return hahelp.store_props(root, **({"brokerIP1": "127.0.0.1",
                                        "haHousekeepingInterval": "20000"} | extra))


def send_request(body: bytes, queue_id: int = 0, code: int = RequestCode.SEND_MESSAGE_V2,
                 batch: bool | None = None) -> RemotingCommand:
    h = SendMessageRequestHeader(
        producerGroup="PG", topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=4,
        queueId=queue_id, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties({"TAGS": "a"}), batch=batch)
    ext = h.to_ext() if code == RequestCode.SEND_MESSAGE else h.to_v2_ext()
    return RemotingCommand.request(code, ext, body)



class World:
    """A NameServer, a master (in this process) and optionally a slave."""

    def __init__(self, tmp: Path, ns: NameServer) -> None:
        self.tmp = tmp
        self.ns = ns
        self.master: Broker | None = None
        self.slave: Broker | None = None
        self.slave_proc: ServerProcess | None = None
        self.client = RemotingClient()

    def _bcfg(self, broker_id: int) -> BrokerConfig:
        return BrokerConfig.from_properties({
            "namesrvAddr": f"127.0.0.1:{self.ns.port}", "brokerName": "broker-sync",
            "brokerId": str(broker_id)})

    async def start_master(self, **extra: str) -> Broker:
        props = store_props(self.tmp / "m", brokerRole="SYNC_MASTER", **extra)
        self.master = Broker(self._bcfg(0), StoreConfig.from_properties(props))
        await self.master.start()
        self.master.topics.create_plain(TOPIC, 4)
        return self.master

    @property
    def transfer(self) -> GroupTransfer:
        assert self.master is not None and self.master.ha_server is not None
        t = self.master.ha_server.transfer
        assert t is not None
        return t

    @property
    def ha_address(self) -> str:
        assert self.master is not None and self.master.ha_server is not None
        return f"127.0.0.1:{self.master.ha_server.port}"

    async def start_slave(self) -> Broker:
        props = store_props(self.tmp / "s", brokerRole="SLAVE", haMasterAddress=self.ha_address)
        self.slave = Broker(self._bcfg(1), StoreConfig.from_properties(props))
        await self.slave.start()
        return self.slave

    def start_slave_process(self) -> ServerProcess:
        """The slave as ``python -m rocketlite broker -c conf`` (so that it can be SIGSTOPped)."""
        props = store_props(self.tmp / "s", brokerRole="SLAVE", haMasterAddress=self.ha_address,
                            brokerId="1", brokerName="broker-sync",
                            namesrvAddr=f"127.0.0.1:{self.ns.port}",
                            listenPort=str(free_port()))
        conf = self.tmp / "slave.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        self.slave_proc = ServerProcess(["broker", "-c", str(conf), "--no-grpc"],
                                        self.tmp / "slave.log")
        self.slave_proc.wait_ready()
        return self.slave_proc

    async def synced(self) -> None:
        """Wait until a slave acked the master's whole CommitLog."""
        assert self.master is not None and self.master.ha_server is not None
        ha_server, cl = self.master.ha_server, self.master.store.commitlog
        await eventually(lambda: ha_server.slave_connected and ha_server.max_acked >= cl.max_offset)

    async def send(self, cmd: RemotingCommand, timeout: float = 30.0) -> RemotingCommand:  # noqa: ASYNC109
        assert self.master is not None
        return await self.client.invoke(f"127.0.0.1:{self.master.port}", cmd, timeout)

    async def close(self) -> None:
        await self.client.close()
        if self.slave_proc is not None:
            self.slave_proc.kill()
        if self.slave is not None:
            await self.slave.close()
        if self.master is not None:
            await self.master.close()


@contextlib.asynccontextmanager
async def world(tmp: Path) -> AsyncIterator[World]:
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    w = World(tmp, ns)
    try:
        yield w
    finally:
        await w.close()
        await ns.close()


