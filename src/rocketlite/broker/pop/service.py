"""PopService: RocketMQ 5's POP consumption in the broker, the API under the Remoting processor
(``processor.py``) and the gRPC front. No Remoting types here; errors are ``pop.errors``.

Pop (unordered): for each queue read (one, or with queue id -1 every readable queue of the topic
from a rotating start, and the group's retry topic ``%RETRY%{group}_{topic}``: first with
``popFromRetryProbability`` percent, else to top up a batch that is not full), messages from the
group's consumer offset are taken (tags filtered by hash, then by string), a checkpoint (CK) is
written to revive queue ``reviveQid`` of ``rmq_sys_REVIVE_LOG_{cluster}``, and the consumer offset
moves past them at once. Each message gets a receipt handle (RocketMQ's extraInfo) and is invisible
until ``popTime + invisibleTime``. An ack writes an ack record to the same revive queue; the revive
service (``revive.py``) re-puts every message whose CK came due unacked to the retry topic with
one more reconsume time (or to ``%DLQ%{group}`` past the group's ``retryMaxTimes``). Delivery is
at-least-once: an ack lost in a crash, or written after the revive scan passed, brings a message
back once more.

Orderly pops (``fifo=True``) write no CK: one batch per queue per group is in flight, the offset is
committed when all of it is acked, and an expired batch is re-delivered in order from the
committed offset (``fifo.py``); a message delivered ``retryMaxTimes`` times more goes to the DLQ.

Acks and changes: a handle whose invisible time is over is refused with ``ReceiptHandleExpired``
(Remoting: NO_MESSAGE): its message is being, or has been, revived. ``change_invisible`` writes a
new one-message CK and acks the old handle (RocketMQ's order), returning the new handle.

4.x consumers on the same group: pop and pull share the group's consumer offset table entries
(``topic@group``), so a group should consume a topic one way at a time; POP retries go to its own
retry topic ``%RETRY%{group}_{topic}``, 4.x retries to ``%RETRY%{group}``, so neither sees the
other's. Limits: 32 messages a pop (RocketMQ's), a handle of 512 characters, the long-poll bounds
of ``polling.py``, the revive service's ``popInflightMessageThreshold``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rocketlite.broker import config_file
from rocketlite.broker.config import PERM_READ, PERM_WRITE
from rocketlite.broker.pop import acks
from rocketlite.broker.pop import messages as pm
from rocketlite.broker.pop.errors import (
    BadPopRequest,
    GroupNotFound,
    NoPermission,
    PollingFull,
    PopError,
    TopicNotFound,
)
from rocketlite.broker.pop.fifo import FifoState, OrderKey
from rocketlite.broker.pop.polling import PopPolling
from rocketlite.broker.pop.records import MAX_CK_NUM, PopCheckPoint, revive_topic
from rocketlite.broker.pop.revive import ReviveService
from rocketlite.broker.send_back import DLQ_NUMS_PER_GROUP, dlq_topic
from rocketlite.broker.timer_divert import get_property
from rocketlite.common.errors import ConfigError
from rocketlite.formats.message_record import MessageRecord, decode_record
from rocketlite.formats.properties import TAGS
from rocketlite.protocol.bodies import SubscriptionData
from rocketlite.protocol.pop_info import (
    ORDER_REVIVE_QUEUE,
    RETRY_NONE,
    RETRY_V1,
    ReceiptHandle,
    pop_retry_topic,
)
from rocketlite.store.get_message import GetMessageStatus
from rocketlite.store.message import MessageToStore

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker
    from rocketlite.broker.subscriptions import SubscriptionGroupConfig

log = logging.getLogger(__name__)

INIT_LAST, INIT_MIN = 0, 1  # ConsumeInitMode
MAX_POLL_MS = 60_000
ORDER_INFO_FILE = "popOrderInfo.json"
_MOVED = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class PopStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


@dataclass(frozen=True, slots=True)
class PoppedMessage:
    record: MessageRecord  # the stored record as read (a retry's record from the retry topic)
    topic: str  # the topic the consumer asked for
    queue_id: int  # the queue it was popped from (``record.topic`` says which topic)
    queue_offset: int
    receipt_handle: str
    delivery_attempt: int
    invisible_until_ms: int


@dataclass(frozen=True, slots=True)
class PopResult:
    status: PopStatus
    messages: list[PoppedMessage]
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    # What a Remoting reply's headers carry: (retry, queue, start offset) per queue read.
    start_offsets: tuple[tuple[bool, int, int], ...] = ()


@dataclass(slots=True)
class _Pop:
    """One pop call's state while it reads its queues."""

    group: str
    topic: str
    max_nums: int
    invisible_ms: int
    sub: SubscriptionData
    fifo: bool
    init_mode: int
    pop_time: int
    revive_qid: int
    sgc: SubscriptionGroupConfig
    out: list[PoppedMessage]
    starts: list[tuple[bool, int, int]]
    writes: list[MessageToStore]  # the CKs
    commits: list[tuple[str, int, int]] = field(default_factory=list)  # once the CKs are stored
    attempt_id: str | None = None
    rest: int = 0


class PopService:
    def __init__(self, broker: Broker, clock: Callable[[], int] = now_ms) -> None:
        self.broker = broker
        self.store = broker.store
        self.config = broker.config
        self.clock = clock
        self.revive_topic = revive_topic(broker.config.broker_cluster_name)
        self.polling = PopPolling(broker.config.pop_polling_size,
                                  broker.config.max_pop_polling_size)
        self.fifo = FifoState()
        self.revive = ReviveService(self)
        self._counter = 0  # picks the revive queue of each unordered pop
        self._rotation = 0  # the first queue a pop of every queue reads
        self._fifo_timers: dict[OrderKey, asyncio.TimerHandle] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def create_revive_topic(self) -> None:
        n = self.config.revive_queue_num
        tc = self.broker.topics.create_plain(self.revive_topic, n, PERM_READ | PERM_WRITE)
        if tc.readQueueNums < n:
            log.warning("revive topic %s has %d queues, reviveQueueNum is %d", self.revive_topic,
                        tc.readQueueNums, n)

    @property
    def order_info_path(self) -> Path:
        return self.broker.store_config.config_dir / ORDER_INFO_FILE

    def persist_order_info(self, force: bool = False) -> None:
        """Write the FIFO order state if it changed (every revive round, and at stop)."""
        if force or self.fifo.dirty:
            config_file.save_or_log(self.order_info_path, self.fifo.encode())

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            obj = config_file.load(self.order_info_path)
        except ConfigError as e:  # derived state: lose it rather than refuse to start
            log.error("%s; FIFO batches in flight are re-delivered at once", e)
            obj = None
        if obj is not None:
            self.fifo.load(obj, str(self.order_info_path))
        self.create_revive_topic()
        self.polling.start(loop)
        self.store.dispatcher.listeners.append(self.polling.on_dispatched)
        if not self.store.slave:  # revive writes retries: a master's work (as in Java)
            self.revive.start()

    async def stop(self) -> None:
        self.polling.release_all()
        for h in self._fifo_timers.values():
            h.cancel()
        self._fifo_timers.clear()
        await self.revive.stop()
        self.persist_order_info(force=True)

    # -- checks ----------------------------------------------------------------------------

    def _group(self, group: str) -> SubscriptionGroupConfig:
        sgc = self.broker.subscriptions.get(group)
        if sgc is None:
            raise GroupNotFound(self.broker.subscriptions.missing(
                group, f"subscription group [{group}] does not exist"))
        if not sgc.consumeEnable:
            raise NoPermission(f"subscription group [{group}] may not consume")
        return sgc

    def _topic_check(self, topic: str) -> int:
        if not self.config.broker_permission & PERM_READ:
            raise NoPermission(f"the broker[{self.config.broker_name}] pop is forbidden")
        tc = self.broker.topics.get(topic)
        if tc is None:
            raise TopicNotFound(f"topic[{topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            raise NoPermission(f"the topic[{topic}] peeking message is forbidden")
        return tc.readQueueNums

    # -- pop -------------------------------------------------------------------------------

    async def pop(self, group: str, topic: str, queue_id: int, max_nums: int, invisible_ms: int,
                  poll_ms: int, subscription: SubscriptionData, fifo: bool = False,
                  init_mode: int = 0, attempt_id: str | None = None) -> PopResult:
        """Pop up to ``max_nums`` messages, long-polling up to ``poll_ms`` when none is visible.
        ``attempt_id``: an orderly pop repeated with the attempt id of the batch in flight (a
        client that never got the reply) gets that batch again instead of a blocked queue, and
        the repeat does not count as a delivery (RocketMQ's ``ConsumerOrderInfoManager``)."""
        queues = self._topic_check(topic)
        sgc = self._group(group)
        if queue_id != -1 and not 0 <= queue_id < queues:
            raise BadPopRequest(f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                f"topicConfig.readQueueNums:[{queues}]")
        if not 0 < max_nums <= MAX_CK_NUM:
            raise BadPopRequest(f"maxMsgNums {max_nums}: must be within 1..{MAX_CK_NUM}")
        acks.check_invisible(invisible_ms)
        if subscription.expressionType not in ("", "TAG"):
            raise BadPopRequest(f"the broker does not support filtering by "
                                f"{subscription.expressionType}")
        sub = subscription.with_codes()
        poll_ms = min(max(poll_ms, 0), MAX_POLL_MS)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + poll_ms / 1000
        topics = (topic, pop_retry_topic(topic, group))
        while True:
            result = await self._pop_once(group, topic, queue_id, max_nums, invisible_ms, sub,
                                          fifo, init_mode, sgc, attempt_id)
            if result.messages or poll_ms <= 0:
                return self._counted(group, topic, result)
            try:
                waiter = self.polling.register(topics)
            except PollingFull as e:
                log.debug("pop of %s by %s not held: %s", topic, group, e)
                return PopResult(PopStatus.POLLING_FULL, [], result.pop_time, invisible_ms,
                                 result.revive_qid, result.rest_num)
            if waiter is None:  # stopping
                return PopResult(PopStatus.POLLING_NOT_FOUND, [], result.pop_time,
                                 invisible_ms, result.revive_qid, result.rest_num)
            try:
                result = await self._pop_once(group, topic, queue_id, max_nums, invisible_ms, sub,
                                              fifo, init_mode, sgc, attempt_id)
                if result.messages:
                    return self._counted(group, topic, result)
                remaining = deadline - loop.time()
                if remaining <= 0 or self.polling.closing:
                    return PopResult(PopStatus.POLLING_NOT_FOUND, [], result.pop_time,
                                     invisible_ms, result.revive_qid, result.rest_num)
                try:
                    async with asyncio.timeout(remaining):
                        await waiter.event.wait()
                except TimeoutError:
                    pass
            finally:
                self.polling.unregister(waiter)

    def _counted(self, group: str, topic: str, result: PopResult) -> PopResult:
        """``result``, its messages counted as messages out (one fold per pop)."""
        if result.messages and (metrics := self.broker.metrics) is not None:
            metrics.fold_out(topic, group, len(result.messages),
                             sum(m.record.total_size for m in result.messages))
        return result

    def next_revive_qid(self) -> int:
        self._counter += 1
        return self._counter % self.config.revive_queue_num

    async def _pop_once(self, group: str, topic: str, queue_id: int, max_nums: int,
                        invisible_ms: int, sub: SubscriptionData, fifo: bool, init_mode: int,
                        sgc: SubscriptionGroupConfig, attempt_id: str | None) -> PopResult:
        now = self.clock()
        p = _Pop(group, topic, max_nums, invisible_ms, sub, fifo, init_mode, now,
                 ORDER_REVIVE_QUEUE if fifo else self.next_revive_qid(), sgc, [], [], [],
                 attempt_id=attempt_id)
        retry = pop_retry_topic(topic, group)
        has_retry = self.broker.topics.get(retry) is not None
        queues = self.broker.topics.get(topic)
        n = queues.readQueueNums if queues else 0
        self._rotation += 1
        normal = [queue_id] if queue_id != -1 else [(self._rotation + i) % n for i in range(n)]
        retry_first = (has_retry and not fifo and queue_id == -1
                       and random.randrange(100) < self.config.pop_from_retry_probability)
        if retry_first:
            self._pop_queue(p, retry, 0, True)
        for q in normal:
            if len(p.out) >= max_nums:
                break
            self._pop_queue(p, topic, q, False)
        if has_retry and not fifo and not retry_first and len(p.out) < max_nums:
            self._pop_queue(p, retry, 0, True)
        if p.writes:
            # a store that refuses the CKs fails the pop before any offset moves: nothing lost
            put = self.store.put_messages(p.writes)
            for t, q, nxt in p.commits:
                self.broker.offsets.commit(group, t, q, nxt)
            if put.flushed is not None:
                await asyncio.wrap_future(put.flushed)
        status = PopStatus.FOUND if p.out else PopStatus.NO_NEW_MSG
        return PopResult(status, p.out, now, invisible_ms, p.revive_qid, p.rest,
                         tuple(p.starts))

    def _offset(self, group: str, topic: str, q: int, init_mode: int, retry: bool) -> int:
        off = self.broker.offsets.query(group, topic, q)
        if off >= 0:
            return off
        lo = self.store.min_offset_in_queue(topic, q)
        if init_mode == INIT_MIN or retry or lo == 0:
            # RocketMQ's getInitOffset: MIN or a retry topic from the first message; LAST from
            # the last one, or from 0 while the queue still holds it (initPopOffsetByCheckMsgInMem)
            return lo
        return max(lo, self.store.max_offset_in_queue(topic, q) - 1)

    def _pop_queue(self, p: _Pop, topic: str, q: int, retry: bool) -> None:
        key: OrderKey = (p.group, topic, q)
        if p.fifo and self.fifo.blocked(key, p.pop_time, p.attempt_id):
            return
        offsets = self.broker.offsets
        start = self._offset(p.group, topic, q, p.init_mode, retry)
        want = p.max_nums - len(p.out)
        # an expired FIFO batch's acked (or dead-lettered) messages are skipped: read past them
        read = min(MAX_CK_NUM, want + (self.fifo.skippable(key) if p.fifo else 0))
        tag_filter = None if p.sub.matches_all else p.sub.codeSet.__contains__
        cfg = self.config
        res = self.store.get_message(topic, q, start, read, cfg.max_transfer_bytes, tag_filter)
        if res.status in _MOVED:
            start = res.next_begin_offset
            res = self.store.get_message(topic, q, start, read, cfg.max_transfer_bytes,
                                         tag_filter)
        p.rest += max(0, res.max_offset - res.next_begin_offset)
        taken: list[MessageRecord] = []
        done: set[int] = set()
        pos = 0
        nxt = res.next_begin_offset
        for size in res.sizes:
            if len(taken) == want:
                nxt = taken[-1].queue_offset + 1
                break
            rec = decode_record(res.body, pos)
            pos += size
            if rec is None:
                continue
            if not p.sub.matches_all and get_property(rec.properties_text, TAGS) \
                    not in p.sub.tagsSet:
                done.add(rec.queue_offset)
                continue
            if p.fifo:
                before, acked = self.fifo.previous(key, rec.queue_offset)
                if acked or self._fifo_dead(p, topic, rec, before):
                    done.add(rec.queue_offset)
                    continue
            taken.append(rec)
        if not taken:
            if nxt != start:  # everything read was filtered out, acked before or dead-lettered
                offsets.commit(p.group, topic, q, nxt)
                if p.fifo:
                    self.fifo.forget(key)
            return
        until = p.pop_time + p.invisible_ms
        retry_flag = RETRY_V1 if retry else RETRY_NONE
        p.starts.append((retry, q, start))
        if p.fifo:
            self.fifo.begin(key, p.pop_time, until, [r.queue_offset for r in taken], nxt, done,
                            p.attempt_id)
            self.fifo_wake_at(key, topic, until)
        else:
            ck = PopCheckPoint(start_offset=start, pop_time=p.pop_time,
                               invisible_time=p.invisible_ms, num=len(taken), queue_id=q,
                               topic=topic, cid=p.group, broker_name=cfg.broker_name,
                               queue_offset_diff=[r.queue_offset - start for r in taken])
            p.writes.append(pm.ck_message(self.revive_topic, p.revive_qid, ck))
            p.commits.append((topic, q, nxt))
        for rec in taken:
            before = self.fifo.previous(key, rec.queue_offset)[0] - 1 if p.fifo else 0
            handle = ReceiptHandle(start, p.pop_time, p.invisible_ms, p.revive_qid, retry_flag,
                                   cfg.broker_name, q, rec.queue_offset)
            p.out.append(PoppedMessage(rec, p.topic, q, rec.queue_offset, handle.encode(),
                                       rec.reconsume_times + before + 1, until))

    def _fifo_dead(self, p: _Pop, topic: str, rec: MessageRecord, before: int) -> bool:
        """A FIFO message delivered ``retryMaxTimes`` times beyond its reconsume times goes to
        the DLQ instead of a further delivery; True if it went."""
        if rec.reconsume_times + before <= p.sgc.retryMaxTimes:
            return False
        self.put_dead_letter(p.group, topic, rec)
        return True

    def fifo_wake_at(self, key: OrderKey, topic: str, until: int) -> None:
        """Wake pops waiting on ``topic`` when the batch becomes visible again."""
        loop = asyncio.get_running_loop()
        old = self._fifo_timers.pop(key, None)
        if old is not None:
            old.cancel()
        delay = max(0.0, (until - self.clock()) / 1000)

        def fire() -> None:
            self._fifo_timers.pop(key, None)
            self.polling.notify(topic)

        self._fifo_timers[key] = loop.call_later(delay, fire)

    def fifo_batch_done(self, key: OrderKey) -> None:
        """A FIFO batch was acked whole: pops waiting on its topic read on."""
        timer = self._fifo_timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self.polling.notify(key[1])

    def put_dead_letter(self, group: str, topic_read: str, rec: MessageRecord) -> None:
        """Store ``rec`` in ``%DLQ%{group}`` (created readable, as send-back creates it)."""
        dlq = dlq_topic(group)
        self.broker.topics.create_plain(dlq, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
        self.store.put_messages((pm.dead_letter(rec, topic_read, dlq,
                                                random.randrange(DLQ_NUMS_PER_GROUP)),))
        log.info("message %s:%d@%d of group %s moved to %s", topic_read, rec.queue_id,
                 rec.queue_offset, group, dlq)

    # -- ack, change (``acks.py``) ---------------------------------------------------------

    def ack(self, group: str, topic: str, receipt_handle: str,
            ack_offset: int | None = None) -> None:
        """Ack one popped message. Raises ``ReceiptHandleExpired`` once its invisible time is
        over (it is being revived) or its offset is no longer in the queue."""
        acks.ack_many(self, group, topic, [receipt_handle], [ack_offset], raise_first=True)

    def ack_many(self, group: str, topic: str, receipt_handles: Iterable[str],
                 ack_offsets: Iterable[int | None] | None = None) -> list[PopError | None]:
        """Ack several messages with one store append (the acks of one CK as one ``bAck``
        record); per handle None or the error that refused it."""
        return acks.ack_many(self, group, topic, receipt_handles, ack_offsets)

    def change_invisible(self, group: str, topic: str, receipt_handle: str,
                         invisible_ms: int) -> str:
        """Hide the message ``invisible_ms`` from now; returns its new handle. The old handle is
        acked (RocketMQ writes the new CK first, then the ack)."""
        return acks.change_invisible(self, group, topic, receipt_handle, invisible_ms)

    async def forward_to_dlq(self, group: str, topic: str, receipt_handle: str,
                             max_delivery_attempts: int) -> None:
        """Move a popped message to ``%DLQ%{group}`` and ack it (the gRPC front's
        ForwardMessageToDeadLetterQueue, after ``max_delivery_attempts`` failed deliveries)."""
        await acks.forward_to_dlq(self, group, topic, receipt_handle, max_delivery_attempts)
