"""The kill -9 scenario of the chaos suite (issue 22), shared by ``tests/chaos/test_kill_burst.py``
(a few rounds in CI) and ``scripts/chaos_kill.py`` (the full run, with a summary table).

One ``rocketlite start`` (NameServer and broker in one process) on one store per flush mode; each
round (``KillBurst.round``) has its own topic and:

* starts the server on the store (recovering the previous round's kill), creates the topic and
  runs a MIXED burst from rocketlite's own client, ``workers`` concurrent senders, each pausing
  ``pause_s`` after an answer (a burst lasts seconds, long enough for delay deliveries and
  transaction check-backs before some kills): single async
  sends, batches (2-6 messages), delay-level messages (levels 1 s and 2 s) and transactional
  messages (half + commit, a third rolled back: ``decision``), the kind of each slot drawn from
  the round's seeded generator. Every message has an id (``BURST_ID``) and a body derived from
  it (``failoverburst.body_of``), so a damaged or doubled record shows. A LitePullConsumer of
  group ``CONSUMER_GROUP`` consumes the topic during the burst and commits what it read;
* SIGKILLs the server once the acknowledged sends reach a seeded point (between a tenth and
  eight tenths of the burst), with sends still in flight;
* restarts it on the same store, asks the consumer offsets first (they must not run ahead of
  the recovered queues), starts a TransactionProducer of the same group (it answers the
  check-backs of the half messages whose decision the kill swallowed), waits until every
  acknowledged message is readable (delay messages once due) and two reads ``SETTLE_S`` apart
  agree, stops the server cleanly and runs ``rocketlite store verify``.

What a round must find (``judge``):

* every record intact (body and CRC as sent, an id the round sent), queues dense from 0;
* SYNC_FLUSH: every acknowledged single or batch message at the queue offset its answer named;
  every acknowledged delay message delivered, not before its delay; every acknowledged
  transactional message to commit there exactly once; nothing stored twice except a delay
  message (the schedule service delivers at least once across a crash: what it delivered after
  its last ``delayOffset.json`` write comes again, as in RocketMQ; counted in ``redelivered``);
* ASYNC_FLUSH: the same, except that an acknowledged message may be missing when it lies in
  the queue's suffix past the readable records (``missing``): never a gap below them;
* any mode: a rolled-back message never appears; a committed one never twice.

A SIGKILL ends the process, not the machine: what the broker wrote to the page cache survives
either flush mode, so ``missing`` stays 0 unless recovery cuts something it should keep.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from brokerhelp import ServerProcess, broker_addr, create_topic, start_args, store_verify
from failoverburst import ID_PROPERTY, READ_BACK_CONF, body_of, read_topic
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import SendResult, SendStatus
from rocketlite.client.transaction import LocalTransactionState, TransactionProducer
from rocketlite.formats.message_record import MessageRecord, body_crc
from rocketlite.protocol.bodies import ConsumeFromWhere
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import QueryConsumerOffsetRequestHeader
from rocketlite.remoting.client import RemotingClient

MODES = ("SYNC_FLUSH", "ASYNC_FLUSH")
KINDS = ("single", "batch", "delay", "txn")
WEIGHTS = (4, 2, 2, 2)  # how often each kind is drawn
QUEUES = 4
LEVELS_MS = (1000, 2000)  # messageDelayLevel
HASH_SLOTS = 1000
PRODUCER_GROUP = "ChaosPG"
CONSUMER_GROUP = "ChaosCG"
CHECK_INTERVAL_MS = 300  # transactionCheckInterval (and transactionTimeOut)
SETTLE_S = 3 * CHECK_INTERVAL_MS / 1000  # a read equal to the one this long before: settled
ARRIVE_LIMIT_S = 30.0  # the acknowledged messages must all be readable within this after restart
BURST_LIMIT_S = 60.0
# a worker's pause after each answered send: a burst of 2,000 lasts a few seconds (so delay
# messages are delivered and transactions checked back before some kills), not a fraction of one
PAUSE_S = 0.03
CONF = {
    "mappedFileSizeCommitLog": str(1 << 20),  # rounds cross segments
    "mappedFileSizeConsumeQueue": "6000",
    "maxHashSlotNum": str(HASH_SLOTS), "maxIndexNum": "100000",
    "defaultTopicQueueNums": str(QUEUES),
    "messageDelayLevel": " ".join(f"{ms // 1000}s" for ms in LEVELS_MS),
    "flushDelayOffsetInterval": "1000",
    "transactionTimeOut": str(CHECK_INTERVAL_MS),
    "transactionCheckInterval": str(CHECK_INTERVAL_MS),
    "transactionCheckMax": "100",
    "flushConsumerOffsetInterval": "200",
    "flushIntervalCommitLog": "200",
} | READ_BACK_CONF


def env_seed() -> int:
    """``CHAOS_SEED`` from the environment (a failed run repeats with it), else a new one."""
    return int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def decision(msg_id: str) -> bool:
    """Whether the transactional message ``msg_id`` commits (two in three) or rolls back; the
    same answer for the local transaction and every check-back, in any process."""
    return zlib.crc32(msg_id.encode()) % 3 != 0


class Decisions:
    """The TransactionListener of the round's producers: ``decision`` of the message's id."""

    @staticmethod
    def _state(msg_id: str) -> LocalTransactionState:
        return (LocalTransactionState.COMMIT_MESSAGE if decision(msg_id)
                else LocalTransactionState.ROLLBACK_MESSAGE)

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return self._state(msg.properties[ID_PROPERTY])

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return self._state(msg.properties.get(ID_PROPERTY, ""))


@dataclass(slots=True)
class Sent:
    """One message of the burst: its kind; for an acknowledged single or batch message the queue
    and offset the answer named; for a delay message the earliest time it may be delivered."""

    kind: str
    acked: bool = False
    queue_id: int = -1
    queue_offset: int = -1
    due_ms: int = 0


@dataclass(slots=True)
class RoundResult:
    """One round's figures; ``problems`` empty when the round passed."""

    round: int
    mode: str
    seed: int
    kill_at: int  # the acknowledged send (slot) count at which the server was SIGKILLed
    sends: dict[str, int]  # acknowledged sends (slots) by kind
    acked: int  # acknowledged messages (a batch counts its messages)
    in_flight: int  # sends started and not answered when the server died
    recovered: int  # records read back from the round's topic after the restart
    missing: int  # acknowledged messages missing in a queue's suffix (allowed under ASYNC_FLUSH)
    redelivered: int  # delay messages delivered again after the restart (at least once)
    consumed: int  # messages the consumer group read and committed during the burst
    seconds: float
    problems: list[str] = field(default_factory=list)
    consumer_errors: list[str] = field(default_factory=list)  # failed polls/commits before the kill

    @property
    def verdict(self) -> str:
        return "ok" if not self.problems else "FAIL"

    def line(self) -> str:
        kinds = " ".join(f"{k} {self.sends.get(k, 0)}" for k in KINDS)
        return (f"round {self.round} {self.mode}: {self.acked} msgs acked ({kinds}), "
                f"SIGKILL at ack #{self.kill_at} with {self.in_flight} in flight; recovered "
                f"{self.recovered} records, missing suffix {self.missing}, delay redelivered "
                f"{self.redelivered}, consumed {self.consumed}"
                + (f" ({len(self.consumer_errors)} consumer errors, first "
                   f"{self.consumer_errors[0]})" if self.consumer_errors else "")
                + f"; {self.seconds:.1f} s: {self.verdict}"
                + "".join(f"\n    {p}" for p in self.problems[:10]))


Seen = dict[str, list[tuple[int, int, MessageRecord]]]  # id -> (queue, offset, record) each copy


def scan(records: dict[int, list[MessageRecord]], sent: dict[str, Sent]) -> tuple[Seen, list[str]]:
    """Where each id was read (``records[queue_id]`` in queue order from offset 0), and the
    problems of the records themselves: a hole in a queue's offsets, a record the round never
    sent, a damaged body."""
    problems: list[str] = []
    seen: Seen = {}
    for qid, recs in records.items():
        for i, m in enumerate(recs):
            if m.queue_offset != i:
                problems.append(f"queue {qid}: record #{i} has queue offset {m.queue_offset}")
            msg_id = m.properties.get(ID_PROPERTY, "")
            if msg_id not in sent:
                problems.append(f"queue {qid} offset {m.queue_offset}: a record the round never "
                                f"sent (id {msg_id!r})")
            elif m.body != body_of(msg_id) or m.body_crc != body_crc(m.body):
                problems.append(f"queue {qid} offset {m.queue_offset}: {msg_id} damaged")
            seen.setdefault(msg_id, []).append((qid, m.queue_offset, m))
    return seen, problems


def judge_copies(msg_id: str, s: Sent, where: list[tuple[int, int, MessageRecord]]) -> list[str]:
    """The problems of the copies of one message read back (any mode): a rolled-back message
    stored, a message other than a delay message stored twice, a delay message delivered early,
    a message at another place than its answer named."""
    if s.kind == "txn" and not decision(msg_id):
        return [f"{msg_id} was rolled back, yet stored at {where[0][:2]}"] if where else []
    out = []
    if len(where) > 1 and s.kind != "delay":
        out.append(f"{msg_id} ({s.kind}) stored {len(where)} times: {[w[:2] for w in where]}")
    if s.kind == "delay" and s.acked:
        out += [f"{msg_id} delivered at {m.store_timestamp}, {s.due_ms - m.store_timestamp} ms "
                "before its delay" for _, _, m in where if m.store_timestamp < s.due_ms]
    if s.acked and s.queue_id >= 0 and where and where[0][:2] != (s.queue_id, s.queue_offset):
        out.append(f"{msg_id} acked at queue/offset {(s.queue_id, s.queue_offset)}, read at "
                   f"{where[0][:2]}")
    return out


def judge(records: dict[int, list[MessageRecord]], sent: dict[str, Sent], mode: str
          ) -> tuple[int, int, list[str]]:
    """(missing, redelivered, problems) of a round's topic read back queue by queue from offset 0
    against what was sent (module doc)."""
    seen, problems = scan(records, sent)
    readable = {qid: len(recs) for qid, recs in records.items()}
    missing = redelivered = 0
    for msg_id, s in sent.items():
        where = seen.get(msg_id, [])
        problems += judge_copies(msg_id, s, where)
        if s.kind == "delay":
            redelivered += max(0, len(where) - 1)
        if not s.acked or where or (s.kind == "txn" and not decision(msg_id)):
            continue
        if mode == "SYNC_FLUSH":
            at = f" at queue/offset {(s.queue_id, s.queue_offset)}" if s.queue_id >= 0 else ""
            problems.append(f"acked {s.kind} message {msg_id}{at} LOST")
        elif s.queue_id >= 0 and s.queue_offset < readable.get(s.queue_id, 0):
            problems.append(f"acked {msg_id} at queue/offset {(s.queue_id, s.queue_offset)} "
                            f"LOST below {readable[s.queue_id]} readable records (a gap)")
        else:
            missing += 1
    return missing, redelivered, problems


class Burst:
    """One round's mixed burst against a running server (``run``): ``workers`` tasks take the
    slots of ``plan`` in turn, one send each, and SIGKILL ``server`` at the ``kill_at``-th
    acknowledged send; a LitePullConsumer reads and commits meanwhile. ``sent``: every message
    tried, ``in_flight``: the sends unanswered at the kill, ``committed``: the consumer's
    commits by queue."""

    def __init__(self, kb: KillBurst, server: ServerProcess, rnd: int, plan: list[str],
                 kill_at: int) -> None:
        self.server = server
        self.mode = kb.mode
        self.rnd = rnd
        self.topic = f"Kill{rnd}"
        self.plan = plan
        self.kill_at = kill_at
        self.pause_s = kb.pause_s
        self.sent: dict[str, Sent] = {}
        self.committed: dict[int, int] = {}
        self.consumer_errors: list[str] = []  # the consumer's failures before the kill
        self.next = self.acks = self.running = 0
        self.in_flight = -1  # set at the kill
        self.producer = kb.producer()
        self.consumer = LitePullConsumer(
            CONSUMER_GROUP, namesrv_addr=kb.ns, auto_commit=False, pull_error_delay=0.2,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)

    @property
    def killed(self) -> bool:
        return self.in_flight >= 0

    async def run(self, workers: int) -> None:
        await self.producer.start()
        await self.consumer.start()
        for _ in range(300):  # the NameServer may have the topic, not yet its queues
            if queues := await self.consumer.fetch_queues(self.topic):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"no queues of {self.topic} in its route after 30 s")
        self.consumer.assign(queues)  # pulling before the burst starts
        reader = asyncio.create_task(self.consume())
        try:
            async with asyncio.timeout(BURST_LIMIT_S):
                await asyncio.gather(*(self.worker() for _ in range(workers)))
            assert self.killed, f"the burst ended before the kill point {self.kill_at}"
        finally:
            reader.cancel()
            await asyncio.wait([reader])  # its end, not ours: a cancelled round stays cancelled
            for c in (self.consumer, self.producer):
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(10):
                        await c.shutdown()

    async def send(self, slot: int, kind: str) -> None:
        base = f"{self.mode[0]}{self.rnd}-{slot}"
        ids = [f"{base}.{j}" for j in range(2 + slot % 5)] if kind == "batch" else [base]
        msgs = [Message(self.topic, body_of(i), properties={ID_PROPERTY: i},
                        delay_level=1 + slot % 2 if kind == "delay" else 0) for i in ids]
        for i in ids:
            self.sent[i] = Sent(kind)
        t0 = now_ms()
        r: SendResult
        if kind == "batch":
            r = await self.producer.send_batch(msgs)
        elif kind == "txn":
            r = await self.producer.send_message_in_transaction(msgs[0])
        else:
            r = await self.producer.send_async(msgs[0])
        if r.status is not SendStatus.SEND_OK:
            return
        for j, i in enumerate(ids):
            s = self.sent[i]
            s.acked = True
            if kind in ("single", "batch"):
                s.queue_id, s.queue_offset = r.queue.queueId, r.queue_offset + j
            elif kind == "delay":
                s.due_ms = t0 + LEVELS_MS[slot % 2]

    async def worker(self) -> None:
        while self.next < len(self.plan) and not self.killed:
            slot = self.next
            self.next += 1
            self.running += 1
            try:
                await self.send(slot, self.plan[slot])
            except Exception:
                if self.killed:
                    return  # the answer died with the server: not acknowledged
                raise
            finally:
                self.running -= 1
            self.acks += 1
            if self.acks == self.kill_at:
                self.in_flight = self.running
                self.server.proc.kill()  # SIGKILL, sends still in flight
            await asyncio.sleep(self.pause_s)

    async def consume(self) -> None:
        while True:
            try:
                msgs = await self.consumer.poll(0.1)
                if msgs:
                    await self.consumer.commit_sync()
            except Exception as e:  # noqa: BLE001 - reported with the round, not a loss
                if self.killed:
                    return
                self.consumer_errors.append(repr(e))
                await asyncio.sleep(0.1)
                continue
            for m in msgs:
                self.committed[m.queue_id] = max(self.committed.get(m.queue_id, 0),
                                                 m.queue_offset + 1)


class KillBurst:
    """One flush mode's server (its store and ports kept across rounds) and the rounds run on
    it; ``burst`` sends a round, ``workers`` in flight, each pausing ``pause_s`` after an
    answer."""

    def __init__(self, tmp: Path, mode: str, seed: int, burst: int = 2000, workers: int = 24,
                 pause_s: float = PAUSE_S) -> None:
        assert burst >= 20 and workers >= 1
        self.pause_s = pause_s
        self.tmp = tmp
        self.mode = mode
        self.seed = seed
        self.rng = random.Random(f"{seed}-{mode}")
        self.burst = burst
        self.workers = workers
        self.store = tmp / "store"
        conf = tmp / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in CONF.items()), encoding="utf-8")
        self.args = start_args(self.store, conf, mode)  # the same ports for every restart
        self.addr = broker_addr(self.args)
        self.ns = f"127.0.0.1:{self.args[self.args.index('--namesrv-port') + 1]}"
        self.starts = 0

    def _server(self) -> ServerProcess:
        self.starts += 1
        proc = ServerProcess(self.args, self.tmp / f"server-{self.starts}.log")
        proc.wait_ready(60)
        return proc

    def producer(self) -> TransactionProducer:
        return TransactionProducer(PRODUCER_GROUP, Decisions(), namesrv_addr=self.ns,
                                   send_timeout=5.0, retry_times_when_send_failed=0,
                                   retry_times_when_send_async_failed=0,
                                   compress_over=1 << 30)  # bodies stored as sent

    async def round(self, rnd: int) -> RoundResult:
        """Burst, SIGKILL, restart, check (module doc)."""
        started = time.monotonic()
        plan = self.rng.choices(KINDS, WEIGHTS, k=self.burst)
        kill_at = self.rng.randrange(self.burst // 10, self.burst * 8 // 10)
        first = await asyncio.to_thread(self._server)
        try:
            burst = Burst(self, first, rnd, plan, kill_at)
            client = RemotingClient()
            try:
                await create_topic(client, self.addr, burst.topic, QUEUES)
            finally:
                await client.close()
            await burst.run(self.workers)
        finally:
            first.kill()
        assert (self.store / "abort").exists(), "SIGKILL should leave the abort marker"
        sent, consumed = burst.sent, burst.committed
        second = await asyncio.to_thread(self._server)
        try:
            records, problems = await self._check(burst.topic, sent, consumed)
            code = await asyncio.to_thread(second.stop)
            if code != 0:
                problems.append(f"the restarted server exited {code}: {second.log()}")
        finally:
            second.kill()
        bad = await asyncio.to_thread(store_verify, self.store, HASH_SLOTS,
                                      CONF["messageDelayLevel"])
        if bad:
            problems.append(f"rocketlite store verify: {bad}")
        missing, redelivered, wrong = judge(records, sent, self.mode)
        sends = {k: len({i.rsplit(".", 1)[0] for i, s in sent.items() if s.acked and s.kind == k})
                 for k in KINDS}
        return RoundResult(rnd, self.mode, self.seed, kill_at, sends,
                           sum(s.acked for s in sent.values()), burst.in_flight,
                           sum(len(v) for v in records.values()), missing, redelivered,
                           sum(consumed.values()), time.monotonic() - started, problems + wrong,
                           burst.consumer_errors)

    async def _check(self, topic: str, sent: dict[str, Sent], consumed: dict[int, int]
                     ) -> tuple[dict[int, list[MessageRecord]], list[str]]:
        """After the restart: the consumer offsets against the recovered queues, then the
        topic once every acknowledged message is readable and a read ``SETTLE_S`` later finds
        nothing more (check-backs and delays of unacknowledged messages may still add some), or
        ``ARRIVE_LIMIT_S`` passed."""
        client = RemotingClient()
        producer = self.producer()
        try:
            records, problems = await read_topic(client, self.addr, topic, QUEUES)
            for qid in range(QUEUES):
                h = QueryConsumerOffsetRequestHeader(consumerGroup=CONSUMER_GROUP, topic=topic,
                                                     queueId=qid)
                r = await client.invoke(self.addr, RemotingCommand.request(
                    RequestCode.QUERY_CONSUMER_OFFSET, h.to_ext()), 10.0)
                if r.code == ResponseCode.QUERY_NOT_FOUND:
                    continue
                stored = int(r.ext_fields["offset"])
                if stored > len(records[qid]):
                    problems.append(f"queue {qid}: consumer offset {stored} runs ahead of the "
                                    f"{len(records[qid])} messages recovered")
                if stored > consumed.get(qid, 0):
                    problems.append(f"queue {qid}: consumer offset {stored}, but the consumer "
                                    f"committed only up to {consumed.get(qid, 0)}")
            await producer.start()
            await producer.publish_queues(topic)  # learns the broker: heartbeat, check-backs
            want = {i for i, s in sent.items() if s.acked and (s.kind != "txn" or decision(i))}
            deadline = time.monotonic() + ARRIVE_LIMIT_S
            last = -1
            while True:  # until every acked message is there and nothing more arrives
                records, problems_now = await read_topic(client, self.addr, topic, QUEUES)
                have = {m.properties.get(ID_PROPERTY) for recs in records.values() for m in recs}
                count = sum(len(v) for v in records.values())
                if (want <= have and count == last) or time.monotonic() > deadline:
                    break
                last = count if want <= have else -1
                await asyncio.sleep(SETTLE_S)
            return records, problems + problems_now
        finally:
            with contextlib.suppress(Exception):
                await producer.shutdown()
            await client.close()
