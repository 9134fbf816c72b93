"""PushConsumer: the broker's messages delivered to a handler, concurrently or in order.

Each owned queue has a pull loop (a task): long-polling pulls (the broker holds a pull up to
``broker_suspend_max`` when there is nothing new) into the queue's ``ProcessQueue``, paused while
the queue holds more than ``pull_threshold_for_queue`` messages or ``pull_threshold_size_for_queue``
bytes (or, concurrently, spans more than ``consume_concurrently_max_span`` offsets).

Concurrently: batches of ``consume_message_batch_max_size`` go to the handler, at most
``consume_concurrency`` at once. The committed offset is the smallest still in flight, so a slow
message holds the offset back but never lets it skip an unfinished one. A failed batch
(RECONSUME_LATER or an exception) is sent back for retry (CONSUMER_SEND_MSG_BACK; if the broker
refuses, re-sent to ``%RETRY%<group>`` by the client, or to ``%DLQ%<group>`` after
``max_reconsume_times``); if even that fails it is consumed again locally after a pause.

Orderly: the queue is locked on the broker first (and re-locked every 20 s); one batch at a time
per queue, in offset order, under the queue's lock. SUSPEND_CURRENT_QUEUE_A_MOMENT (or an
exception) puts the batch back and retries it after ``suspend_current_queue_time``.

With ``enable_trace`` each batch handed to the handler adds SubBefore records and, when it
returns, SubAfter records (result, cost per message) to the trace topic (``trace_topic``, default
``RMQ_SYS_TRACE_TOPIC``) through a background ``trace.TraceDispatcher``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from rocketlite.client.broker_api import PullResult, PullStatus
from rocketlite.client.consumer_base import ConsumerBase, retry_topic
from rocketlite.client.consumer_resend import Resender
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.message import MessageExt
from rocketlite.client.offset_store import ReadOffsetType
from rocketlite.client.process_queue import REBALANCE_LOCK_INTERVAL, ProcessQueue
from rocketlite.client.running_info import process_queue_info
from rocketlite.client.trace import TraceDispatcher
from rocketlite.client.trace_codec import ConsumeReturnType
from rocketlite.common.errors import RemotingError
from rocketlite.formats import properties as props
from rocketlite.protocol.bodies import MessageQueue, SubscriptionData
from rocketlite.protocol.running_info import PROP_CONSUME_ORDERLY, PROP_THREADPOOL_CORE_SIZE, ProcessQueueInfo

log = logging.getLogger(__name__)


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class OrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


Listener = Callable[[list[MessageExt]], Any]
"""A handler: takes a batch, returns (or awaits to) a ConsumeStatus / OrderlyStatus; None is success."""

_ERRORS = (MQClientError, MQBrokerError, RemotingError)


class PushConsumer(ConsumerBase):
    def __init__(
        self,
        group: str,
        *,
        orderly: bool = False,
        consume_concurrency: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100 * 1024 * 1024,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int | None = None,
        suspend_current_queue_time: float = 1.0,
        broker_suspend_max: float = 15.0,
        pull_error_delay: float = 1.0,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(group, **kwargs)
        self.orderly = orderly
        self.consume_concurrency = consume_concurrency
        self.batch_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_count = pull_threshold_for_queue
        self.pull_threshold_size = pull_threshold_size_for_queue
        self.max_span = consume_concurrently_max_span
        # Java: 16 for concurrent consumers, unbounded (Integer.MAX_VALUE) for orderly ones.
        self.max_reconsume_times = (max_reconsume_times if max_reconsume_times is not None
                                    else (2**31 - 1 if orderly else 16))
        self.suspend_time = suspend_current_queue_time
        self.broker_suspend_ms = int(broker_suspend_max * 1000)
        self.pull_error_delay = pull_error_delay
        self.listener: Listener | None = None
        self.queues: dict[MessageQueue, ProcessQueue[MessageExt]] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._consume_tasks: set[asyncio.Task[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        self._lock_task: asyncio.Task[None] | None = None
        self.resender = Resender(group, self.max_reconsume_times, self._inst)
        self.trace = TraceDispatcher(self.config, trace_topic) if enable_trace else None

    def register_listener(self, listener: Listener) -> None:
        """The handler; sync or async. Return ConsumeStatus (OrderlyStatus for orderly)."""
        self.listener = listener

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        if self.listener is None:
            raise MQClientError("register a listener before starting the consumer")
        if not self.subscriptions:
            raise MQClientError("subscribe to a topic before starting the consumer")
        self._slots = asyncio.Semaphore(self.consume_concurrency)
        if self.trace is not None:
            await self.trace.start()
        await self._start_base()
        if self.orderly and self.clustering:
            self._lock_task = asyncio.create_task(self._relock_loop())
        await self.rebalance()

    async def shutdown(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Stop pulling, let running handlers finish (up to ``timeout``), commit, unlock, leave."""
        if not self._started:
            return
        self._started = False
        if self._lock_task is not None:
            self._lock_task.cancel()
        for pq in self.queues.values():
            pq.dropped = True
        tasks = list(self._pull_tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._consume_tasks:
            await asyncio.wait(list(self._consume_tasks), timeout=timeout)
        if self.orderly and self.clustering:
            await self._unlock_all()
        self._started = True  # so that persist_offsets and unregister run
        await self._shutdown_base()
        self._started = False
        if self.trace is not None:
            await self.trace.shutdown()

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- rebalance ------------------------------------------------------------------------------

    def owned_queues(self) -> list[MessageQueue]:
        return sorted(self.queues)

    def _queue_info(self, mq: MessageQueue) -> ProcessQueueInfo:
        info = super()._queue_info(mq)
        pq = self.queues.get(mq)
        return process_queue_info(pq, info.commitOffset) if pq is not None else info

    def _settings(self) -> dict[str, object]:
        return {**super()._settings(), PROP_CONSUME_ORDERLY: self.orderly,
                PROP_THREADPOOL_CORE_SIZE: self.consume_concurrency,
                "consumeThreadMin": self.consume_concurrency,
                "consumeThreadMax": self.consume_concurrency,
                "consumeMessageBatchMaxSize": self.batch_size, "pullBatchSize": self.pull_batch_size,
                "pullThresholdForQueue": self.pull_threshold_count,
                "pullThresholdSizeForQueue": self.pull_threshold_size // (1024 * 1024),
                "consumeConcurrentlyMaxSpan": self.max_span,
                "maxReconsumeTimes": self.max_reconsume_times,
                "suspendCurrentQueueTimeMillis": int(self.suspend_time * 1000),
                "enableMsgTrace": self.trace is not None}

    async def _apply_allocation(self, topic: str, allocated: list[MessageQueue]) -> None:
        wanted = set(allocated)
        for mq in [m for m in self.queues if m.topic == topic and m not in wanted]:
            await self._drop(mq)
        new = [mq for mq in allocated if mq not in self.queues]
        if self.orderly and self.clustering and new:
            new = [mq for mq in new if await self._lock(mq)]
        for mq in new:
            try:
                offset = await self.start_offset(mq)
            except _ERRORS as e:
                log.warning("group %s: cannot find where %s starts: %s", self.group, mq, e)
                continue
            pq: ProcessQueue[MessageExt] = ProcessQueue()
            if self.orderly and self.clustering:
                pq.locked = True
                pq.mark_locked()
            self.queues[mq] = pq
            log.info("group %s: now consuming %s from offset %d", self.group, mq, offset)
            self._pull_tasks[mq] = asyncio.create_task(self._pull_loop(mq, pq, offset))

    async def _stop_for_reset(self, mqs: list[MessageQueue]) -> None:
        for mq in mqs:
            await self._drop(mq, persist=False)

    async def _start_after_reset(self, offsets: dict[MessageQueue, int]) -> None:
        """The rebalance's own path: the queues are new again and start at the stored offset."""
        for topic in sorted({mq.topic for mq in offsets}):
            await self._apply_allocation(topic, sorted(
                {mq for mq in self.queues if mq.topic == topic} | {mq for mq in offsets
                                                                   if mq.topic == topic}))

    async def _drop(self, mq: MessageQueue, persist: bool = True) -> None:
        """Stop consuming ``mq``; its offset is written out first unless ``persist`` is False
        (an offset reset: the old position must not be committed)."""
        pq = self.queues.pop(mq)
        pq.dropped = True
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        assert self.offset_store is not None
        if self.orderly and self.clustering:
            async with pq.consume_lock:  # not while a batch of it runs
                if persist:
                    await self.offset_store.persist(mq)
                with contextlib.suppress(*_ERRORS):
                    await self._api().unlock(self.group, mq.brokerName, mq.topic, {mq})
        elif persist:
            await self.offset_store.persist(mq)
        await self.offset_store.remove(mq)
        log.info("group %s: gave up %s", self.group, mq)

    def _api(self) -> Any:
        self._inst()
        return self.api

    # -- locks (orderly) ------------------------------------------------------------------------

    async def _lock(self, mq: MessageQueue) -> bool:
        try:
            return mq in await self._api().lock(self.group, mq.brokerName, mq.topic, {mq})
        except _ERRORS as e:
            log.warning("group %s: cannot lock %s: %s", self.group, mq, e)
            return False

    async def _relock_loop(self) -> None:
        while True:
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL)
            by_broker: dict[tuple[str, str], set[MessageQueue]] = {}
            for mq in self.queues:
                by_broker.setdefault((mq.brokerName, mq.topic), set()).add(mq)
            for (broker, topic), mqs in by_broker.items():
                try:
                    ok = await self._api().lock(self.group, broker, topic, mqs)
                except _ERRORS as e:
                    log.warning("group %s: re-lock on %s failed: %s", self.group, broker, e)
                    ok = set()
                for mq in mqs:
                    pq = self.queues.get(mq)
                    if pq is None:
                        continue
                    pq.locked = mq in ok
                    if pq.locked:
                        pq.mark_locked()

    async def _unlock_all(self) -> None:
        by_broker: dict[tuple[str, str], set[MessageQueue]] = {}
        for mq in self.queues:
            by_broker.setdefault((mq.brokerName, mq.topic), set()).add(mq)
        for (broker, topic), mqs in by_broker.items():
            with contextlib.suppress(*_ERRORS):
                await self._api().unlock(self.group, broker, topic, mqs)

    # -- pulling --------------------------------------------------------------------------------

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue[MessageExt], offset: int) -> None:
        sub = self.subscriptions.get(mq.topic)
        assert self.offset_store is not None
        store = self.offset_store
        while not pq.dropped:
            if (pq.msg_count > self.pull_threshold_count or pq.msg_size > self.pull_threshold_size
                    or (not self.orderly and pq.span() > self.max_span)):
                await asyncio.sleep(0.05)  # flow control: Java delays the pull 50 ms
                continue
            if self.orderly and self.clustering and (not pq.locked or pq.is_lock_expired()):
                await asyncio.sleep(0.2)
                if not pq.locked and await self._lock(mq):
                    pq.locked = True
                    pq.mark_locked()
                continue
            sub = self.subscriptions.get(mq.topic) or sub
            commit = 0
            if self.clustering:
                commit = await store.read(mq, _MEMORY)
            try:
                pq.mark_pulled()
                t0 = time.monotonic()
                result = await self._api().pull(
                    self.group, mq, offset, self.pull_batch_size,
                    expression=sub.subString if sub is not None else "*",
                    sub_version=sub.subVersion if sub is not None else 0,
                    commit_offset=max(commit, 0), suspend_ms=self.broker_suspend_ms)
            except _ERRORS as e:
                if _dropped(pq):
                    return
                log.warning("group %s: pull of %s at %d failed: %s", self.group, mq, offset, e)
                await asyncio.sleep(self.pull_error_delay)
                continue
            self.stats.pulled(mq.topic, len(result.messages), time.monotonic() - t0)
            if _dropped(pq):
                return
            offset = await self._on_pulled(mq, pq, sub, offset, result)

    async def _on_pulled(self, mq: MessageQueue, pq: ProcessQueue[MessageExt], sub: SubscriptionData | None,
                         offset: int, result: PullResult) -> int:
        """Buffer and dispatch what a pull found; the next offset to pull from."""
        assert self.offset_store is not None
        store = self.offset_store
        if result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning("group %s: offset %d of %s is illegal; moving to %d", self.group, offset, mq,
                        result.next_begin_offset)
            await store.update(mq, result.next_begin_offset, False)
            await store.persist(mq)
            return result.next_begin_offset
        msgs = result.messages
        if sub is not None and sub.tagsSet and msgs:
            msgs = [m for m in msgs if m.tags in sub.tagsSet]  # the broker filtered by hash only
        if msgs:
            self._restore_retry_topic(msgs)
            dispatch = pq.put(msgs)
            if self.orderly:
                if dispatch:
                    self._spawn(self._consume_orderly(mq, pq))
            else:
                for i in range(0, len(msgs), self.batch_size):
                    self._spawn(self._consume_concurrently(mq, pq, msgs[i:i + self.batch_size]))
        elif pq.msg_count == 0 and self.clustering:
            await store.update(mq, result.next_begin_offset, True)  # nothing buffered: the position is done
        return result.next_begin_offset

    def _restore_retry_topic(self, msgs: list[MessageExt]) -> None:
        """Messages of the group's retry topic are handed over under their original topic."""
        rt = retry_topic(self.group)
        for m in msgs:
            if m.topic == rt:
                original = m.properties.get(props.RETRY_TOPIC)
                if original:
                    m.topic = original

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._consume_tasks.add(task)
        task.add_done_callback(self._consume_tasks.discard)

    async def _call_listener(self, msgs: list[MessageExt]) -> Any:
        """The handler on ``msgs``, timed and counted for ``running_info``'s figures."""
        assert self.listener is not None
        t0, ok = time.monotonic(), False
        try:
            if self.trace is not None:
                result = await self._call_traced(self.trace, msgs)
            else:
                result = self.listener(msgs)
                if inspect.isawaitable(result):
                    result = await result
            ok = result in _ORDERLY_OK
            return result
        finally:
            self.stats.consumed(msgs[0].topic, len(msgs), ok, time.monotonic() - t0)

    async def _call_traced(self, trace: TraceDispatcher, msgs: list[MessageExt]) -> Any:
        """The handler between SubBefore and SubAfter records (Java's consume hooks: an exception
        is EXCEPTION, a failure status FAILED)."""
        assert self.listener is not None
        before = trace.sub_before(self.group, msgs)
        try:
            result = self.listener(msgs)
            if inspect.isawaitable(result):
                result = await result
        except Exception:
            trace.sub_after(before, len(msgs), False, ConsumeReturnType.EXCEPTION)
            raise
        ok = result in _ORDERLY_OK
        trace.sub_after(before, len(msgs), ok, ConsumeReturnType.SUCCESS if ok else ConsumeReturnType.FAILED)
        return result

    # -- concurrent consumption -----------------------------------------------------------------

    async def _consume_concurrently(self, mq: MessageQueue, pq: ProcessQueue[MessageExt],
                                    msgs: list[MessageExt]) -> None:
        assert self._slots is not None and self.offset_store is not None
        async with self._slots:
            if pq.dropped:
                return
            try:
                status = await self._call_listener(msgs)
            except Exception:
                log.exception("group %s: the handler failed on %d message(s) of %s",
                              self.group, len(msgs), mq)
                status = ConsumeStatus.RECONSUME_LATER
            if status is None:
                status = ConsumeStatus.CONSUME_SUCCESS
        if _dropped(pq):
            return
        if status is not ConsumeStatus.CONSUME_SUCCESS:
            if not self.clustering:  # broadcasting: Java drops failed messages with a warning
                log.warning("group %s: broadcast messages failed and are dropped: %s", self.group,
                            [m.msg_id for m in msgs])
            else:
                failed = [m for m in msgs if not await self._send_back(m)]
                if failed:  # neither the broker nor the retry topic took them: consume again here
                    await asyncio.sleep(5.0)
                    for m in failed:
                        m.reconsume_times += 1
                    if not pq.dropped:
                        self._spawn(self._consume_concurrently(mq, pq, failed))
                    msgs = [m for m in msgs if m not in failed]
        offset = pq.remove(msgs)
        if offset >= 0 and not pq.dropped:
            await self.offset_store.update(mq, offset, True)

    async def _send_back(self, msg: MessageExt) -> bool:
        """CONSUMER_SEND_MSG_BACK, else (as Java) a copy sent to the retry or dead-letter topic."""
        try:
            await self._api().send_back(self.group, msg, 0, self.max_reconsume_times)
            return True
        except _ERRORS as e:
            log.info("group %s: send-back of %s refused (%s); re-sending it", self.group, msg.msg_id, e)
        return await self.resender.resend(msg)

    # -- orderly consumption --------------------------------------------------------------------

    async def _consume_orderly(self, mq: MessageQueue, pq: ProcessQueue[MessageExt]) -> None:
        assert self._slots is not None and self.offset_store is not None
        while not pq.dropped:
            if self.clustering and (not pq.locked or pq.is_lock_expired()):
                await asyncio.sleep(0.1)
                continue
            async with self._slots, pq.consume_lock:
                msgs = pq.take(self.batch_size)
                if not msgs:
                    pq.is_consuming = False
                    return
                try:
                    status = await self._call_listener(msgs)
                except Exception:
                    log.exception("group %s: the orderly handler failed on %s", self.group, mq)
                    status = OrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                if status in _ORDERLY_OK:
                    offset = pq.commit()
                    if offset >= 0 and not pq.dropped:
                        await self.offset_store.update(mq, offset, False)
                    continue
                retry_now = []
                for m in msgs:
                    if m.reconsume_times + 1 > self.max_reconsume_times and await self.resender.resend(m):
                        continue  # gave up on it: it went to the DLQ
                    m.reconsume_times += 1
                    retry_now.append(m)
                if not retry_now:
                    offset = pq.commit()
                    if offset >= 0 and not pq.dropped:
                        await self.offset_store.update(mq, offset, False)
                    continue
                pq.rollback()
            await asyncio.sleep(self.suspend_time)


_MEMORY = ReadOffsetType.READ_FROM_MEMORY
_ORDERLY_OK = (None, OrderlyStatus.SUCCESS, ConsumeStatus.CONSUME_SUCCESS)


def _dropped(pq: ProcessQueue[MessageExt]) -> bool:
    """Read after an await: the rebalance may have dropped the queue meanwhile."""
    return pq.dropped
