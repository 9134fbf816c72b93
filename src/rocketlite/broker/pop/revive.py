"""ReviveService: brings back the popped messages nobody acked (RocketMQ's ``PopReviveService``).

Every ``reviveInterval`` it reads each revive queue of ``rmq_sys_REVIVE_LOG_{cluster}`` from its
offset (group ``CID_RMQ_SYS_REVIVE_GROUP`` in the consumer offset table), keeps the CKs it read in
memory and sets their bits from the ack records that follow them. A CK whose revive time
(``pt + it``) is ``popAckTimeInterval`` behind now (room for acks still being dispatched) is
revived: each unacked message is read again and re-put to the POP retry topic (queue 0, created on
demand, reconsume times + 1), or to ``%DLQ%{group}`` once its reconsume times reached the group's
``retryMaxTimes``; a fully acked CK is dropped. The revive offset committed is the lowest offset of
a CK still pending, so after a crash or restart the pending CKs and their acks are read again; a CK
revived after that offset may be revived once more (at-least-once).

Bounded: at most ``popInflightMessageThreshold`` CKs pending per revive queue (reading stops there
until some are revived or acked), and at most ``MAX_SCAN`` records read per queue per round. A
record that is not RocketMQ's JSON is logged and skipped; a message already gone (retention) is
logged and dropped; a store that refuses writes leaves the CK pending for the next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_READ, PERM_WRITE
from rocketlite.broker.pop import messages as pm
from rocketlite.broker.pop.records import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    REVIVE_GROUP,
    AckMsg,
    PopCheckPoint,
    RecordError,
)
from rocketlite.broker.timer_divert import get_property
from rocketlite.broker.topics import TopicError
from rocketlite.common.errors import RocketliteError
from rocketlite.formats.message_record import MessageRecord, decode_record
from rocketlite.formats.properties import TAGS
from rocketlite.store.get_message import GetMessageStatus

if TYPE_CHECKING:
    from rocketlite.broker.pop.service import PopService

log = logging.getLogger(__name__)

MAX_SCAN = 4096
DISPATCH_WAITS, DISPATCH_WAIT_S = 200, 0.005  # up to 1 s for the dispatcher to catch up
READ_BATCH = 32
DEFAULT_RETRY_MAX_TIMES = 16
_MOVED = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY)

CkKey = tuple[str, str, int, int, int, str]


class ReviveService:
    def __init__(self, pop: PopService) -> None:
        self.pop = pop
        n = pop.config.revive_queue_num
        self.pending: list[dict[CkKey, PopCheckPoint]] = [{} for _ in range(n)]
        self.read_offset: list[int | None] = [None] * n
        self.revived = 0  # messages re-put to a retry topic
        self.dead = 0  # messages moved to a DLQ
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="pop-revive")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        interval = self.pop.config.revive_interval / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.round()
            except Exception:  # one bad round must not end reviving for good
                log.exception("revive round failed")
            self.pop.fifo.expire(self.pop.clock())
            self.pop.persist_order_info()

    async def round(self) -> int:
        """One round, once every record appended before it is readable (the acks written
        before a CK came due must be seen with it); the messages revived."""
        now = self.pop.clock()
        dispatcher = self.pop.store.dispatcher
        end = dispatcher.limit()
        for _ in range(DISPATCH_WAITS):
            if dispatcher.dispatch_from >= end:
                done = 0
                for qid in range(len(self.pending)):
                    done += self.scan(qid, now)
                    await asyncio.sleep(0)  # the loop serves requests between queues
                return done
            await asyncio.sleep(DISPATCH_WAIT_S)
        log.warning("revive round skipped: the dispatcher is behind the CommitLog")
        return 0

    def scan_all(self, now: int | None = None) -> int:
        """One round over every revive queue as dispatched so far; the messages revived
        (retry or DLQ)."""
        t = self.pop.clock() if now is None else now
        return sum(self.scan(qid, t) for qid in range(len(self.pending)))

    def scan(self, qid: int, now: int) -> int:
        store, offsets, topic = self.pop.store, self.pop.broker.offsets, self.pop.revive_topic
        off = self.read_offset[qid]
        if off is None:
            off = offsets.query(REVIVE_GROUP, topic, qid)
            if off < 0:
                off = store.min_offset_in_queue(topic, qid)
        pending = self.pending[qid]
        limit = self.pop.config.pop_inflight_message_threshold
        budget = MAX_SCAN
        while len(pending) < limit and budget > 0:
            # each record adds at most one CK: never read past the threshold
            res = store.get_message(topic, qid, off, min(READ_BATCH, budget, limit - len(pending)))
            if res.status in _MOVED:
                off = res.next_begin_offset
                continue
            if not res.sizes:
                break
            pos = 0
            for size in res.sizes:
                rec = decode_record(res.body, pos)
                pos += size
                if rec is not None:
                    self._take(pending, rec)
            off = res.next_begin_offset
            budget -= len(res.sizes)
        self.read_offset[qid] = off
        due = now - self.pop.config.pop_ack_time_interval
        done = 0
        for key, ck in sorted(pending.items(), key=lambda kv: kv[1].revive_offset):
            if ck.revive_time > due:
                continue
            try:
                done += self._revive(ck)
            except RocketliteError as e:
                log.warning("reviving %s:%d@%d of %s waits: %s", ck.topic, ck.queue_id,
                            ck.start_offset, ck.cid, e)
                break
            del pending[key]
        commit = min((ck.revive_offset for ck in pending.values()), default=off)
        if commit != offsets.query(REVIVE_GROUP, topic, qid):  # an idle round writes nothing
            offsets.commit(REVIVE_GROUP, topic, qid, commit)
        return done

    def _take(self, pending: dict[CkKey, PopCheckPoint], rec: MessageRecord) -> None:
        tag = get_property(rec.properties_text, TAGS)
        try:
            if tag == CK_TAG:
                ck = PopCheckPoint.from_json(rec.body)
                ck.revive_offset = rec.queue_offset
                pending.setdefault(ck.key, ck)
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                ack = AckMsg.from_json(rec.body)
                found = pending.get(ack.key)
                if found is None:
                    return  # its CK was revived or is before the committed offset
                for o in ack.offsets:
                    i = found.index_of(o)
                    if i >= 0:
                        found.set_acked(i)
                if found.all_acked:
                    del pending[ack.key]
            else:
                log.warning("revive queue %d@%d: record with tag %r ignored", rec.queue_id,
                            rec.queue_offset, tag)
        except RecordError as e:
            log.warning("revive queue %d@%d: %s; skipped", rec.queue_id, rec.queue_offset, e)

    def _revive(self, ck: PopCheckPoint) -> int:
        pop = self.pop
        sgc = pop.broker.subscriptions.table.get(ck.cid)
        max_times = sgc.retryMaxTimes if sgc is not None else DEFAULT_RETRY_MAX_TIMES
        n = 0
        for i, off in enumerate(ck.offsets):
            if ck.acked(i):
                continue
            rec = pm.read_one(pop.store, ck.topic, ck.queue_id, off)
            if rec is None:
                log.warning("popped message %s:%d@%d of %s is gone; not revived", ck.topic,
                            ck.queue_id, off, ck.cid)
            elif rec.reconsume_times >= max_times:
                pop.put_dead_letter(ck.cid, ck.topic, rec)
                self.dead += 1
                n += 1
            else:
                msg = pm.retry_message(rec, ck)
                try:
                    pop.broker.topics.create_plain(msg.topic, 1, PERM_READ | PERM_WRITE)
                except TopicError as e:  # e.g. group and topic too long for one topic name
                    log.error("no POP retry topic for %s: %s; the message goes to the DLQ",
                              ck.cid, e)
                    pop.put_dead_letter(ck.cid, ck.topic, rec)
                    self.dead += 1
                else:
                    pop.store.put_messages((msg,))
                    self.revived += 1
                n += 1
            ck.set_acked(i)  # a failure further on must not re-put this one
        return n
