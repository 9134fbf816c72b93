"""ASYNC_MASTER loses at most what its replication lag said (issue 20): a controller-mode group
of two brokers (``brokerRole=ASYNC_MASTER`` on both, so the survivor is one too), a real etcd
and a NameServer running the election watcher, all processes on loopback.

Controller mode, not the 4.x manual pair: ``ha/role.py`` starts an ``HAServer`` for whatever
master role the conf names (``GroupTransfer`` only under SYNC_MASTER), and the SyncStateSet
keeps every replica within ``haMaxGapNotInSync`` (256 MiB), so the ASYNC slave stays electable
and the loss is measured across a real failover, not on a stopped slave's files.

Under continuous load (``SENDERS`` sends in flight, unique bodies, no client retries) every
acknowledgement's CommitLog offset is kept (from its offset message id), and every
``SAMPLE_S`` the master's GET_BROKER_HA_STATUS (907) answer is kept with the time its request
was sent. The master is SIGKILLed mid-load, with the slave replicating (``steady``) or after
the slave was stopped (SIGSTOP) for ``PAUSE_S`` under load (``slave-paused``: megabytes of
reported lag, most of them lost; it resumes after the kill). Once the other broker is master
in the route, its CommitLog max offset ``S`` is read (it cut any half-copied record on
becoming master) and its queues are read back. The figures are printed (``pytest -s``).

The bound. Let the last 907 answer received before the kill have been requested at ``t``,
name master max offset ``M`` and slave acked offset ``A`` (``diff`` = ``M - A``, the lag it
reported). A lost acknowledged record starts at or after ``S`` (the suffix check below), and:

* records stored at offsets in ``[A, M)`` fill at most ``M - A`` bytes;
* a record at an offset >= ``M`` was stored after the master answered, so its ack arrived
  after ``t``: it is among ``B_after``, the bytes of records acknowledged after ``t``;
* the slave held every byte below ``A``; becoming master it keeps whole records only, so
  ``S >= A`` or ``S`` is the start of the one record that straddles ``A`` (asserted), whose
  ``A - S`` bytes below ``A`` are lost with it.

Hence lost acknowledged bytes <= ``diff + B_after + max(0, A - S)``: the reported lag plus the
bytes acknowledged after that report, plus under one record when the slave had acked half of
one. No gap: every acknowledged record ending at or below ``S`` is read back from the
survivor, at the same CommitLog offset, and none at or beyond ``S`` is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, free_port, pull_queue, pull_request, wait_port
from failoverhelp import (
    FAILOVER_LIMIT_S,
    Node,
    commitlog_max,
    send_ok,
    wait_in_sync,
    wait_master,
)
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.client.send_types import SendStatus
from rocketlite.common.errors import RemotingError
from rocketlite.controller.etcd import EtcdController
from rocketlite.formats.message_id import decode_message_id
from rocketlite.formats.message_record import decode_record
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP = "broker-a"
TOPIC = "AsyncLossTopic"
SENDERS = 64  # sends in flight
BODY = 512  # bytes of each body (a unique id, padded)
LOAD_S = 3.0  # load before the kill (or the pause)
PAUSE_S = 1.5  # slave-paused: the slave is stopped (SIGSTOP) this long before the kill
SAMPLE_S = 0.1
ASYNC = {"brokerRole": "ASYNC_MASTER"}


@dataclass(frozen=True, slots=True)
class Sample:
    """One 907 answer: requested at ``sent`` (monotonic), the master's max offset and the
    slave's acked offset then."""

    sent: float
    master_max: int
    slave_acked: int
    lag_ms: int  # the time behind the master reported with it (``lagMillis``)

    @property
    def diff(self) -> int:
        return self.master_max - self.slave_acked


@dataclass(frozen=True, slots=True)
class Ack:
    body: bytes
    offset: int  # CommitLog offset, from the offset message id
    port: int  # the store port in that id: the broker that stored it
    at: float  # monotonic time the ack was received


async def ha_sample(client: RemotingClient, addr: str) -> Sample | None:
    """The master's replication state (GET_BROKER_HA_STATUS), None until a slave has reported."""
    sent = time.monotonic()
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS), 1.0)
    assert r.code == ResponseCode.SUCCESS, r.remark
    info = json.loads(r.body)
    conns = [c for c in info["haConnectionInfo"] if c["slaveAckOffset"] >= 0]
    if not conns:
        return None
    assert len(conns) == 1, conns
    c = conns[0]
    assert c["diff"] == info["masterCommitLogMaxOffset"] - c["slaveAckOffset"], info
    return Sample(sent, info["masterCommitLogMaxOffset"], c["slaveAckOffset"], c["lagMillis"])


async def load(producer: Producer, stop: asyncio.Event, acks: list[Ack], worker: int) -> None:
    """Send unique bodies until ``stop``; keep each acknowledgement. A send that fails after
    ``stop`` (the master died under it) ends this sender: it was not acknowledged."""
    n = 0
    while not stop.is_set():
        body = (b"w%03d-%08d-" % (worker, n)).ljust(BODY, b".")
        n += 1
        try:
            r = await producer.send(Message(TOPIC, body))
        except Exception:
            if stop.is_set():  # the master was killed under it: not acknowledged
                return
            raise  # before the kill a send must not fail
        assert r.status is SendStatus.SEND_OK, r.status  # ASYNC_MASTER answers at once
        _, port, offset = decode_message_id(r.offset_msg_id)
        acks.append(Ack(body, offset, port, time.monotonic()))


async def sample_loop(client: RemotingClient, addr: str, stop: asyncio.Event,
                      samples: list[Sample]) -> None:
    """Every ``SAMPLE_S`` until ``stop``, keep the master's answer (one not answered in time,
    or cut by the kill, is skipped)."""
    while not stop.is_set():
        try:
            s = await ha_sample(client, addr)
        except RemotingError:
            s = None
        if s is not None and not stop.is_set():
            samples.append(s)
        await asyncio.sleep(SAMPLE_S)


async def read_survivor(client: RemotingClient, addr: str) -> dict[bytes, int]:
    """Body -> CommitLog offset of every message of ``TOPIC`` on ``addr`` (8 queues: a first
    send may use TBW102's count before the topic exists)."""
    got: dict[bytes, int] = {}
    for q in range(8):
        for m in await pull_queue(client, addr, TOPIC, q):
            got[m.body] = m.commit_log_offset
    return got


async def wait_topic(client: RemotingClient, addr: str, within: float) -> None:
    """Wait until the broker at ``addr`` knows ``TOPIC`` (a slave pulls the master's topic
    config every 10 s): the survivor must serve the topic's queues after the failover."""
    deadline = time.monotonic() + within
    while (r := await client.invoke(addr, pull_request(TOPIC, 0, 0), 3.0)).code \
            == ResponseCode.TOPIC_NOT_EXIST:
        assert time.monotonic() < deadline, f"{addr} does not know {TOPIC}: {r.remark}"
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("pause", [0.0, PAUSE_S], ids=["steady", "slave-paused"])
async def test_async_master_loss_is_bounded_by_reported_lag(tmp_path: Path, etcd_url: str,
                                                            pause: float) -> None:
    ns_port = free_port()
    ns = f"127.0.0.1:{ns_port}"
    namesrv = ServerProcess(["namesrv", "--port", str(ns_port), "--controller", etcd_url],
                            tmp_path / "namesrv.log")
    master = Node(tmp_path, GROUP, 1, ns, etcd_url, extra=ASYNC)
    # the slave's lease outlasts its pause (the master's stays short: failover within 10 s)
    slave = Node(tmp_path, GROUP, 2, ns, etcd_url, extra=ASYNC | {"controllerLeaseTtl": "10"})
    client = RemotingClient()
    etcd = EtcdController(etcd_url)
    producer = Producer("AsyncLossPG", config=ClientConfig(namesrv_addr=ns,
                                                           poll_name_server_interval=0.5),
                        send_timeout=5.0, retry_times_when_send_failed=0)
    stop = asyncio.Event()
    paused = False
    tasks: list[asyncio.Task[None]] = []
    try:
        namesrv.wait_ready(30)
        wait_port(ns_port)
        master.start()
        await wait_master(client, ns, GROUP, master.address, 15)
        slave.start()
        await producer.start()
        await send_ok(producer, TOPIC, b"warm-up", 30)
        await wait_in_sync(etcd, GROUP, {1, 2}, 30)
        await wait_topic(client, slave.address, 30)
        deadline = time.monotonic() + 30
        while (s := await ha_sample(client, master.address)) is None or s.diff:
            assert time.monotonic() < deadline, f"the slave did not catch up: {s}"
            await asyncio.sleep(0.1)

        acks: list[Ack] = []
        samples: list[Sample] = []
        tasks = [asyncio.create_task(load(producer, stop, acks, w)) for w in range(SENDERS)]
        tasks.append(asyncio.create_task(sample_loop(client, master.address, stop, samples)))
        await asyncio.sleep(LOAD_S)
        assert slave.proc is not None
        if pause:
            os.kill(slave.proc.proc.pid, signal.SIGSTOP)
            paused = True
            await asyncio.sleep(pause)
        assert samples, "no replication state sampled under load"
        last = samples[-1]  # answered before the kill (the loop appends nothing after stop)
        master.kill()
        stop.set()
        if paused:
            os.kill(slave.proc.proc.pid, signal.SIGCONT)
            paused = False
        await asyncio.wait(tasks, timeout=10)
        assert all(t.done() for t in tasks), "a sender did not end after the kill"
        for t in tasks:
            t.result()
        assert acks, "no send was acknowledged"
        assert {a.port for a in acks} == {master.port}, "an ack came from another broker"

        await wait_master(client, ns, GROUP, slave.address, FAILOVER_LIMIT_S)
        survivor_max = await commitlog_max(client, slave.address)

        # every acked record is in the dead master's CommitLog (its page cache outlives it)
        old_log = master.commitlog()
        size: dict[bytes, int] = {}
        for a in acks:
            rec = decode_record(old_log, a.offset)
            assert rec is not None and rec.body == a.body, f"{a} is not in the master's log"
            size[a.body] = rec.total_size

        kept = [a for a in acks if a.offset + size[a.body] <= survivor_max]
        beyond = [a for a in acks if a.offset >= survivor_max]
        assert len(kept) + len(beyond) == len(acks), "an acked record straddles the survivor's end"
        deadline = time.monotonic() + 10
        while True:  # the new master dispatches its copied records in the background
            got = await read_survivor(client, slave.address)
            missing_below = [a for a in kept if got.get(a.body) != a.offset]
            if not missing_below or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert not missing_below, (f"gap: {len(missing_below)} acked records below the "
                                   f"survivor's max offset {survivor_max} are missing, e.g. "
                                   f"{missing_below[:3]}")
        assert not [a for a in beyond if a.body in got], "a record beyond the survivor's end"

        lost_bytes = sum(size[a.body] for a in beyond)
        after = sum(size[a.body] for a in acks if a.at >= last.sent)
        half = max(0, last.slave_acked - survivor_max)
        if half:  # the survivor cut the one record the slave had acked half of
            cut = decode_record(old_log, survivor_max)
            assert cut is not None and survivor_max + cut.total_size > last.slave_acked, (
                "the survivor lost whole records the slave had acked")
        print(f"\nASYNC_MASTER loss (slave paused {pause} s): {len(acks)} acked "
              f"({sum(size.values())} B) in {LOAD_S + pause} s, {len(samples)} samples; "
              f"last reported lag {last.diff} B, {last.lag_ms} ms (master {last.master_max}, "
              f"slave acked {last.slave_acked}); acked after that report {after} B; survivor "
              f"max offset {survivor_max}; lost {len(beyond)} messages, {lost_bytes} B; "
              f"half-copied record cut {half} B")
        assert lost_bytes <= last.diff + after + half, (lost_bytes, last, after, half)
    finally:
        stop.set()
        if paused and slave.proc is not None:
            os.kill(slave.proc.proc.pid, signal.SIGCONT)
        for t in tasks:
            t.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
        await producer.shutdown()
        await client.close()
        await etcd.close()
        for n in (master, slave):
            n.close()
        namesrv.stop()
