"""The check-back service (RocketMQ 4.9's ``TransactionalMessageCheckService`` running
``TransactionalMessageServiceImpl.check``): every ``transactionCheckInterval`` it asks the
producers about half messages left undecided for longer than ``transactionTimeOut``.

One round, on the broker's event loop (it sends on producer connections, and the reads and
appends are memory copies, as the send path's):

1. The progress is two consumer offsets of group ``CID_RMQ_SYS_TRANS`` in ``broker.offsets``
   (persisted with the others, as Java keeps them): the half queue offset before which every half
   message is done (resolved, re-put or discarded), and the op queue offset before which every
   op record refers to such a message.
2. Walk the half queue from its offset. A message is resolved when an op record names its queue
   offset (the op queue is read lazily, and to its end before anything is called undecided) or
   when this run resolved it or the message it is a re-put copy of (``TRAN_PREPARED_QUEUE_OFFSET``).
3. Stop at a message stored after the round began or younger than its immunity
   (``transactionTimeOut``, or the producer's ``CHECK_IMMUNITY_TIME_IN_SECONDS``): the queue is
   in arrival order, so the rest is younger still (so a young head costs no op queue reads).
4. An undecided message checked ``transactionCheckMax`` times already goes to the readable
   ``TRANS_CHECK_MAX_TIME_TOPIC``. Otherwise a copy with ``TRANSACTION_CHECK_TIMES`` + 1 is put at
   the end of the half queue (``putBackHalfMsgQueue``: the original stays immutable and the scan
   moves on) and CHECK_TRANSACTION_STATE (oneway) goes to one live channel of its producer
   group (a ``ProducerChannel``: a Remoting connection or a 5.x client's Telemetry stream),
   naming the copy's offsets, with the copy's record as the body. With no producer online the
   check counts all the same and is retried next round, so a vanished group's messages end
   in the check-max topic instead of being re-put forever (Java does the same).
5. Commit both offsets (the op offset moves over the contiguous op records of done messages).

Work per round is bounded (``MAX_SCAN`` messages, ``MAX_ROUND_S`` of loop time for half and op
reads alike, yielding every ``YIELD_EVERY`` messages); the rest waits for the next round.
Delivery is at least once, as in Java: a producer that commits on its own after its message was
re-put may be asked about the copy after a restart (this run remembers such resolutions and does
not ask).

Not done (Java 4.9 does): the re-put of a still-immune message carrying
``CHECK_IMMUNITY_TIME_IN_SECONDS`` (here the scan simply waits for it), and discarding messages
older than ``fileReservedTime``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rocketlite.broker.timer_divert import parse_int
from rocketlite.broker.transaction.half import (
    CHECK_GROUP,
    CHECK_IMMUNITY_TIME_IN_SECONDS,
    CHECK_MAX_QUEUE_NUMS,
    HALF_QUEUE_ID,
    PREPARED_QUEUE_OFFSET,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    check_max_message,
    check_times,
    get_property,
    parse_op_offsets,
    producer_group,
    real_destination,
    renew_half_message,
)
from rocketlite.common.errors import DiskFullError, FlushError, RocketliteError, StoreClosedError
from rocketlite.formats.message_record import MessageRecord
from rocketlite.formats.properties import UNIQ_KEY
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import CheckTransactionStateRequestHeader

if TYPE_CHECKING:
    from rocketlite.broker.transaction.service import TransactionalMessageService

log = logging.getLogger(__name__)

MAX_SCAN = 10_000  # half messages looked at per round
MAX_ROUND_S = 0.5  # loop time per round
YIELD_EVERY = 256  # messages between yields to the loop
OP_BATCH = 256  # op units read at a time
HALF_BATCH = 256  # half units read at a time


@runtime_checkable
class ProducerChannel(Protocol):
    """What a check needs of a producer's channel: a Remoting ``Connection``, or the gRPC
    front's ``TelemetryChannel`` (which turns CHECK_TRANSACTION_STATE into the 5.x client's
    RecoverOrphanedTransactionCommand)."""

    @property
    def is_open(self) -> bool: ...

    def send_oneway(self, cmd: RemotingCommand) -> None: ...


@dataclasses.dataclass(slots=True)
class CheckStats:
    rounds: int = 0
    checks_sent: int = 0  # CHECK_TRANSACTION_STATE requests written to a producer
    no_producer: int = 0  # checks that found no live producer connection of the group
    re_put: int = 0  # copies written back to the half queue
    check_max: int = 0  # messages moved to TRANS_CHECK_MAX_TIME_TOPIC
    unreadable: int = 0  # half or op records that could not be read (skipped, logged)


class _OpReader:
    """Reads the op queue from the processed op offset on, mapping each resolved half offset to
    the op queue offset that says so."""

    def __init__(self, svc: TransactionalMessageService, start: int) -> None:
        self.svc = svc
        self.cq = svc.store.find_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        self.pos = start
        self.removed: dict[int, int] = {}  # half queue offset -> op queue offset
        self.unparsable: set[int] = set()  # op queue offsets naming nothing (count as done)

    @property
    def exhausted(self) -> bool:
        return self.cq is None or self.pos >= self.cq.max_offset

    def read_more(self) -> None:
        cq = self.cq
        if cq is None:
            return
        units = cq.get_units(self.pos, OP_BATCH)
        if not units:  # a hole (retention) or a segment end without a next: give up this round
            self.pos = cq.max_offset
            return
        for phys, _size, _tag in units:
            rec = _read(self.svc, phys)
            halves = parse_op_offsets(rec) if rec is not None else []
            if not halves:
                self.unparsable.add(self.pos)
            for h in halves:
                self.removed[h] = self.pos
                self.svc.mark_resolved(h)
            self.pos += 1

    def resolves(self, half_offset: int, deadline: float) -> bool | None:
        """Whether an op record names ``half_offset``, reading on to the op queue's end when
        needed (a message is called undecided only then); None if ``deadline`` (monotonic)
        passed first."""
        while half_offset not in self.removed and not self.exhausted:
            if time.monotonic() >= deadline:
                return None
            self.read_more()
        return half_offset in self.removed


class TransactionCheckService:
    def __init__(self, service: TransactionalMessageService) -> None:
        self.service = service
        cfg = service.broker.config
        self.timeout_ms = cfg.transaction_time_out
        self.interval_s = cfg.transaction_check_interval / 1000
        self.check_max = cfg.transaction_check_max
        self.stats = CheckStats()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="broker-transaction-check")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check_round()
            except (DiskFullError, FlushError, StoreClosedError) as e:
                log.warning("transaction check round stopped: %s", e)
            except Exception:  # one bad round must not end the checks for good
                log.exception("transaction check round failed")

    # -- one round ---------------------------------------------------------------------------

    async def check_round(self) -> int:
        """One round (see the module docstring); returns how many half messages it finished."""
        svc = self.service
        store, offsets = svc.store, svc.broker.offsets
        half_cq = store.find_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        if half_cq is None:
            return 0
        self.stats.rounds += 1
        start_ms = svc.clock()
        deadline = time.monotonic() + MAX_ROUND_S
        lo, hi = half_cq.min_offset, half_cq.max_offset
        half_start = _clamp(svc.processed_offset(), lo, hi)
        op_cq = store.find_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        op_start = offsets.query(CHECK_GROUP, TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        if op_cq is not None:
            op_start = _clamp(op_start, op_cq.min_offset, op_cq.max_offset)
        op_start = max(op_start, 0)
        ops = _OpReader(svc, op_start)
        i = half_start
        phys_of: dict[int, int] = {}  # half queue offset -> CommitLog offset, read in batches
        while i < hi and i - half_start < MAX_SCAN and time.monotonic() < deadline:
            if (i - half_start) % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
            if i in svc.deciding:
                break  # its decision is not stored yet: if that append fails it is undecided
            if i in svc.resolved or i in ops.removed:  # known resolved: no read needed
                i += 1
                continue
            if i not in phys_of:
                phys_of = {i + k: u[0] for k, u in
                           enumerate(half_cq.get_units(i, min(HALF_BATCH, hi - i)))}
            rec = self._read_half(i, phys_of.get(i))
            if rec is not None and svc.is_deciding(rec):
                break
            if rec is None or svc.is_resolved(rec):  # unreadable, or a copy resolved this run
                i += 1
                continue
            if self._too_young(rec, start_ms):
                break  # the rest is younger still; their op records are read when they are due
            resolved = ops.resolves(i, deadline)
            if resolved is None:
                break  # out of time reading the op queue: go on from here next round
            if resolved or svc.is_resolved(rec):  # the op records named it or its original
                i += 1
                continue
            times = check_times(rec)
            if times >= self.check_max:
                await self._to_check_max(rec)
            elif not await self._check(rec, times + 1, i):
                break  # the re-put failed: retry from here next round
            i += 1
        self._commit_progress(half_start, i, ops, op_start)
        svc.prune_resolved()
        return i - half_start

    def _read_half(self, offset: int, phys: int | None) -> MessageRecord | None:
        rec = _read(self.service, phys) if phys is not None else None
        if rec is None or rec.topic != TRANS_HALF_TOPIC or rec.queue_offset != offset:
            log.warning("transaction check: half message %d (CommitLog %s) unreadable; skipped",
                        offset, phys)
            self.stats.unreadable += 1
            return None
        return rec

    def _commit_progress(self, half_start: int, half_end: int, ops: _OpReader,
                         op_start: int) -> None:
        """Move both offsets; op records are done once the half message they name is, and the
        op offset moves over their contiguous run."""
        offsets = self.service.broker.offsets
        done = ops.unparsable | {op for h, op in ops.removed.items() if h < half_end}
        op_end = op_start
        while op_end in done:
            op_end += 1
        if half_end != half_start:
            offsets.commit(CHECK_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE_ID, half_end)
        if op_end != op_start:
            offsets.commit(CHECK_GROUP, TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, op_end)

    def _too_young(self, rec: MessageRecord, start_ms: int) -> bool:
        """Stored after the round began, or not older than its immunity (``getImmunityTime``:
        the producer's CHECK_IMMUNITY_TIME_IN_SECONDS in ms when it set one, else
        ``transactionTimeOut``). A born time in the future (a producer's clock ahead) is checked
        at once, as Java does."""
        if rec.store_timestamp >= start_ms:
            return True
        secs = parse_int(get_property(rec.properties_text, CHECK_IMMUNITY_TIME_IN_SECONDS))
        immunity = secs * 1000 if secs is not None and secs >= 0 else self.timeout_ms
        return 0 <= start_ms - rec.born_timestamp < immunity

    async def _to_check_max(self, rec: MessageRecord) -> None:
        """``resolveDiscardMsg``: keep the message readable where an operator can look."""
        topics = self.service.broker.topics
        if topics.get(TRANS_CHECK_MAX_TIME_TOPIC) is None:
            topics.create_plain(TRANS_CHECK_MAX_TIME_TOPIC, CHECK_MAX_QUEUE_NUMS)
        await self.service.put([check_max_message(rec)])
        self.stats.check_max += 1
        log.warning("half message %s of group %s (queue offset %d) was checked %d times without "
                    "a decision: moved to %s", get_property(rec.properties_text, UNIQ_KEY),
                    producer_group(rec), rec.queue_offset, check_times(rec),
                    TRANS_CHECK_MAX_TIME_TOPIC)

    async def _check(self, rec: MessageRecord, times: int, half_offset: int) -> bool:
        """Re-put ``rec`` as check number ``times`` and ask one producer about the copy; False
        if the copy could not be stored."""
        svc = self.service
        root = parse_int(get_property(rec.properties_text, PREPARED_QUEUE_OFFSET))
        copy = renew_half_message(rec, times, half_offset if root is None else root)
        try:
            res = (await svc.put([copy]))[0]
        except RocketliteError as e:
            log.warning("transaction check: re-putting half message %d failed: %s", half_offset, e)
            return False
        self.stats.re_put += 1
        if svc.is_resolved(rec):  # the producer decided while the copy was written
            svc.mark_resolved(res.queue_offset)
            return True
        group = producer_group(rec) or ""
        live = [ch for ch in svc.broker.producers.channels(group)
                if isinstance(ch, ProducerChannel) and ch.is_open]
        if not live:
            self.stats.no_producer += 1
            log.warning("transaction check: no producer of group %r online for half message %d "
                        "(check %d of %d); retried next round", group, half_offset, times,
                        self.check_max)
            return True
        dest = real_destination(rec)
        topic, qid = dest if dest is not None else (rec.topic, rec.queue_id)
        uniq = get_property(rec.properties_text, UNIQ_KEY)
        header = CheckTransactionStateRequestHeader(
            tranStateTableOffset=res.queue_offset, commitLogOffset=res.commit_log_offset,
            topic=topic, msgId=uniq, transactionId=uniq,
            offsetMsgId=svc.store.message_id(res.commit_log_offset),
        )
        body = dataclasses.replace(
            rec, topic=topic, queue_id=qid, queue_offset=res.queue_offset,
            commit_log_offset=res.commit_log_offset, properties_text=copy.properties,
            store_timestamp=res.store_timestamp,
        ).encode()
        random.choice(live).send_oneway(RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), body))
        self.stats.checks_sent += 1
        return True


def _clamp(offset: int, lo: int, hi: int) -> int:
    return lo if offset < lo else min(offset, hi)


def _read(svc: TransactionalMessageService, phys: int) -> MessageRecord | None:
    try:
        return svc.store.look_message(phys)
    except RocketliteError as e:
        log.warning("transaction: the record at CommitLog offset %d cannot be read: %s", phys, e)
        return None
