"""Shared pieces of the failover tests (issue 20): a real etcd on loopback free ports, a broker
of one group started in controller mode (``rocketlite broker -c conf --controller etcd://..``),
and waits on the NameServer's route and the controller's SyncStateSet.

Used by ``tests/integration/controller/`` and the conformance tests that run third-party
clients across a failover.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from brokerhelp import ServerProcess, free_port, pull_queue, side_ports, wait_port
from rocketlite.cli.cluster_etcd import etcd_command, etcd_healthy
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.client.send_types import SendStatus
from rocketlite.controller.etcd import EtcdController
from rocketlite.protocol.bodies import ClusterInfo, KVTable
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

FAILOVER_LIMIT_S = 10.0


@contextmanager
def run_etcd(tmp_path: Path) -> Iterator[str]:
    """A one-member etcd (the Debian etcd-server package, ``.ci/run`` installs it), its data
    under ``tmp_path``; yields ``etcd://127.0.0.1:<port>`` and stops it at the end."""
    binary = shutil.which("etcd")
    assert binary, "etcd is not installed: apt-get install etcd-server (see .ci/run)"
    client, peer = free_port(), free_port()
    log = (tmp_path / "etcd.log").open("wb")
    proc = subprocess.Popen(etcd_command(binary, tmp_path / "etcd", client, peer), stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"etcd://127.0.0.1:{client}"
    try:
        deadline = time.monotonic() + 20
        while not etcd_healthy(url):
            assert proc.poll() is None, (tmp_path / "etcd.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "etcd not healthy within 20 s"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


class Node:
    """One broker of a controller-mode group: its conf, ports and process (None while down).
    ``extra`` adds or overrides broker.conf keys (e.g. ``{"brokerRole": "ASYNC_MASTER"}``).
    With ``etcd`` None it is a 4.x broker with manual roles (no ``--controller``): ``extra``
    then names its ``brokerRole`` (and a slave's ``haMasterAddress``), ``broker_id`` its id."""

    def __init__(self, tmp: Path, group: str, broker_id: int, ns: str, etcd: str | None,
                 extra: dict[str, str] | None = None) -> None:
        self.group = group
        self.broker_id = broker_id
        self.etcd = etcd
        self.port, self.ha_port = free_port(), free_port()
        self.dir = tmp / f"{group}-b{broker_id}"
        self.dir.mkdir()
        self.conf = self.dir / "broker.conf"
        keys = {
            "brokerName": group, "brokerId": str(broker_id), "brokerRole": "SYNC_MASTER",
            "listenPort": str(self.port), "haListenPort": str(self.ha_port),
            "namesrvAddr": ns, "storePathRootDir": str(self.dir / "store"),
            "enableGrpcServer": "false", "mappedFileSizeCommitLog": "8388608",
            "controllerLeaseTtl": "3", "syncFlushTimeout": "2000",
            "haSendHeartbeatInterval": "1000", "registerNameServerPeriod": "2000",
        } | side_ports() | (extra or {})
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        self.proc: ServerProcess | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ha_address(self) -> str:
        """Where a slave replicates from (a 4.x slave's ``haMasterAddress``)."""
        return f"127.0.0.1:{self.ha_port}"

    def start(self) -> None:
        controller = ["--controller", self.etcd] if self.etcd else []
        self.proc = ServerProcess(["broker", "-c", str(self.conf), *controller],
                                  self.dir / "broker.log")
        self.proc.wait_ready(60)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc = None

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The broker stopped with SIGSTOP (a stalled or cut-off replica: its sockets stay open,
        it reads, reports and refreshes its lease no more) until the block ends (SIGCONT)."""
        assert self.proc is not None
        pid = self.proc.proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def log(self) -> str:
        """The broker's whole log, every run's (each start appends to ``broker.log``)."""
        path = self.dir / "broker.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def commitlog(self) -> bytes:
        """The CommitLog's bytes (the segments joined, the unwritten tail cut off)."""
        segs = sorted((self.dir / "store" / "commitlog").iterdir())
        return b"".join(p.read_bytes() for p in segs).rstrip(b"\0")

    def stop(self) -> None:
        if self.proc is not None:
            code = self.proc.stop()
            self.proc = None
            assert code == 0, f"broker {self.broker_id} exited {code}"

    def close(self) -> None:
        """Stop if running (a test's finally): a clean stop, else SIGKILL."""
        try:
            self.stop()
        finally:
            if self.proc is not None:
                self.proc.kill()


@dataclass
class ControllerGroup:
    """A controller-mode group (``controller_group``): its NameServer's address and process, its
    brokers (the first elected master), and a Remoting client and controller to ask them."""

    ns: str
    namesrv: ServerProcess
    nodes: list[Node]
    client: RemotingClient
    etcd: EtcdController


@asynccontextmanager
async def controller_group(tmp_path: Path, etcd_url: str, group: str,
                           extras: list[dict[str, str] | None]) -> AsyncIterator[ControllerGroup]:
    """``rocketlite namesrv --controller`` and one controller-mode broker per ``extras`` item
    (its broker.conf overrides; ids from 1), the first started alone and waited for as the
    elected master, then the others (not waited for: ``wait_in_sync`` if needed). Everything
    is stopped at the end (a clean stop, else SIGKILL)."""
    ns_port = free_port()
    ns = f"127.0.0.1:{ns_port}"
    namesrv = ServerProcess(["namesrv", "--port", str(ns_port), "--controller", etcd_url],
                            tmp_path / "namesrv.log")
    nodes = [Node(tmp_path, group, i, ns, etcd_url, extra) for i, extra in enumerate(extras, 1)]
    client = RemotingClient()
    etcd = EtcdController(etcd_url)
    try:
        namesrv.wait_ready(30)
        wait_port(ns_port)
        nodes[0].start()
        await wait_master(client, ns, group, nodes[0].address, 15)  # the only replica: elected
        for n in nodes[1:]:
            n.start()
        yield ControllerGroup(ns, namesrv, nodes, client, etcd)
    finally:
        await client.close()
        await etcd.close()
        for n in nodes:
            n.close()
        namesrv.stop()


async def master_addr(client: RemotingClient, ns: str, group: str) -> str | None:
    r = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3.0)
    assert r.code == ResponseCode.SUCCESS, r.remark
    bd = ClusterInfo.from_json(r.body).brokerAddrTable.get(group)
    return bd.brokerAddrs.get(0) if bd is not None else None


async def commitlog_max(client: RemotingClient, addr: str) -> int:
    """The CommitLog max offset of the broker at ``addr`` (GET_BROKER_RUNTIME_INFO)."""
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO),
                            3.0)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return int(KVTable.from_json(r.body).table["commitLogMaxOffset"])


async def wait_master(client: RemotingClient, ns: str, group: str, addr: str,
                      within: float) -> None:
    """Wait until the NameServer's route names ``addr`` as the group's master."""
    deadline = time.monotonic() + within
    while (got := await master_addr(client, ns, group)) != addr:
        assert time.monotonic() < deadline, f"master in the route is {got}, not {addr}"
        await asyncio.sleep(0.1)


async def send_ok(producer: Producer, topic: str, body: bytes, within: float) -> None:
    """Send until SEND_OK (a slave acked it): the slave is connected and replicating."""
    deadline = time.monotonic() + within
    while True:
        r = await producer.send(Message(topic, body))
        if r.status is SendStatus.SEND_OK:
            return
        assert time.monotonic() < deadline, f"no SEND_OK within {within} s (last {r.status})"
        await asyncio.sleep(0.2)


async def wait_in_sync(etcd: EtcdController, group: str, ids: set[int], within: float) -> None:
    """Wait until the group's SyncStateSet is ``ids`` (only its members may be elected)."""
    deadline = time.monotonic() + within
    while set((view := await etcd.get_group("DefaultCluster", group)).state.sync_state_set) != ids:
        assert time.monotonic() < deadline, f"SyncStateSet {view.state.sync_state_set}, not {ids}"
        await asyncio.sleep(0.1)


async def read_back(client: RemotingClient, addr: str, topic: str, acked: set[bytes],
                    queues: int = 8) -> None:
    """Every message of ``acked`` is readable from ``addr`` (within 10 s: the new master's
    queues are dispatched in the background). A first send may use a queue of TBW102 (8)
    before the topic exists, so 8 queues are read by default."""
    deadline = time.monotonic() + 10
    while True:
        got: set[bytes] = set()
        for q in range(queues):
            got |= {m.body for m in await pull_queue(client, addr, topic, q)}
        if acked <= got:
            return
        assert time.monotonic() < deadline, f"lost: {sorted(acked - got)[:5]}"
        await asyncio.sleep(0.2)
