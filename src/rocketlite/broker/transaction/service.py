"""TransactionalMessageService: the broker's transactional-message component (S20), composed of
the half-message diverter (``half.divert_half``), the END_TRANSACTION processor (``end.py``) and
the check-back service (``check.py``).

It owns what those share: the store puts (on the broker's event loop, as the send path appends,
waiting for the group commit under SYNC_FLUSH), the op records, and ``resolved``, the half queue
offsets resolved in this run at or after the check's processed offset. ``resolved`` makes a
repeated END_TRANSACTION for the same half message (a producer's retry, or its answer to a check
racing its own end) a no-op instead of a second commit; the op queue remains the durable record.

So that this holds across a restart too (a producer that retries an END whose first attempt was
applied just before the broker went down, or a Spark sink replaying its commit), the first END of
a run loads the op records from the check's op progress on into ``resolved``
(``load_resolutions``): every op record naming a half message the check has not yet passed lies
there (the check's op offset only moves over records of messages it passed). A half message the
check has passed was resolved long ago (older than ``transactionTimeOut`` when passed) or re-put;
an END naming a re-put copy is remembered under the copy's offset only, so after a restart an END
naming the original of such a copy is applied again (check-backs answer for copies; producers
that never answer checks, like the Spark sink, always name originals).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from rocketlite.broker.timer_divert import parse_int
from rocketlite.broker.transaction.check import TransactionCheckService
from rocketlite.broker.transaction.end import EndTransactionProcessor
from rocketlite.broker.transaction.half import (
    CHECK_GROUP,
    HALF_QUEUE_ID,
    PREPARED_QUEUE_OFFSET,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    divert_half,
    get_property,
    op_message,
    parse_op_offsets,
)
from rocketlite.common.errors import (
    FlushError,
    FlushTimeoutError,
    NoPermissionError,
    RocketliteError,
)
from rocketlite.formats.message_record import MessageRecord
from rocketlite.store.commitlog import now_ms
from rocketlite.store.message import AppendResult, MessageToStore

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

MAX_RESOLVED = 65_536  # remembered resolutions (the op queue is the durable record)


class TransactionalMessageService:
    """See the module docstring. ``clock`` is injectable for tests."""

    def __init__(self, broker: Broker, clock: Callable[[], int] = now_ms) -> None:
        self.broker = broker
        self.store = broker.store
        self.clock = clock
        self.resolved: set[int] = set()
        # Resolved, but the final message and op record still wait for the END batch's append
        # (``end.py``): the check stops there, so a failed append leaves them to be checked.
        self.deciding: set[int] = set()
        self.end = EndTransactionProcessor(self)
        self.check = TransactionCheckService(self)
        self._loaded = False

    # -- broker hooks ------------------------------------------------------------------------

    def divert(self, msg: MessageToStore) -> MessageToStore | None:
        """The broker diverter (index 0: ahead of the timer and delay diverters, which must not
        touch a prepared message). With ``rejectTransactionMessage`` a prepared message raises
        ``NoPermissionError`` (the send answers NO_PERMISSION, as Java's SendMessageProcessor)."""
        half = divert_half(msg)
        if half is not None and self.broker.config.reject_transaction_message:
            raise NoPermissionError(f"the broker[{self.broker.config.broker_name}] sending "
                                    "transaction message is forbidden")
        return half

    def register(self) -> None:
        self.end.register()

    def start(self) -> None:
        """Start the check-back service, on a master only (as Java: a slave's half queue is a
        replica, its master asks the producers)."""
        if not self.broker.slave:
            self.check.start()

    async def stop(self) -> None:
        await self.check.stop()
        await self.end.drain()

    # -- shared ------------------------------------------------------------------------------

    def processed_offset(self) -> int:
        """The half queue offset before which every half message was resolved, re-put or
        discarded (the offset of ``CID_RMQ_SYS_TRANS`` on the half queue, as Java keeps it; 0
        before the first round committed one)."""
        return max(self.broker.offsets.query(CHECK_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE_ID), 0)

    async def put(self, msgs: Sequence[MessageToStore]) -> list[AppendResult]:
        """Store ``msgs`` and, under SYNC_FLUSH, wait for their group commit (``wait_flushed``).
        Store errors propagate (the caller maps them to codes)."""
        put = self.store.put_messages(msgs)
        self.broker.stats.put_messages += len(msgs)
        if put.flushed is not None:
            await self.wait_flushed(put.flushed, len(msgs))
        return put.results

    async def wait_flushed(self, flushed: Future[None], count: int) -> None:
        """Wait for a group commit. A flush timeout or failure is logged and the messages count
        as stored (they are in the CommitLog): Java's END_TRANSACTION answers SUCCESS on
        FLUSH_DISK_TIMEOUT too, and a failed disk refuses the next writes anyway."""
        timeout = self.store.config.sync_flush_timeout / 1000
        try:
            async with asyncio.timeout(timeout):
                await asyncio.wrap_future(flushed)
        except (TimeoutError, FlushTimeoutError):
            log.warning("transaction: %d messages stored but not flushed within %g s", count,
                        timeout)
        except FlushError as e:
            log.error("transaction: %d messages stored but the flush failed: %s", count, e)

    def op(self, half_queue_offset: int) -> MessageToStore:
        cl = self.store.commitlog
        return op_message(half_queue_offset, self.clock(), cl.store_host, cl.store_port)

    def load_resolutions(self) -> int:
        """Once per run: the half offsets named by op records from the check's op progress on
        (at most the newest ``MAX_RESOLVED``) into ``resolved``; how many records were read.
        See the module docstring."""
        if self._loaded:
            return 0
        self._loaded = True
        cq = self.store.find_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        if cq is None:
            return 0
        end = cq.max_offset
        pos = max(self.broker.offsets.query(CHECK_GROUP, TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID),
                  cq.min_offset, end - MAX_RESOLVED)
        start = pos
        while pos < end:
            units = cq.get_units(pos, 256)
            if not units:
                break
            for phys, _size, _tag in units:
                try:
                    rec = self.store.look_message(phys)
                except RocketliteError as e:
                    log.warning("transaction: op record at CommitLog offset %d unreadable: %s", phys, e)
                    continue
                if rec is not None:
                    self.resolved.update(parse_op_offsets(rec))
            pos += len(units)
        return pos - start

    def mark_resolved(self, half_queue_offset: int) -> None:
        self.resolved.add(half_queue_offset)

    def resolution_keys(self, rec: MessageRecord) -> list[int]:
        """The half offsets a decision on ``rec`` settles: its own and, for a re-put copy, the
        original's (which every other copy names too)."""
        original = parse_int(get_property(rec.properties_text, PREPARED_QUEUE_OFFSET))
        return [rec.queue_offset] if original is None else [rec.queue_offset, original]

    def is_resolved(self, rec: MessageRecord) -> bool:
        """Whether this run saw a decision on half record ``rec`` or on the message it is a
        re-put copy of (the producer may answer for either)."""
        if rec.queue_offset in self.resolved:
            return True
        original = parse_int(get_property(rec.properties_text, PREPARED_QUEUE_OFFSET))
        return original is not None and original in self.resolved

    def is_deciding(self, rec: MessageRecord) -> bool:
        """Whether a decision on ``rec`` (or on its original) waits for its append."""
        if not self.deciding:
            return False
        original = parse_int(get_property(rec.properties_text, PREPARED_QUEUE_OFFSET))
        return rec.queue_offset in self.deciding or original in self.deciding

    def prune_resolved(self) -> None:
        """Bound the memory: past ``MAX_RESOLVED`` entries keep the newest half."""
        if len(self.resolved) > MAX_RESOLVED:
            keep = sorted(self.resolved)[len(self.resolved) - MAX_RESOLVED // 2:]
            self.resolved = set(keep)
