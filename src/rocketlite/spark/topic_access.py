"""Blocking broker access for the Spark topic source: one private event loop per use.

Spark calls the source from plain threads (the driver's planner, the executors' Python workers) and
pickles the reader objects between processes, so nothing here survives a call: a
:class:`TopicAccess` opens its own event loop and ``ClientInstance`` when made, and closes both in
:meth:`TopicAccess.close` (it is a context manager). The instance is never ``start()``-ed: no
heartbeats, no rebalance, no periodic route refresh, only the requests made here (pulls carry their
own subscription, so the broker needs no heartbeat to serve them).

:meth:`TopicAccess.pull_range` reads one queue range the way the source needs it: pulls that never
commit an offset (the Spark checkpoint is the truth), a few pulls in flight at once when no tag
filter makes the next start unpredictable, messages outside the range or with other tags dropped,
and the pull's own statuses turned into data-loss decisions (``OFFSET_MOVED`` below the queue's
minimum, offsets skipped because their CommitLog bytes were deleted, a queue that now ends below
the range).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Generator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from rocketlite.client.broker_api import BrokerApi, PullResult, PullStatus
from rocketlite.client.config import ClientConfig
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.instance import ClientInstance
from rocketlite.client.message import MessageExt
from rocketlite.client.route import subscribe_queues
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.spark.offsets import DataLoss, DataLossError, Offsets, QueueKey, QueueRange

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_GROUP = "spark-rocketmq-source"
"""The consumer group of pulls when the ``group`` option is not set (it never commits)."""
REQUEST_TIMEOUT = 10.0
"""Seconds per request: generous, Spark's workers share few cores with the broker in tests."""
PULL_MAX = 1000
"""Messages asked for per pull; the broker caps it (``maxTransferCountOnMessageInMemory``, 32)."""
PIPELINE = 4
"""Pulls in flight per queue when no tag filter is set (the next start is then predictable)."""
RETRIES = 3
"""Attempts of a pull that failed on this side (timeout, lost connection) before the task fails."""

INTERNAL_TOPICS = frozenset({"TBW102", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "SCHEDULE_TOPIC_XXXX",
                             "TRANS_CHECK_MAX_TIME_TOPIC", "DefaultCluster", "BenchmarkTest"})
INTERNAL_PREFIXES = ("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_")


def is_internal_topic(topic: str) -> bool:
    """Broker-made topics a ``subscribePattern`` never picks (retry, DLQ, system topics)."""
    return topic in INTERNAL_TOPICS or topic.startswith(INTERNAL_PREFIXES)


def _mq(q: QueueKey) -> MessageQueue:
    return MessageQueue(q.topic, q.broker, q.queue_id)


@dataclass(frozen=True, slots=True)
class PullSpec:
    """How to pull: the group, the broker-side tag expression and the client-side tag set."""

    group: str = DEFAULT_GROUP
    expression: str = "*"
    tags: frozenset[str] | None = None
    fail_on_data_loss: bool = True


class TopicAccess:
    """A private event loop and client instance; every method blocks until its answer."""

    def __init__(self, nameserver: str, timeout: float = REQUEST_TIMEOUT) -> None:
        self.nameserver = nameserver
        self._loop = asyncio.new_event_loop()
        try:
            config = ClientConfig(namesrv_addr=nameserver, request_timeout=timeout)
            self.instance = self.run(self._make(config))
        except BaseException:
            self._loop.close()
            raise
        self.api = BrokerApi(self.instance)

    @staticmethod
    async def _make(config: ClientConfig) -> ClientInstance:
        return ClientInstance(config)

    def run(self, coro: Awaitable[T]) -> T:
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self.run(self.instance.close())
        finally:
            self._loop.close()

    def __enter__(self) -> TopicAccess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata -------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        """Every topic the NameServer knows, sorted."""
        return sorted(self.run(self.instance.namesrv.fetch_topic_list()))

    def queues(self, topic: str) -> list[QueueKey] | None:
        """The readable queues of ``topic``'s route, sorted; None when the topic has no route."""
        route = self.run(self.instance.update_route(topic))
        if route is None:
            return None
        return [QueueKey(mq.topic, mq.brokerName, mq.queueId) for mq in subscribe_queues(topic, route)]

    def bounds(self, queues: list[QueueKey]) -> dict[QueueKey, tuple[int, int]]:
        """``{queue: (min offset, max offset)}``, asked of the brokers concurrently."""
        async def one(q: QueueKey) -> tuple[int, int]:
            lo, hi = await asyncio.gather(self.api.min_offset(_mq(q)), self.api.max_offset(_mq(q)))
            return lo, hi

        return dict(zip(queues, self.run(self._gather([one(q) for q in queues])), strict=True))

    def search(self, times: Mapping[QueueKey, int]) -> Offsets:
        """``{queue: ms}`` -> the first offset stored at or after that time (the end if none)."""
        queues = sorted(times)
        found = self.run(self._gather([self.api.search_offset(_mq(q), times[q]) for q in queues]))
        return dict(zip(queues, found, strict=True))

    def commit(self, group: str, offsets: Mapping[QueueKey, int]) -> None:
        """Store ``offsets`` as ``group``'s consumer offsets on the brokers."""
        self.run(self._gather([self.api.update_offset(group, _mq(q), n) for q, n in sorted(offsets.items())]))

    @staticmethod
    async def _gather(coros: list[Awaitable[T]]) -> list[T]:
        return list(await asyncio.gather(*coros))

    # -- reading --------------------------------------------------------------------------------

    def pull_range(self, rng: QueueRange, spec: PullSpec) -> Generator[list[MessageExt], None, None]:
        """The messages of ``rng`` in offset order, in lists of one or more pulls each.

        Data loss (see the module doc) raises ``DataLossError`` with ``spec.fail_on_data_loss``,
        else is logged and skipped."""
        gen = self._pull_range(rng, spec)
        try:
            while True:
                try:
                    msgs = self.run(anext(gen))
                except StopAsyncIteration:
                    return
                yield msgs
        finally:  # stops the pulls still in flight (when the caller stopped early)
            if not self._loop.is_closed():
                self.run(gen.aclose())

    async def _pull(self, spec: PullSpec, q: QueueKey, offset: int, count: int) -> PullResult:
        for attempt in range(1, RETRIES + 1):
            try:
                return await self.api.pull(spec.group, _mq(q), offset, count, expression=spec.expression)
            except MQClientError as e:
                if attempt == RETRIES:
                    raise MQClientError(f"pull of {q} at offset {offset} failed {RETRIES} times: {e}") from e
                log.warning("pull of %s at offset %d: %s; retrying", q, offset, e)
                await asyncio.sleep(0.2 * attempt)
            except MQBrokerError as e:
                raise MQClientError(f"pull of {q} at offset {offset} refused: {e}") from e
        raise AssertionError("unreachable")

    async def _pull_range(self, rng: QueueRange, spec: PullSpec) -> AsyncGenerator[list[MessageExt], None]:
        q, pos, end = rng.queue, rng.start, rng.end
        depth = PIPELINE if spec.tags is None else 1
        step = 32
        ahead: dict[int, asyncio.Task[PullResult]] = {}
        stalls = 0
        try:
            while pos < end:
                o = pos
                for _ in range(depth):
                    if o >= end:
                        break
                    if o not in ahead:
                        ahead[o] = asyncio.ensure_future(self._pull(spec, q, o, min(end - o, PULL_MAX)))
                    o += step
                result = await ahead.pop(pos)
                new_pos, msgs = take_pull(result, spec, q, pos, end)
                if new_pos is None:  # the queue ends below the range: nothing more to read
                    return
                if new_pos <= pos:
                    stalls += 1  # a unit not readable yet (OFFSET_FOUND_NULL): try again shortly
                    if stalls > 50:
                        raise MQClientError(f"pull of {q} makes no progress at offset {pos} "
                                            f"(queue bounds {result.min_offset}..{result.max_offset})")
                    await asyncio.sleep(0.1)
                    continue
                stalls = 0
                if result.status is PullStatus.FOUND and result.messages:
                    step = max(1, result.next_begin_offset - pos)
                pos = new_pos
                for stale in [k for k in ahead if k < pos]:
                    ahead.pop(stale).cancel()
                if msgs:
                    yield msgs
        finally:
            for task in ahead.values():
                task.cancel()
            await asyncio.gather(*ahead.values(), return_exceptions=True)


def _lost(spec: PullSpec, loss: DataLoss) -> None:
    if spec.fail_on_data_loss:
        raise DataLossError([loss])
    log.warning("rocketmq source: data loss, failOnDataLoss=false: %s; skipping ahead", loss.describe())


def take_pull(result: PullResult, spec: PullSpec, q: QueueKey, pos: int, end: int,
              ) -> tuple[int | None, list[MessageExt]]:
    """One pull's reply at ``pos`` for the range ending at ``end`` -> (the next offset to pull,
    or None when the queue ends below the range; the messages to hand out). Data loss is raised
    or logged here (``spec.fail_on_data_loss``)."""
    status = result.status
    filtered = spec.tags is not None
    if status is PullStatus.FOUND:
        msgs = result.messages
        if not filtered:  # offsets skipped without a filter: their CommitLog bytes are deleted
            expected = pos
            for n in [*(m.queue_offset for m in msgs), result.next_begin_offset]:
                if n > expected and expected < end:
                    _lost(spec, DataLoss(q, expected, n, result.max_offset))
                expected = n + 1
        keep = [m for m in msgs if pos <= m.queue_offset < end]
        if spec.tags is not None:  # the broker matched tag hash codes; compare the tags
            keep = [m for m in keep if m.tags in spec.tags]
        return result.next_begin_offset, keep
    if status is PullStatus.NO_MATCHED_MSG:
        nxt = result.next_begin_offset
        if not filtered and nxt > pos:  # MESSAGE_WAS_REMOVING: nothing else skips units
            _lost(spec, DataLoss(q, pos, nxt, result.max_offset))
        return nxt, []
    if status is PullStatus.OFFSET_ILLEGAL and pos < result.min_offset:
        _lost(spec, DataLoss(q, pos, result.min_offset, result.max_offset))
        return result.min_offset, []
    if pos < result.max_offset:  # OFFSET_FOUND_NULL: the unit is not readable yet
        return pos, []
    # OFFSET_MOVED above the max, or NOT_FOUND at the max: the queue ends below the range.
    _lost(spec, DataLoss(q, end, result.min_offset, result.max_offset))
    return None, []
