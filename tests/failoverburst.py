"""The SYNC_MASTER kill-during-a-burst scenario of issue 20, shared by
``tests/integration/controller/test_failover_burst.py`` (which asserts) and
``bench/failover_bench.py`` (which prints the figures).

A group of two controller-mode brokers (``failoverhelp.Node``, SYNC_MASTER) behind a NameServer
running the election watcher. One round (``BurstGroup.round``):

* a burst of ``burst`` sends, ``workers`` of them in flight (rocketlite's Producer, no retry
  inside the producer): each *slot* is sent until a SEND_OK answers it, every attempt a new
  message id (``r<round>-<slot>-<attempt>``) carried in the body, in the ``BURST_ID`` property
  and in the body's CRC-guarded filler, so a copy stored twice or a record damaged shows;
* when the SEND_OK count reaches a random point (seeded), the slave is paused (SIGSTOP) for a
  random 0-300 ms, so that the master holds bytes the slave has not acked (a SYNC_MASTER that
  answered SEND_OK before its slave's ack would lose those), then the master is killed with
  SIGKILL and the slave resumed. The burst keeps going: sends to the dead master fail, the new
  master answers SLAVE_NOT_AVAILABLE (stored, not acknowledged: it has no slave yet) and, once
  the old master has been restarted as its slave and caught up, SEND_OK again. The restart
  starts as soon as the new master answers;
* the failover time: SIGKILL to the first answer of the new master (any status: the message is
  stored and answered on it; SYNC_MASTER cannot say SEND_OK before its slave is back);
* after the burst, the round's topic is read back from the new master, every queue from offset 0,
  and checked (``check_topic``): every SEND_OK message there at the queue and offset its answer
  gave; each queue's offsets dense from 0; no id twice; every body, property and CRC intact.
  The old master's log tells how many bytes it cut on its return (``truncated``).

Each round has its own topic (created on the first master before its slave starts, so the
slave's metadata sync copies them at once), so a round reads only its own messages.
``BurstGroup.close_and_verify`` reads every round's topic again from the last master, stops both
brokers cleanly, runs ``rocketlite store verify`` on both stores, and compares their CommitLogs
(the slave's is a prefix of the master's).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import re
import signal
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from brokerhelp import (
    ServerProcess,
    decode_records,
    free_port,
    pull_request,
    store_verify,
    wait_port,
)
from failoverhelp import Node, send_ok, wait_in_sync, wait_master
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.client.send_types import SendResult, SendStatus
from rocketlite.controller.etcd import EtcdController
from rocketlite.formats.message_id import decode_message_id
from rocketlite.formats.message_record import MessageRecord, body_crc
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import CreateTopicRequestHeader, GetMaxOffsetRequestHeader
from rocketlite.remoting.client import RemotingClient

GROUP = "broker-burst"
QUEUES = 8
WARM_UP = "BurstWarmUp"  # the sends that check the slave replicates, outside the rounds' topics
ID_PROPERTY = "BURST_ID"
TRUNCATION = re.compile(r"truncates its CommitLog from (\d+) to (\d+)")
MAX_PAUSE_S = 0.3  # the slave is paused up to this long (seeded) right before the kill
BACKOFF_S = 0.2  # a worker's pause after a send that was not SEND_OK (failed or unacked)
BURST_LIMIT_S = 120.0  # a burst that has not ended by then fails the round (a hang)
PULL_BATCH = 1024  # maxMsgNums of the read-back pulls
# the brokers answer a read-back pull with up to PULL_BATCH messages (not 32), 1 MiB
READ_BACK_CONF = {"maxTransferCountOnMessageInMemory": str(PULL_BATCH),
                  "maxTransferBytesOnMessageInMemory": str(1 << 20)}


def truncated(node: Node, before: int) -> int:
    """The bytes ``node`` cut from its CommitLog (as its log says) after its first ``before``
    cuts."""
    return sum(int(a) - int(b) for a, b in TRUNCATION.findall(node.log())[before:])


def body_of(msg_id: str, spread: int = 0) -> bytes:
    """The body of the message ``msg_id``: the id, then a filler derived from it, 64 bytes, or
    64 + 0..``spread`` bytes (the length derived from the id too)."""
    digest = hashlib.blake2b(msg_id.encode(), digest_size=32)
    filler = digest.hexdigest().encode()
    if spread:
        size = 64 + int.from_bytes(digest.digest()[:4], "big") % (spread + 1)
        filler = (filler * (size // 64 + 1))[:size]
    return msg_id.encode() + b"|" + filler


@dataclass(slots=True)
class Acked:
    """Where the broker said it stored a SEND_OK message."""

    queue_id: int
    queue_offset: int


@dataclass(slots=True)
class RoundResult:
    """One round's figures; ``lost`` and ``problems`` empty when the round passed."""

    round: int
    seed_point: int  # the SEND_OK count at which the master was killed
    old_master: int
    new_master: int
    pause_s: float  # how long the slave was paused right before the kill
    killed_s: float  # the burst's start to the kill
    failover_s: float  # the kill to the new master's first answer
    rejoin_s: float  # the kill to the new master's first SEND_OK (the old master is its slave)
    burst_s: float
    acked: int  # SEND_OK answers
    unacked: int  # stored answers that were not SEND_OK (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE)
    failed: int  # sends that got no answer (the dead master, a timeout)
    read: int  # messages read back from the new master
    truncated: int  # bytes the old master cut from its CommitLog when it returned
    lost: list[str] = field(default_factory=list)  # SEND_OK ids not read back
    problems: list[str] = field(default_factory=list)  # duplicates, holes, corruption

    @property
    def acked_per_s(self) -> float:
        return self.acked / self.burst_s if self.burst_s > 0 else 0.0

    def line(self) -> str:
        return (f"round {self.round}: broker {self.old_master} killed at SEND_OK "
                f"#{self.seed_point} ({self.killed_s:.1f} s in, its slave paused "
                f"{self.pause_s:.2f} s), broker {self.new_master} answered {self.failover_s:.2f} s "
                f"later, SEND_OK again {self.rejoin_s:.2f} s after the kill; burst "
                f"{self.burst_s:.1f} s, {self.acked} SEND_OK ({self.acked_per_s:.0f}/s; "
                f"{self.seed_point / self.killed_s:.0f}/s before the kill), {self.unacked} stored "
                f"unacked, {self.failed} failed; old master cut {self.truncated} B; {self.read} "
                f"read back, {len(self.lost)} acked lost, {len(self.problems)} problems")


def check_topic(records: dict[int, list[MessageRecord]], acked: dict[str, Acked],
                spread: int = 0) -> tuple[list[str], list[str]]:
    """(lost, problems) of a topic read back queue by queue (``records[queue_id]`` in queue
    order from offset 0) against the SEND_OK answers ``acked`` (id → where it was stored);
    bodies made by ``body_of(id, spread)``."""
    problems: list[str] = []
    seen: dict[str, tuple[int, int]] = {}
    for qid, recs in records.items():
        for i, m in enumerate(recs):
            if m.queue_offset != i:
                problems.append(f"queue {qid}: record #{i} has queue offset {m.queue_offset}")
            msg_id = m.properties.get(ID_PROPERTY, "")
            if m.body != body_of(msg_id, spread) or m.body_crc != body_crc(m.body):
                problems.append(f"queue {qid} offset {m.queue_offset}: body or id damaged ({msg_id!r})")
            if msg_id in seen:
                problems.append(f"{msg_id} stored twice: queue/offset {seen[msg_id]} and "
                                f"{(qid, m.queue_offset)}")
            seen[msg_id] = (qid, m.queue_offset)
    lost = []
    for msg_id, a in acked.items():
        where = seen.get(msg_id)
        if where is None:
            lost.append(msg_id)
        elif where != (a.queue_id, a.queue_offset):
            problems.append(f"{msg_id} acked at queue/offset {(a.queue_id, a.queue_offset)}, "
                            f"read at {where}")
    return lost, problems


async def read_topic(client: RemotingClient, addr: str, topic: str, queues: int
                     ) -> tuple[dict[int, list[MessageRecord]], list[str]]:
    """Every queue of ``topic`` on ``addr`` from offset 0 to its max offset (as the broker
    answers GET_MAX_OFFSET), in queue order; a pull not answered with messages is retried
    for up to 10 s, then the queue is returned short, and said so in the problems (a queue that
    grows meanwhile may be read past that offset). The broker
    should answer pulls of ``PULL_BATCH`` messages (``READ_BACK_CONF``)."""
    out: dict[int, list[MessageRecord]] = {}
    problems: list[str] = []
    for qid in range(queues):
        h = GetMaxOffsetRequestHeader(topic=topic, queueId=qid)
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, h.to_ext()), 10.0)
        assert r.code == 0, r.remark
        end = int(r.ext_fields["offset"])
        recs: list[MessageRecord] = []
        deadline = time.monotonic() + 10
        while len(recs) < end and time.monotonic() < deadline:
            r = await client.invoke(addr, pull_request(topic, qid, len(recs), PULL_BATCH), 10.0)
            if r.code == 0:
                recs += decode_records(r.body)
            else:
                await asyncio.sleep(0.1)
        if len(recs) < end:  # more: the queue grew while read
            problems.append(f"{topic} queue {qid}: {len(recs)} messages read, max offset {end}")
        out[qid] = recs
    return out, problems


class BurstGroup:
    """The group's processes and clients (``open_group``), and the rounds run on it."""

    def __init__(self, tmp: Path, etcd_url: str, rounds: int, burst: int, workers: int,
                 seed: int, spread: int = 0) -> None:
        self.tmp = tmp
        self.etcd_url = etcd_url
        self.rounds = rounds
        assert burst >= 4 * workers, "a burst of at least 4 sends a worker (the kill point)"
        self.burst = burst
        self.workers = workers
        self.spread = spread  # bodies of 64 + 0..spread bytes of filler (0: all 64)
        self.rng = random.Random(seed)
        self.ns_port = free_port()
        self.ns = f"127.0.0.1:{self.ns_port}"
        self.namesrv: ServerProcess | None = None
        self.nodes = [Node(tmp, GROUP, i, self.ns, etcd_url, READ_BACK_CONF) for i in (1, 2)]
        self.master, self.slave = self.nodes
        self.acked: list[dict[str, Acked]] = []  # each round's SEND_OK messages
        self.client = RemotingClient()
        self.etcd = EtcdController(etcd_url)
        self.producer = Producer("BurstPG", config=ClientConfig(namesrv_addr=self.ns,
                                                                poll_name_server_interval=0.5),
                                 send_timeout=3.0, retry_times_when_send_failed=0,
                                 compress_over=1 << 30)  # bodies stored as sent

    @staticmethod
    def topic(rnd: int) -> str:
        return f"Burst{rnd}"

    async def start(self) -> None:
        """NameServer, the first broker (elected: the only replica), the rounds' topics on it,
        the second broker; back when a SEND_OK shows the slave replicating."""
        self.namesrv = ServerProcess(["namesrv", "--port", str(self.ns_port), "--controller",
                                      self.etcd_url], self.tmp / "namesrv.log")
        self.namesrv.wait_ready(30)
        wait_port(self.ns_port)
        await asyncio.to_thread(self.master.start)
        await wait_master(self.client, self.ns, GROUP, self.master.address, 15)
        for topic in [WARM_UP, *map(self.topic, range(self.rounds))]:
            h = CreateTopicRequestHeader(topic=topic, defaultTopic="TBW102",
                                         readQueueNums=QUEUES, writeQueueNums=QUEUES, perm=6,
                                         topicFilterType="SINGLE_TAG")
            r = await self.client.invoke(self.master.address, RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext()), 5.0)
            assert r.code == 0, r.remark
        await asyncio.to_thread(self.slave.start)
        await self.producer.start()
        await send_ok(self.producer, WARM_UP, b"warm-up", 30)
        await wait_in_sync(self.etcd, GROUP, {1, 2}, 15)

    async def close(self) -> None:
        """Stop everything still running (a finally: a clean stop, else SIGKILL)."""
        try:
            await self.producer.shutdown()
            await self.client.close()
            await self.etcd.close()
        finally:
            for n in self.nodes:
                n.close()
            if self.namesrv is not None:
                self.namesrv.stop()
                self.namesrv = None

    # -- one round ------------------------------------------------------------------------

    async def round(self, rnd: int) -> RoundResult:
        """Burst, kill the master mid-burst, restart it as the new master's slave, read back
        (module doc). The roles swap for the next round."""
        old, new = self.master, self.slave
        topic = self.topic(rnd)
        cuts = len(TRUNCATION.findall(old.log()))
        # the kill comes before the last 2 x workers slots: the sends in flight then (at most
        # ``workers``, answered while the slave is paused) do not end the burst before it
        kill_at = self.rng.randrange(self.burst // 10, self.burst - 2 * self.workers)
        acked: dict[str, Acked] = {}
        counts = {"unacked": 0, "failed": 0}
        next_slot = 0
        killed = 0.0
        answered = 0.0  # the new master's first answer
        rejoined = 0.0  # the new master's first SEND_OK (its slave is back)
        restart: asyncio.Task[None] | None = None

        pause_s = self.rng.uniform(0.0, MAX_PAUSE_S)
        killer: asyncio.Task[None] | None = None

        async def kill() -> None:
            """Pause the slave ``pause_s``, SIGKILL the master, resume the slave."""
            nonlocal killed
            assert new.proc is not None
            slave_pid = new.proc.proc.pid
            os.kill(slave_pid, signal.SIGSTOP)
            try:
                await asyncio.sleep(pause_s)
                killed = time.monotonic()
                old.kill()
            finally:
                os.kill(slave_pid, signal.SIGCONT)

        async def worker() -> None:
            nonlocal next_slot, answered, rejoined, restart, killer
            while next_slot < self.burst:
                slot, next_slot = next_slot, next_slot + 1
                attempt = 0
                while True:
                    msg_id = f"r{rnd}-{slot}-{attempt}"
                    attempt += 1
                    try:
                        r: SendResult = await self.producer.send(Message(
                            topic, body_of(msg_id, self.spread), properties={ID_PROPERTY: msg_id}))
                    except Exception:  # noqa: BLE001 - no answer: not acknowledged
                        counts["failed"] += 1
                        await asyncio.sleep(BACKOFF_S)
                        continue
                    ok = r.status is SendStatus.SEND_OK
                    if killed and not rejoined and decode_message_id(r.offset_msg_id)[1] == new.port:
                        if not answered:
                            answered = time.monotonic()
                            restart = asyncio.create_task(asyncio.to_thread(old.start))
                        if ok:
                            rejoined = time.monotonic()
                    if ok:
                        acked[msg_id] = Acked(r.queue.queueId, r.queue_offset)
                        if len(acked) == kill_at:
                            killer = asyncio.create_task(kill())
                        break
                    counts["unacked"] += 1
                    await asyncio.sleep(BACKOFF_S)

        started = time.monotonic()
        tasks = [asyncio.create_task(worker()) for _ in range(self.workers)]
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), BURST_LIMIT_S)
            burst_s = time.monotonic() - started
            assert killer is not None and answered, "the burst ended before the failover"
            await killer
            assert restart is not None
            await restart
        finally:
            for t in [*tasks, *([killer] if killer is not None else [])]:
                t.cancel()
            if restart is not None and not restart.done():
                await asyncio.gather(restart, return_exceptions=True)
        await wait_in_sync(self.etcd, GROUP, {1, 2}, 30)  # the next round may kill the master
        records, problems = await self.read_topic(new.address, topic)
        lost, wrong = check_topic(records, acked, self.spread)
        problems += wrong
        self.master, self.slave = new, old
        self.acked.append(acked)
        return RoundResult(rnd, kill_at, old.broker_id, new.broker_id, pause_s, killed - started,
                           answered - killed, rejoined - killed, burst_s,
                           len(acked), counts["unacked"], counts["failed"],
                           sum(len(v) for v in records.values()), truncated(old, cuts), lost,
                           problems)

    async def read_topic(self, addr: str, topic: str) -> tuple[dict[int, list[MessageRecord]], list[str]]:
        return await read_topic(self.client, addr, topic, QUEUES)

    # -- the end ----------------------------------------------------------------------------

    async def close_and_verify(self) -> list[str]:
        """Every round's topic read back from the last master and checked again (the old
        masters' truncations cut nothing acknowledged, in any round); then both brokers stopped
        cleanly, the problems ``rocketlite store verify`` finds in each store, and whether the
        slave's CommitLog is a prefix of the master's."""
        problems = []
        for rnd, acked in enumerate(self.acked):
            records, wrong = await self.read_topic(self.master.address, self.topic(rnd))
            lost, more = check_topic(records, acked, self.spread)
            wrong += more
            problems += [f"round {rnd}: acked {m} lost at the end" for m in lost[:5]]
            problems += [f"round {rnd} at the end: {p}" for p in wrong[:5]]
        await send_ok(self.producer, WARM_UP, b"last", 30)
        await self.producer.shutdown()
        self.slave.stop()
        self.master.stop()
        for n in self.nodes:
            bad = await asyncio.to_thread(store_verify, n.dir / "store")
            if bad:
                problems.append(f"store verify of broker {n.broker_id}: {bad}")
        m, s = self.master.commitlog(), self.slave.commitlog()
        if not s or m[:len(s)] != s:
            problems.append("the slave's CommitLog is not a prefix of the master's")
        return problems


@asynccontextmanager
async def open_group(tmp: Path, etcd_url: str, rounds: int, burst: int, workers: int,
                     seed: int, spread: int = 0) -> AsyncIterator[BurstGroup]:
    """A started ``BurstGroup``, stopped at the end whatever happens."""
    g = BurstGroup(tmp, etcd_url, rounds, burst, workers, seed, spread)
    try:
        await g.start()
        yield g
    finally:
        await g.close()


def summary(results: list[RoundResult]) -> str:
    """Median and max failover time, the acked throughput and the acked messages lost."""
    fo = [r.failover_s for r in results]
    rate = sum(r.acked for r in results) / sum(r.burst_s for r in results)
    return (f"{len(results)} failovers: median {statistics.median(fo):.2f} s, max {max(fo):.2f} s; "
            f"burst {rate:.0f} SEND_OK/s overall; acked lost {sum(len(r.lost) for r in results)}, "
            f"problems {sum(len(r.problems) for r in results)}")
