"""The topic sink's broker side (asyncio, no pyspark): sending one task's rows, and the
exactly-once commit protocol. ``topic_sink`` runs these with ``asyncio.run`` inside Spark's
``write()`` (executors) and ``commit()``/``abort()`` (driver).

At-least-once (``send_rows``): rows are grouped per (topic, queue) into SEND_BATCH_MESSAGE
requests of up to ``batchSize`` messages (and ``sink_rows.BATCH_BYTES`` of bodies), with up to
``maxInFlight`` requests outstanding; rows without a queue go to the producer's round robin,
batch by batch. When the not yet full batches of all queues together hold more than
``sink_rows.PENDING_BYTES`` of bodies, the largest go out early. A failed send fails the task
and Spark re-runs it: the re-sent rows carry the same UNIQ_KEYs (``sink_rows.UniqKeys``),
so consumers can drop the duplicates.

Exactly-once (``send_halves`` then ``commit_exactly_once``):

1. ``write()`` sends every row as a half message (prepared, ``PGROUP`` = the sink's producer
   group; invisible to consumers) and returns the receipts in its commit message, at most
   ``maxRowsPerTask`` of them (the task holds them all and ships them to the driver). If it fails
   midway it rolls back what it sent before re-raising. A task that dies without that (a killed
   worker) leaves its half messages undecided: nobody answers the broker's check-backs for the
   sink's group, so they never become visible and end in ``TRANS_CHECK_MAX_TIME_TOPIC``.
2. The driver's ``commit(messages, batchId)`` reads the sink's marker (``MarkerStore``: the
   consumer offset of group ``rocketlite-sink-<sinkId>`` on queue 0 of the state topic, on its
   first broker by name; ``sink_rows.Marker`` encodes it) and does what ``sink_rows.decide``
   says:

   * COMMIT (a batch after the marker's): mark the batch in progress, END(commit) every half
     message, mark it done;
   * SKIP (the batch is done: Spark replays batch N when the driver died after our commit but
     before it logged ``commits/N``): END(rollback) the replay's half messages;
   * RESUME (marked in progress: the previous commit of this batch was cut short between the
     marks): look every UNIQ_KEY up in its topic (QUERY_MESSAGE by unique key on every broker of
     the topic, after waiting until each broker's index covers the replay's own half messages,
     which were stored after anything the cut-short commit made visible); roll back those
     found, commit the rest, mark done.

   ``abort`` rolls back every receipt it gets (None entries, failed tasks, are skipped: those
   rolled back themselves). A rollback or a repeated END for a resolved half message is a
   no-op on the broker, so ``commit`` after a partial ``abort`` and vice versa stay consistent.

Assumptions: a replayed batch has the same rows in the same partitions (deterministic plans, as
Spark's own exactly-once sinks need); one query per sink id; the marker is as durable as the
broker's consumer offsets (persisted every ``flushConsumerOffsetInterval`` and at shutdown), so a
broker *crash* together with a driver crash inside that interval can repeat a batch. RESUME needs
the brokers' message index (``messageIndexEnable``, on by default): without it the commit fails
after ``INDEX_WAIT_S`` rather than guess. A batch whose commit comes later than
``transactionTimeOut`` gets check-backs nobody answers; after ``transactionCheckMax`` of them a
copy of each half message goes to ``TRANS_CHECK_MAX_TIME_TOPIC``, but the END still applies to the
original as long as the CommitLog keeps it.

Limits. Exactly-once assumes a replayed batch yields the same rows in the same partitions: not
so if retention deleted source messages between the two attempts and the source runs with
``failOnDataLoss=false``. The marker lives on the first broker (by name) of the state topic in
the current route: changing that set of brokers between a crash and its replay moves the marker
elsewhere and defeats the replay check. A batch (non-streaming) exactly-once write is
all-or-nothing only when ``commit()`` completes: a driver crash mid-commit leaves the rest of
the half messages undecided, and so invisible for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from rocketlite.client.broker_api import BrokerApi
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.instance import ClientInstance
from rocketlite.client.message import Message, decode_messages
from rocketlite.client.producer import Producer, SendStatus
from rocketlite.client.transaction import HalfProducer, HalfReceipt
from rocketlite.formats.properties import UNIQ_KEY
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import QueryMessageRequestHeader
from rocketlite.spark.sink_rows import (
    BATCH_BYTES,
    MAX_ROWS_PER_TASK,
    PENDING_BYTES,
    Action,
    Marker,
    SinkError,
    Target,
    decide,
)

T = TypeVar("T")
END_ATTEMPTS = 3  # an END that got no answer is sent again (a repeat is a no-op on the broker)
INDEX_WAIT_S = 30.0  # how long RESUME waits for a broker's index to catch up
PROBE_KEY = "rocketlite-sink-index-probe"  # a lookup only for the index position in the reply


def _instance(producer: Producer) -> ClientInstance:
    if producer.instance is None:
        raise MQClientError("the producer is not started")
    return producer.instance


class Window:
    """At most ``size`` coroutines in flight; the first failure is raised by ``drain`` (and by
    the ``add`` that finds it), after the others in flight have finished."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.pending: set[asyncio.Task[None]] = set()
        self.error: BaseException | None = None

    async def add(self, coro: Awaitable[None]) -> None:
        if self.error is None and len(self.pending) >= self.size:
            await self._wait(asyncio.FIRST_COMPLETED)
        if self.error is not None:
            await self.drain()
        self.pending.add(asyncio.ensure_future(coro))
        await asyncio.sleep(0)  # let it write its request now

    async def _wait(self, when: str) -> None:
        done, self.pending = await asyncio.wait(self.pending, return_when=when)
        for t in done:
            if self.error is None and not t.cancelled() and t.exception() is not None:
                self.error = t.exception()

    async def drain(self) -> None:
        if self.pending:
            await self._wait(asyncio.ALL_COMPLETED)
        if self.error is not None:
            raise self.error

    async def settle(self, timeout: float) -> None:  # noqa: ASYNC109
        """After a failure elsewhere: let what is in flight finish (up to ``timeout``), without
        raising; its errors are retrieved (no "exception never retrieved" at loop close)."""
        if self.pending:
            done, self.pending = await asyncio.wait(self.pending, timeout=timeout)
            for t in done:
                if not t.cancelled():
                    t.exception()


class Queues:
    """A row's ``Target`` -> the MessageQueue it names (None: the producer picks)."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self._by_topic: dict[str, list[MessageQueue]] = {}

    async def resolve(self, target: Target, where: str) -> MessageQueue | None:
        if target.queue_id is None:
            return None
        queues = self._by_topic.get(target.topic)
        if queues is None:
            queues = self._by_topic[target.topic] = await self.producer.publish_queues(target.topic)
        for mq in queues:  # sorted by broker name: the first broker with that id unless named
            if mq.queueId == target.queue_id and target.broker_name in (None, mq.brokerName):
                return mq
        have = ", ".join(f"{q.brokerName}:{q.queueId}" for q in queues)
        raise SinkError(f"{where}: topic {target.topic!r} has no writable queue {target.queue_id}"
                        f"{'' if target.broker_name is None else ' on ' + target.broker_name}"
                        f" (it has {have})")


Row = tuple[Message, Target, str]  # message, target, where (for errors)


async def send_rows(producer: Producer, rows: Iterable[Row], *, batch_size: int, max_in_flight: int,
                    timeout: float, max_pending_bytes: int = PENDING_BYTES) -> int:  # noqa: ASYNC109
    """At-least-once: send every row, batched per target queue; how many were sent. The open
    batches hold at most ``max_pending_bytes`` of bodies together: past that the largest go."""
    queues = Queues(producer)
    window = Window(max_in_flight)
    groups: dict[tuple[str, MessageQueue | None], tuple[list[Message], list[int]]] = {}
    sent = 0
    pending = 0  # bodies in ``groups``

    async def send(msgs: list[Message], mq: MessageQueue | None) -> None:
        result = await producer.send_batch(msgs, mq, timeout=timeout)
        if result.status is not SendStatus.SEND_OK:
            raise MQClientError(f"a batch of {len(msgs)} to {result.queue} was stored with status "
                                f"{result.status.name}")

    try:
        for msg, target, where in rows:
            mq = await queues.resolve(target, where)
            key = (target.topic, mq)
            group = groups.get(key)
            if group is None:
                group = groups[key] = ([], [0])
            msgs, size = group
            msgs.append(msg)
            size[0] += len(msg.body)
            pending += len(msg.body)
            sent += 1
            if len(msgs) >= batch_size or size[0] >= BATCH_BYTES:
                del groups[key]
                pending -= size[0]
                await window.add(send(msgs, mq))
            while pending > max_pending_bytes:  # many queues, each with a batch not full yet
                big = max(groups, key=lambda k: groups[k][1][0])
                msgs, size = groups.pop(big)
                pending -= size[0]
                await window.add(send(msgs, big[1]))
        for (_topic, mq), (msgs, _size) in groups.items():
            await window.add(send(msgs, mq))
        await window.drain()
    except BaseException:  # a bad row: what is in flight completes (or fails) before the task ends
        await window.settle(timeout + 1)
        raise
    return sent


async def send_halves(producer: HalfProducer, rows: Iterable[Row], *, max_in_flight: int,
                      timeout: float, max_rows: int = MAX_ROWS_PER_TASK) -> list[HalfReceipt]:  # noqa: ASYNC109
    """Exactly-once, step 1: every row as a half message; the receipts in row order. On any
    failure, a row past ``max_rows`` included (the receipts are held in memory and shipped to
    the driver), the half messages already sent are rolled back (best effort) and the error
    raised."""
    queues = Queues(producer)
    window = Window(max_in_flight)
    receipts: list[HalfReceipt | None] = []

    async def send(i: int, msg: Message, mq: MessageQueue | None) -> None:
        r = await producer.send_half(msg, mq, timeout=timeout)
        receipts[i] = r
        if r.status is not SendStatus.SEND_OK:
            raise MQClientError(f"half message {r.msg_id} was stored with status {r.status.name}")

    try:
        for msg, target, where in rows:
            if len(receipts) >= max_rows:
                raise SinkError(
                    f"{where}: an exactly-once task may write at most maxRowsPerTask={max_rows} rows "
                    "(it keeps a receipt per row and sends them all to the driver); make the "
                    "batches smaller (e.g. the source's maxOffsetsPerTrigger) or spread them over "
                    "more partitions (repartition), or raise maxRowsPerTask")
            mq = await queues.resolve(target, where)
            receipts.append(None)
            await window.add(send(len(receipts) - 1, msg, mq))
        await window.drain()
    except BaseException:
        await window.settle(timeout + 1)  # sends in flight finish: their halves are rolled back too
        sent = [r for r in receipts if r is not None]
        with contextlib.suppress(MQClientError, MQBrokerError):  # undecided ones stay invisible
            await end_all(producer, sent, False, max_in_flight=max_in_flight, timeout=timeout)
        raise
    return [r for r in receipts if r is not None]


async def _retry(fn: Callable[[], Awaitable[T]], attempts: int) -> T:
    for i in range(attempts):
        try:
            return await fn()
        except MQClientError:  # no answer: maybe applied, maybe not; a repeat is harmless
            if i == attempts - 1:
                raise
    raise AssertionError("unreachable")


async def end_all(producer: HalfProducer, receipts: Sequence[HalfReceipt], commit: bool, *,
                  max_in_flight: int, timeout: float) -> None:  # noqa: ASYNC109
    """END_TRANSACTION (commit or rollback) for every receipt, ``max_in_flight`` at a time."""
    window = Window(max_in_flight)

    async def end(r: HalfReceipt) -> None:
        await _retry(lambda: producer.end(r, commit, timeout=timeout), END_ATTEMPTS)

    for r in receipts:
        await window.add(end(r))
    await window.drain()


# -- the marker and the lookups ----------------------------------------------------------------


class MarkerStore:
    """The sink's marker: the consumer offset of ``rocketlite-sink-<sinkId>`` on queue 0 of
    ``state_topic`` on the first (by name) broker serving it."""

    def __init__(self, producer: Producer, state_topic: str, sink_id: str) -> None:
        self.producer = producer
        self.state_topic = state_topic
        self.sink_id = sink_id
        self.group = f"rocketlite-sink-{sink_id}"
        self._mq: MessageQueue | None = None

    async def _queue(self) -> MessageQueue:
        if self._mq is None:
            inst = _instance(self.producer)
            route = await inst.update_route(self.state_topic)
            if route is None or not route.brokerDatas:
                raise SinkError(f"the state topic {self.state_topic!r} has no route: the exactly-once "
                                "sink keeps its commit marker there (create it or set stateTopic)")
            name = min(bd.brokerName for bd in route.brokerDatas)
            self._mq = MessageQueue(self.state_topic, name, 0)
        return self._mq

    async def read(self) -> Marker | None:
        api = BrokerApi(_instance(self.producer))
        value = await _retry(lambda: self._read(api), END_ATTEMPTS)
        return None if value is None else Marker.decode(value)

    async def _read(self, api: BrokerApi) -> int | None:
        return await api.query_offset(self.group, await self._queue())

    async def write(self, marker: Marker) -> None:
        api = BrokerApi(_instance(self.producer))
        mq = await self._queue()
        await _retry(lambda: api.update_offset(self.group, mq, marker.encode()), END_ATTEMPTS)


async def _query(producer: Producer, addr: str, topic: str, key: str) -> tuple[bool, int]:
    """Whether a message of ``topic`` with UNIQ_KEY ``key`` is on ``addr``, and how far that
    broker's index reached (CommitLog offset of its newest indexed message)."""
    header = QueryMessageRequestHeader(topic=topic, key=key, maxNum=1, beginTimestamp=0,
                                       endTimestamp=2**63 - 1, uniqueKeyQuery=True)
    cmd = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext())
    reply = await _instance(producer).invoke(addr, cmd)
    indexed = int(reply.ext_fields.get("indexLastUpdatePhyoffset", "0") or 0)
    if reply.code == ResponseCode.QUERY_NOT_FOUND:
        return False, indexed
    if reply.code != ResponseCode.SUCCESS:
        raise MQBrokerError(reply.code, reply.remark, addr)
    found = any(m.topic == topic and m.properties.get(UNIQ_KEY) == key
                for m in decode_messages(reply.body, verify_crc=False))
    return found, indexed


async def find_visible(producer: HalfProducer, receipts: Sequence[HalfReceipt], *,
                       max_in_flight: int) -> set[str]:
    """The UNIQ_KEYs of ``receipts`` already visible in their topics (on any of its brokers)."""
    inst = _instance(producer)
    brokers: dict[str, list[str]] = {}  # topic -> broker addresses
    for topic in {r.topic for r in receipts}:
        route = await inst.update_route(topic)
        addrs = [] if route is None else [a for bd in route.brokerDatas if (a := bd.brokerAddrs.get(0))]
        brokers[topic] = addrs
    need: dict[str, int] = {}  # addr -> the index must reach this (the replay's first half there)
    for r in receipts:
        need[r.broker_addr] = min(need.get(r.broker_addr, r.commit_log_offset), r.commit_log_offset)
    deadline = time.monotonic() + INDEX_WAIT_S
    for addr, offset in need.items():  # wait until each index covers what came before the replay
        while (await _query(producer, addr, receipts[0].topic, PROBE_KEY))[1] < offset:
            if time.monotonic() > deadline:
                raise MQClientError(f"the index of {addr} did not reach CommitLog offset {offset} in "
                                    f"{INDEX_WAIT_S:.0f} s: cannot tell what is visible already")
            await asyncio.sleep(0.05)
    visible: set[str] = set()
    window = Window(max_in_flight)

    async def look(r: HalfReceipt) -> None:
        for addr in brokers[r.topic] or [r.broker_addr]:
            if (await _query(producer, addr, r.topic, r.msg_id))[0]:
                visible.add(r.msg_id)
                return

    for r in receipts:
        await window.add(look(r))
    await window.drain()
    return visible


async def commit_exactly_once(producer: HalfProducer, receipts: Sequence[HalfReceipt], batch_id: int,
                              markers: MarkerStore, *, max_in_flight: int,
                              timeout: float) -> Action:  # noqa: ASYNC109
    """Exactly-once, step 2, for streaming batch ``batch_id`` (see the module docstring)."""
    action = decide(await markers.read(), batch_id, markers.sink_id)
    if action is Action.SKIP:
        await end_all(producer, receipts, False, max_in_flight=max_in_flight, timeout=timeout)
        return action
    if action is Action.RESUME:
        visible = await find_visible(producer, receipts, max_in_flight=max_in_flight)
        await end_all(producer, [r for r in receipts if r.msg_id in visible], False,
                      max_in_flight=max_in_flight, timeout=timeout)
        receipts = [r for r in receipts if r.msg_id not in visible]
    else:
        await markers.write(Marker(batch_id, done=False))
    await end_all(producer, receipts, True, max_in_flight=max_in_flight, timeout=timeout)
    await markers.write(Marker(batch_id, done=True))
    return action
