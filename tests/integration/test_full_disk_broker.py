"""``rocketlite start`` (NameServer and broker in one process) on a disk that fills up (issue 17).

The process runs with its store on a 48 MiB tmpfs (as root; otherwise through the quota file
layer, ``python -m diskhelp``), most of it taken by a filler file. Producers send until the broker
answers SERVICE_NOT_AVAILABLE; then the process must be alive (before the fix it died with SIGBUS,
exit -7, the NameServer with it). With the last bytes of the disk taken too, the NameServer must
answer, ``rocketlite store verify`` must pass, every acknowledged message must be pullable at the
queue offset its reply named, and consumer offsets must commit (for a group new to the broker).
The fillers are deleted: sends succeed again without a restart. SIGTERM must end the process
with 0; a restart finds every message and ``store verify`` passes."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, free_port, pull_queue, send_request
from diskhelp import SIZE, disk_kinds, small_disk
from rocketlite.common.errors import RemotingError
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    GetRouteInfoRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketlite.remoting.client import RemotingClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "FullDiskTopic"
QUEUES = 4
WORKERS = 8
CONF = (
    "mappedFileSizeCommitLog=4194304\n"
    "mappedFileSizeConsumeQueue=60000\n"
    "diskMaxUsedSpaceRatio=95\n"
    "diskSpaceCleanForciblyRatio=95\n"
    "cleanFileForciblyEnable=false\n"  # a full disk must not clean acknowledged segments away
    "diskSpaceWarningLevelRatio=95\n"
    "fileReservedTime=1000\n"
    f"defaultTopicQueueNums={QUEUES}\n"
)

Ack = tuple[int, int, bytes]  # queue id, queue offset, body


class Broker:
    def __init__(self, kind: str, disk_root: Path, store: Path, conf: Path, log_dir: Path) -> None:
        self.kind, self.disk_root, self.store, self.conf, self.log_dir = (
            kind, disk_root, store, conf, log_dir)
        self.runs = 0

    def start(self) -> tuple[ServerProcess, str, str]:
        self.runs += 1
        ns, bp = free_port(), free_port()
        args = ["start", "--grpc-port", "0", "--store", str(self.store), "-c", str(self.conf),
                "--namesrv-port", str(ns), "--broker-port", str(bp)]
        log = self.log_dir / f"broker-{self.runs}.log"
        if self.kind == "quota":
            srv = ServerProcess([str(self.disk_root), str(SIZE), *args], log, module="diskhelp")
        else:
            srv = ServerProcess(args, log)
        srv.wait_ready()
        return srv, f"127.0.0.1:{ns}", f"127.0.0.1:{bp}"


def message(i: int) -> RemotingCommand:
    cmd = send_request(TOPIC, b"m%07d " % i * (20 + i % 50))
    cmd.ext_fields["i"] = encode_properties({"TAGS": "TagA", "UNIQ_KEY": uuid.uuid4().hex,
                                             "KEYS": f"key{i}"})
    return cmd


async def send_until_refused(addr: str) -> tuple[list[Ack], str]:
    """Send from WORKERS producers until the broker refuses; the acks and the refusal's remark."""
    client = RemotingClient()
    acked: list[Ack] = []
    refused: list[str] = []
    counter = iter(range(10**9))

    async def worker() -> None:
        while not refused:
            cmd = message(next(counter))
            try:
                r = await client.invoke(addr, cmd, 10.0)
            except RemotingError as e:  # the process is gone (before the fix: SIGBUS)
                refused.append(f"no answer: {e}")
                return
            if r.code == ResponseCode.SERVICE_NOT_AVAILABLE:
                refused.append(r.remark or "")
                return
            assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
            acked.append((int(r.ext_fields["queueId"]), int(r.ext_fields["queueOffset"]),
                          cmd.body or b""))

    try:
        async with asyncio.timeout(120):
            await asyncio.gather(*(worker() for _ in range(WORKERS)))
    finally:
        with contextlib.suppress(RemotingError):
            await client.close()
    return acked, refused[0]


async def send_until_accepted(addr: str) -> list[Ack]:
    """Sends are refused until the broker has allocated what it lacked (retried every second)."""
    client = RemotingClient()
    try:
        async with asyncio.timeout(20):
            i = 10**8
            while True:
                cmd = message(i)
                r = await client.invoke(addr, cmd, 10.0)
                if r.code == ResponseCode.SUCCESS:
                    acks = [(int(r.ext_fields["queueId"]), int(r.ext_fields["queueOffset"]),
                             cmd.body or b"")]
                    for j in range(1, 20):  # and it goes on accepting
                        cmd = message(i + j)
                        r = await client.invoke(addr, cmd, 10.0)
                        assert r.code == ResponseCode.SUCCESS, r.remark
                        acks.append((int(r.ext_fields["queueId"]),
                                     int(r.ext_fields["queueOffset"]), cmd.body or b""))
                    return acks
                assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE, r.remark
                await asyncio.sleep(0.2)
                i += 1
    finally:
        await client.close()


async def check_readable(addr: str, acked: list[Ack]) -> None:
    client = RemotingClient()
    try:
        pulled = {q: await pull_queue(client, addr, TOPIC, q) for q in range(QUEUES)}
    finally:
        await client.close()
    for q, msgs in pulled.items():
        assert [m.queue_offset for m in msgs] == list(range(len(msgs))), f"queue {q} has gaps"
    for q, qoff, body in acked:
        assert qoff < len(pulled[q]), f"acked message {q}:{qoff} is missing"
        assert pulled[q][qoff].body == body


async def nameserver_and_offsets_work(namesrv: str, addr: str, group: str = "CG") -> None:
    client = RemotingClient()
    try:
        r = await client.invoke(namesrv, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=TOPIC).to_ext()), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        q = {"consumerGroup": group, "topic": TOPIC, "queueId": 1}
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            UpdateConsumerOffsetRequestHeader(**q, commitOffset=7).to_ext()), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(**q).to_ext()), 5)
        assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "7"), r.remark
    finally:
        await client.close()


def store_verify(store: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "rocketlite", "store", "verify", str(store)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_full_disk_refuses_sends_and_the_broker_lives_on(tmp_path: Path) -> None:
    kind = disk_kinds()[0]  # tmpfs as root, else the quota layer
    with small_disk(kind, tmp_path) as d:
        store = d.root / "store"
        conf = tmp_path / "broker.conf"
        conf.write_text(CONF, encoding="utf-8")
        filler = d.fill(leave=16 << 20)
        broker = Broker(kind, d.root, store, conf, tmp_path)
        srv, namesrv, addr = broker.start()
        with srv:
            acked, remark = asyncio.run(send_until_refused(addr))
            assert srv.proc.poll() is None, (
                f"the broker died: exit {srv.proc.wait(10)} ({remark})\n{srv.log()}")
            assert len(acked) > 1000
            # an allocation's ENOSPC ("the disk is full: cannot ..."), not the 95 % ratio rule
            assert "the broker's disk is full [the disk is full: cannot" in remark \
                and str(d.root) in remark, remark
            rest = d.fill(leave=0, name="rest")  # the refusal came early: now truly full
            asyncio.run(nameserver_and_offsets_work(namesrv, addr, "CG-full"))  # a new group
            store_verify(store)  # on the full disk
            asyncio.run(check_readable(addr, acked))
            assert srv.proc.poll() is None
            rest.unlink()
            filler.unlink()
            acked += asyncio.run(send_until_accepted(addr))  # no restart: writes resume
            asyncio.run(check_readable(addr, acked))
            assert srv.stop() == 0, srv.log()
        srv, namesrv, addr = broker.start()
        with srv:
            asyncio.run(check_readable(addr, acked))
            asyncio.run(nameserver_and_offsets_work(namesrv, addr))
            assert srv.stop() == 0, srv.log()
        store_verify(store)
