"""LitePullConsumer: the application polls for messages (Java's ``DefaultLitePullConsumer``).

Two exclusive modes: :meth:`LitePullConsumer.subscribe` (the group's rebalance, from
``ConsumerBase``, picks this client's queues) or :meth:`LitePullConsumer.assign` (the given queues,
no rebalance; :meth:`LitePullConsumer.fetch_queues` lists a topic's readable queues).

Each owned queue has a pull task: long-polling pulls (the broker holds a pull up to
``broker_suspend_max``) into the queue's buffer, which holds at most ``pull_threshold_for_queue``
messages (a full buffer stops the pulls until polls drain it to half).
:meth:`LitePullConsumer.poll` hands out up to ``pull_batch_size`` buffered messages, taken
round-robin from the queues not paused.

Offsets: each queue remembers where its polled messages end. With ``auto_commit`` that position is
committed to the offset store (in memory) at the next poll and persisted by the client instance's
periodic persist; otherwise :meth:`commit` / :meth:`commit_sync` do it. :meth:`seek` moves a queue
(its buffer is discarded and its pull restarted). Lite pull consumers do not follow the group's
retry topic: nothing is ever sent back.

With ``enable_trace`` each poll that returns messages writes their SubBefore and SubAfter records
(success; Java's ``DefaultLitePullConsumerImpl.poll`` runs its consume hooks so) to the trace
topic (``trace_topic``, default ``RMQ_SYS_TRACE_TOPIC``) through a ``trace.TraceDispatcher``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from rocketlite.client.broker_api import BrokerApi, PullStatus
from rocketlite.client.consumer_base import ConsumerBase
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.message import MessageExt
from rocketlite.client.offset_store import ReadOffsetType
from rocketlite.client.route import subscribe_queues
from rocketlite.client.trace import TraceDispatcher
from rocketlite.client.trace_codec import ConsumeReturnType
from rocketlite.common.errors import RemotingError
from rocketlite.protocol.bodies import ConsumeType, MessageQueue
from rocketlite.protocol.running_info import ProcessQueueInfo

log = logging.getLogger(__name__)

_ERRORS = (MQClientError, MQBrokerError, RemotingError)
MAX_PULL_BATCH = 1024
"""The most messages a pull or a poll asks for, whatever ``pull_batch_size`` says."""


class _Pulled:
    """A queue's buffered messages, kept in the lists their pulls returned: a poll takes whole
    lists (a slice of the first one when it wants fewer), never one message at a time."""

    __slots__ = ("_count", "_head", "_lists")

    def __init__(self) -> None:
        self._lists: collections.deque[list[MessageExt]] = collections.deque()
        self._head = 0  # how much of the first list has been taken
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, msgs: list[MessageExt]) -> None:
        if msgs:
            self._lists.append(msgs)
            self._count += len(msgs)

    def clear(self) -> None:
        self._lists.clear()
        self._head = self._count = 0

    def take(self, want: int, out: list[MessageExt]) -> None:
        """Move up to ``want`` messages, oldest first, to the end of ``out``."""
        lists = self._lists
        while want > 0 and lists:
            first, head = lists[0], self._head
            left = len(first) - head
            if left <= want:
                out.extend(first[head:] if head else first)
                lists.popleft()
                self._head = 0
            else:
                out.extend(first[head:head + want])
                self._head = head + want
                left = want
            want -= left
            self._count -= left


@dataclass(eq=False)
class _Queue:
    """One owned queue: where to pull next, what is buffered, where the polled messages end."""

    mq: MessageQueue
    next_offset: int | None = None  # None until the start offset is known
    consumed: int | None = None  # the offset after the last polled (or skipped) message
    committed: int | None = None  # the last ``consumed`` written to the offset store
    buffer: _Pulled = field(default_factory=_Pulled)
    paused: bool = False
    dropped: bool = False
    room: asyncio.Event = field(default_factory=asyncio.Event)  # set: the pull may go on
    task: asyncio.Task[None] | None = None

    def is_dropped(self) -> bool:
        """Read after an await (a method, so that type checkers do not narrow the flag)."""
        return self.dropped


class LitePullConsumer(ConsumerBase):
    consume_type = ConsumeType.CONSUME_ACTIVELY
    subscribe_retry_topic = False

    def __init__(
        self,
        group: str,
        *,
        auto_commit: bool = True,
        pull_batch_size: int = 10,
        pull_threshold_for_queue: int = 1000,
        broker_suspend_max: float = 15.0,
        pull_error_delay: float = 1.0,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(group, **kwargs)
        self.trace = TraceDispatcher(self.config, trace_topic) if enable_trace else None
        if pull_batch_size < 1 or pull_threshold_for_queue < 1:
            raise MQClientError("pull_batch_size and pull_threshold_for_queue must be positive")
        self.auto_commit = auto_commit
        self.pull_batch_size = min(pull_batch_size, MAX_PULL_BATCH)
        self.pull_threshold = pull_threshold_for_queue
        self.broker_suspend_ms = int(broker_suspend_max * 1000)
        self.pull_error_delay = pull_error_delay
        self._assigned: list[MessageQueue] | None = None  # set in assign mode
        self._queues: dict[MessageQueue, _Queue] = {}
        self._arrived = asyncio.Event()
        self._rr = 0  # where the next poll starts taking, round-robin over the queues

    # -- modes ----------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*") -> None:
        if self._assigned is not None:
            raise MQClientError("the consumer is in assign mode: subscribe and assign cannot be mixed")
        super().subscribe(topic, expression)

    def assign(self, queues: list[MessageQueue]) -> None:
        """Consume exactly ``queues`` (replacing an earlier assignment); no rebalance."""
        if self.subscriptions:
            raise MQClientError("the consumer is in subscribe mode: subscribe and assign cannot be mixed")
        self._assigned = sorted(set(queues))
        if self._started:
            self._set_queues(None, self._assigned)

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """``topic``'s readable queues, from a fresh route."""
        route = await self._inst().update_route(topic)
        if route is None:
            raise MQClientError(f"no route for topic {topic!r}")
        return subscribe_queues(topic, route)

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        if self.trace is not None:
            await self.trace.start()
        await self._start_base()
        if self._assigned is not None:
            self._set_queues(None, self._assigned)
        else:
            await self.rebalance()

    async def shutdown(self) -> None:
        """Stop pulling, commit (with ``auto_commit``) and persist the offsets, leave the group."""
        if not self._started:
            return
        self._started = False
        tasks = [t for q in self._queues.values() if (t := self._stop(q)) is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.auto_commit:
            await self._commit_polled()
        self._started = True  # so that persist_offsets and unregister run
        await self._shutdown_base()
        self._started = False
        if self.trace is not None:
            await self.trace.shutdown()

    async def __aenter__(self) -> LitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- ClientInstance's view and rebalance ----------------------------------------------------

    def topics(self) -> list[str]:
        return sorted(set(self.subscriptions) | {mq.topic for mq in self._assigned or ()})

    def owned_queues(self) -> list[MessageQueue]:
        return sorted(self._queues)

    def _queue_info(self, mq: MessageQueue) -> ProcessQueueInfo:
        info = super()._queue_info(mq)
        q = self._queues.get(mq)
        if q is not None:  # pulled, not yet polled
            info.cachedMsgCount, info.droped = len(q.buffer), q.dropped
        return info

    async def rebalance(self) -> None:
        if self._assigned is None:
            await super().rebalance()

    async def _apply_allocation(self, topic: str, allocated: list[MessageQueue]) -> None:
        dropped = self._set_queues(topic, allocated)
        assert self.offset_store is not None
        for q in dropped:
            if self.auto_commit and q.consumed is not None:
                await self.offset_store.update(q.mq, q.consumed, False)
            await self.offset_store.persist(q.mq)
            await self.offset_store.remove(q.mq)
            log.info("group %s: gave up %s", self.group, q.mq)

    async def _stop_for_reset(self, mqs: list[MessageQueue]) -> None:
        for mq in mqs:
            q = self._queues.pop(mq)
            task = self._stop(q)
            q.buffer.clear()
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _start_after_reset(self, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            if mq not in self._queues:
                q = self._queues[mq] = _Queue(mq, next_offset=offset, consumed=offset,
                                              committed=offset)
                self._run(q)

    def _set_queues(self, topic: str | None, wanted: list[MessageQueue]) -> list[_Queue]:
        """Own exactly ``wanted`` (of ``topic``, or of all topics): start new queues, stop the others."""
        keep = set(wanted)
        dropped = [q for mq, q in self._queues.items() if (topic is None or mq.topic == topic)
                   and mq not in keep]
        for q in dropped:
            self._stop(q)
            del self._queues[q.mq]
        for mq in wanted:
            if mq not in self._queues:
                q = self._queues[mq] = _Queue(mq)
                self._run(q)
        return dropped

    def _run(self, q: _Queue) -> None:
        q.task = asyncio.create_task(self._pull_loop(q), name=f"lite-pull {q.mq}")

    @staticmethod
    def _stop(q: _Queue) -> asyncio.Task[None] | None:
        q.dropped = True
        task, q.task = q.task, None
        if task is not None:
            task.cancel()
        return task

    # -- pulling --------------------------------------------------------------------------------

    async def _pull_loop(self, q: _Queue) -> None:
        api = self._api()
        while not q.dropped:
            if q.next_offset is None:
                try:
                    q.next_offset = q.consumed = await self.start_offset(q.mq)
                except _ERRORS as e:
                    log.warning("group %s: cannot find where %s starts: %s", self.group, q.mq, e)
                    await asyncio.sleep(self.pull_error_delay)
                    continue
                log.info("group %s: now pulling %s from offset %d", self.group, q.mq, q.next_offset)
            room = self.pull_threshold - len(q.buffer)
            if q.paused or room <= 0:
                # Flow control: Java retries after 50 ms; this pull goes on as soon as polls have
                # drained the buffer to half the threshold (or the queue is resumed), and at the
                # latest after those 50 ms.
                q.room.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(q.room.wait(), 0.05)
                continue
            sub = self.subscriptions.get(q.mq.topic)
            offset = q.next_offset
            t0 = time.monotonic()
            try:
                result = await api.pull(
                    self.group, q.mq, offset, min(room, self.pull_batch_size),
                    expression=sub.subString if sub is not None else "*",
                    sub_version=sub.subVersion if sub is not None else 0, suspend_ms=self.broker_suspend_ms)
            except _ERRORS as e:
                if q.is_dropped():
                    return
                log.warning("group %s: pull of %s at %d failed: %s", self.group, q.mq, offset, e)
                await asyncio.sleep(self.pull_error_delay)
                continue
            self.stats.pulled(q.mq.topic, len(result.messages), time.monotonic() - t0)
            if q.is_dropped():  # stopped (rebalance, seek, shutdown) while the pull was out
                return
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning("group %s: offset %d of %s is illegal; moving to %d", self.group, offset, q.mq,
                            result.next_begin_offset)
            msgs = result.messages
            if sub is not None and sub.tagsSet and msgs:
                msgs = [m for m in msgs if m.tags in sub.tagsSet]  # the broker filtered by hash only
            q.next_offset = result.next_begin_offset
            if msgs:
                q.buffer.add(msgs)
                self._arrived.set()
            elif not q.buffer:
                q.consumed = result.next_begin_offset  # all polled: skipped messages count as consumed

    def _api(self) -> BrokerApi:
        self._inst()
        assert self.api is not None
        return self.api

    # -- polling --------------------------------------------------------------------------------

    async def poll(self, timeout: float = 5.0) -> list[MessageExt]:  # noqa: ASYNC109
        """Up to ``pull_batch_size`` buffered messages; waits up to ``timeout`` s for some."""
        self._inst()
        if self.auto_commit:
            await self._commit_polled()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            msgs = self._take()
            if msgs or not self._started:
                return msgs
            self._arrived.clear()
            msgs = self._take()  # a pull may have landed between the take and the clear
            left = deadline - loop.time()
            if msgs or left <= 0:
                return msgs
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)

    def _take(self) -> list[MessageExt]:
        ready = [q for q in self._queues.values() if q.buffer and not q.paused and q.next_offset is not None]
        out: list[MessageExt] = []
        if not ready:
            return out
        self._rr = (self._rr + 1) % len(ready)
        for q in ready[self._rr:] + ready[:self._rr]:
            had = len(out)
            q.buffer.take(self.pull_batch_size - had, out)
            if len(out) > had:
                q.consumed = out[-1].queue_offset + 1
            if len(q.buffer) <= self.pull_threshold // 2 and not q.room.is_set():
                q.room.set()
            if len(out) >= self.pull_batch_size:
                break
        if self.trace is not None:
            self.trace.sub_after(self.trace.sub_before(self.group, out), len(out), True,
                                 ConsumeReturnType.SUCCESS)
        return out

    def pause(self, queues: list[MessageQueue]) -> None:
        """Stop pulling ``queues`` and returning their buffered messages until :meth:`resume`."""
        for mq in queues:
            if (q := self._queues.get(mq)) is not None:
                q.paused = True

    def resume(self, queues: list[MessageQueue]) -> None:
        for mq in queues:
            if (q := self._queues.get(mq)) is not None:
                q.paused = False
                q.room.set()
        self._arrived.set()

    # -- offsets --------------------------------------------------------------------------------

    async def _commit_polled(self) -> dict[MessageQueue, int]:
        """Write where each queue's polled messages end into the offset store (memory)."""
        assert self.offset_store is not None
        done = {}
        for q in list(self._queues.values()):
            if q.consumed is not None and q.consumed != q.committed:
                await self.offset_store.update(q.mq, q.consumed, False)
                q.committed = q.consumed
            if q.committed is not None:
                done[q.mq] = q.committed
        return done

    async def commit(self) -> None:
        """Commit the polled messages' offsets; the periodic persist writes them out."""
        self._inst()
        await self._commit_polled()

    async def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit ``offsets`` (default: those of the polled messages) and persist them now."""
        self._inst()
        assert self.offset_store is not None and self.api is not None
        if offsets is None:
            offsets = await self._commit_polled()
        else:
            for mq, offset in offsets.items():
                await self.offset_store.update(mq, offset, False)
                if (q := self._queues.get(mq)) is not None:
                    q.committed = offset
        for mq, offset in offsets.items():
            if self.clustering:
                await self.api.update_offset(self.group, mq, offset, oneway=False)
            else:
                await self.offset_store.persist(mq)

    async def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` (memory, else the store); -1 if it has none."""
        self._inst()
        assert self.offset_store is not None
        return await self.offset_store.read(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` at ``offset`` (between its min and max offsets); its buffer is discarded."""
        q = self._queues.get(mq)
        if q is None:
            raise MQClientError(f"{mq} is not assigned to this consumer")
        api = self._api()
        lo, hi = await api.min_offset(mq), await api.max_offset(mq)
        if not lo <= offset <= hi:
            raise MQClientError(f"offset {offset} of {mq} is outside [{lo}, {hi}]")
        if self._queues.get(mq) is not q:  # dropped by a rebalance meanwhile
            raise MQClientError(f"{mq} is no longer assigned to this consumer")
        task = self._stop(q)
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        q.buffer.clear()
        q.dropped = False
        q.next_offset = q.consumed = offset
        assert self.offset_store is not None
        await self.offset_store.update(mq, offset, False)
        q.committed = offset
        if self._started and self._queues.get(mq) is q:
            self._run(q)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self._api().min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self._api().max_offset(mq))

    async def offset_for_timestamp(self, mq: MessageQueue, ts_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``ts_ms``."""
        return await self._api().search_offset(mq, ts_ms)
