"""Message trace (``enable_trace``): a client's Pub / SubBefore / SubAfter records written to the
trace topic (``RMQ_SYS_TRACE_TOPIC`` unless one is named, Java's ``customizedTraceTopic``) in
RocketMQ's format (``trace_codec``), as Java's ``AsyncTraceDispatcher`` writes them.

Tracing stays off the hot path: the hooks build records and ``append`` them to a bounded queue
(1024 records, Java's size); a full queue drops the records and counts them (``discarded``),
never slowing or failing the user's send or handler. A background task takes up to 100 records
at a time (waiting 5 ms for more when fewer are queued, so a slow trickle of sends does not cost
a trace message each), joins them into trace messages of at most ~118 KB (Java's 128000 - 10000)
and 16000 characters of keys (the properties' length is a 16-bit field), and sends each through
an inner producer of group ``_INNER_TRACE_PRODUCER``, up to 4 at once (Java sends from a pool of
threads), keyed by the traced msgIds and the messages' KEYS, so QUERY_MESSAGE by either (``admin
queryMsgTraceById``) finds them. A trace send that fails is logged and counted (``failed``), not
retried (as Java).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

from rocketlite.client.config import ClientConfig
from rocketlite.client.message import Message, MessageExt, UniqKeyGenerator
from rocketlite.client.send_types import SendResult, SendStatus
from rocketlite.client.trace_codec import (
    DEFAULT_REGION,
    TRACE_PRODUCER_GROUP,
    TRACE_TOPIC,
    ConsumeReturnType,
    MessageType,
    TraceRecord,
    TraceType,
    encode_record,
    record_keys,
)
from rocketlite.formats import properties as props

log = logging.getLogger(__name__)

QUEUE_SIZE = 1024
BATCH_SIZE = 100
MAX_TRACE_BODY = 128_000 - 10_000
MAX_KEYS_CHARS = 16_000
"""A trace message's KEYS stay below this (its properties' length is a 16-bit field)."""
MAX_IN_FLIGHT = 4
LINGER_S = 0.005
"""How long the sender waits for a batch to fill (Java polls 5 ms for each record)."""
FLUSH_S = 2.0


class TraceSender(Protocol):
    """What sends the trace messages: the inner producer (a stand-in in tests)."""

    async def send(self, msg: Message) -> Any: ...

    async def shutdown(self) -> None: ...


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TraceDispatcher:
    """The bounded record queue and the task that sends it (module doc); one per traced client."""

    def __init__(self, config: ClientConfig, topic: str | None = None, *,
                 queue_size: int = QUEUE_SIZE, batch_size: int = BATCH_SIZE,
                 max_body: int = MAX_TRACE_BODY, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.config = config
        self.topic = topic or TRACE_TOPIC
        self.queue_size = queue_size
        self.batch_size = batch_size
        self.max_body = max_body
        self.discarded = 0
        self.sent = 0
        self.failed = 0
        self._queue: collections.deque[TraceRecord] = collections.deque()
        self._wake: asyncio.Event | None = None
        self._working = False  # a batch taken from the queue is being encoded and launched
        self._task: asyncio.Task[None] | None = None
        self._producer: TraceSender | None = None
        self._slots = asyncio.Semaphore(max_in_flight)
        self._sends: set[asyncio.Task[None]] = set()
        self._request_ids = UniqKeyGenerator()

    async def start(self, sender: TraceSender | None = None) -> None:
        """Start the sending task, through ``sender`` or (by default) a new inner producer. An
        inner producer that cannot start is logged and tracing stays off (records are counted
        as discarded), as Java only warns: the traced client works on."""
        # imported here: the producer module imports this one
        from rocketlite.client.producer import Producer

        if self._task is not None:
            return
        if sender is None:
            producer = Producer(TRACE_PRODUCER_GROUP, config=ClientConfig(
                namesrv_addr=self.config.namesrv_addr, client_ip=self.config.client_ip,
                instance_name=f"PID_CLIENT_INNER_TRACE_PRODUCER_{self.config.namesrv_addr}",
                request_timeout=self.config.request_timeout), send_timeout=5.0)
            try:
                await producer.start()
            except Exception as e:  # noqa: BLE001 - tracing must not stop the traced client
                log.warning("message trace is off: its producer cannot start: %s", e)
                with contextlib.suppress(Exception):
                    await producer.shutdown()
                return
            sender = producer
        self._producer = sender
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="rocketlite-trace-dispatcher")

    async def shutdown(self, flush_s: float = FLUSH_S) -> None:
        """Send what is queued (for up to ``flush_s``), then stop."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(flush_s):
                await self.flush()
        for t in (self._task, *self._sends):
            t.cancel()
        await asyncio.gather(self._task, *self._sends, return_exceptions=True)
        self._task = None
        self._wake = None  # later records are discarded
        if self._producer is not None:
            await self._producer.shutdown()

    async def flush(self) -> None:
        """Wait until every queued record has been sent (or failed)."""
        while self._task is not None and (self._queue or self._sends or self._working):  # noqa: ASYNC110
            await asyncio.sleep(0.01)  # three conditions polled: only shutdown and benches wait here

    # -- the queue ------------------------------------------------------------------------------

    def append(self, records: Sequence[TraceRecord]) -> bool:
        """Queue ``records``; False (and counted in ``discarded``) when the queue is full or the
        dispatcher is not running."""
        if self._wake is None or len(self._queue) + len(records) > self.queue_size:
            self.discarded += len(records)
            if self.discarded == len(records) or self.discarded % 1000 < len(records):
                log.info("trace queue full (or tracing off): %d record(s) discarded so far",
                         self.discarded)
            return False
        self._queue.extend(records)
        self._wake.set()
        return True

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            if not self._queue:
                await self._wake.wait()
                self._wake.clear()
            self._working = True
            if len(self._queue) < self.batch_size:
                await asyncio.sleep(LINGER_S)
            batch = [self._queue.popleft() for _ in range(min(self.batch_size, len(self._queue)))]
            await self._send_records(batch)
            self._working = False

    async def _send_records(self, records: list[TraceRecord]) -> None:
        data: list[str] = []
        size = keys_size = 0
        keys: dict[str, None] = {}
        for r in records:
            text = encode_record(r)
            data.append(text)
            size += len(text)
            for ks in record_keys(r):
                for k in ks.split(props.KEY_SEPARATOR):
                    if k and k not in keys:
                        keys[k] = None
                        keys_size += len(k) + 1
            if size >= self.max_body or keys_size >= MAX_KEYS_CHARS:
                await self._launch("".join(data), list(keys))
                data, size, keys_size, keys = [], 0, 0, {}
        if data:
            await self._launch("".join(data), list(keys))

    async def _launch(self, data: str, keys: list[str]) -> None:
        """Start sending one trace message once fewer than ``max_in_flight`` are in flight."""
        await self._slots.acquire()
        task = asyncio.create_task(self._send(data, keys))
        self._sends.add(task)
        task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sends.discard(task)
        self._slots.release()

    async def _send(self, data: str, keys: list[str]) -> None:
        assert self._producer is not None
        try:
            await self._producer.send(Message(self.topic, data.encode(), keys=keys))
            self.sent += 1
        except Exception as e:  # noqa: BLE001 - a lost trace never reaches the user
            self.failed += 1
            log.info("cannot send trace data to %s: %s", self.topic, e)

    # -- the hooks ------------------------------------------------------------------------------

    def traces(self, topic: str) -> bool:
        """False for the trace topic itself (a trace message is not traced)."""
        return not topic.startswith(self.topic)

    def pub(self, group: str, msg: Message, result: SendResult, started_ms: int,
            store_host: str | None, msg_type: MessageType | None = None) -> None:
        """A Pub record for a sent message (Java's ``SendMessageTraceHookImpl``)."""
        if not self.traces(msg.topic):
            return
        now = _now_ms()
        if msg_type is None:
            delayed = msg.delay_level > 0 or msg.deliver_time_ms is not None
            msg_type = MessageType.Delay_Msg if delayed else MessageType.Normal_Msg
        keys = msg.key_list() if msg.keys else None
        self.append([TraceRecord(
            TraceType.Pub, started_ms, result.region_id or DEFAULT_REGION, group, topic=msg.topic,
            msg_id=result.msg_id, tags=msg.tags, keys=props.KEY_SEPARATOR.join(keys) if keys else None,
            store_host=store_host, body_length=len(msg.body), cost_time=now - started_ms,
            msg_type=msg_type, offset_msg_id=result.offset_msg_id,
            success=result.status is SendStatus.SEND_OK)])

    def end_transaction(self, group: str, topic: str, tags: str | None, keys: str | None,
                        msg_id: str, store_host: str | None, state: str,
                        transaction_id: str | None, from_check: bool) -> None:
        """An EndTransaction record: how a producer ended a half message (Java's
        ``EndTransactionTraceHookImpl``; the region is Java's default, the record carries no
        send result)."""
        if self.traces(topic):
            self.append([TraceRecord(
                TraceType.EndTransaction, _now_ms(), DEFAULT_REGION, group, topic=topic,
                msg_id=msg_id, tags=tags, keys=keys or None, store_host=store_host,
                msg_type=MessageType.Trans_msg_Commit, transaction_id=transaction_id,
                transaction_state=state, from_transaction_check=from_check)])

    def sub_before(self, group: str, msgs: Sequence[MessageExt]) -> list[TraceRecord]:
        """SubBefore records for a batch handed to a handler (Java's
        ``ConsumeMessageTraceHookImpl``); messages sent with ``TRACE_ON=false`` are left out."""
        now = _now_ms()
        request_id = self._request_ids.next()
        records = []
        for m in msgs:
            p = m.properties
            if p.get(props.TRACE_ON) == "false" or not self.traces(m.topic):
                continue
            records.append(TraceRecord(
                TraceType.SubBefore, now, p.get(props.MSG_REGION), group, request_id,
                topic=m.topic, msg_id=m.msg_id, retry_times=m.reconsume_times, keys=p.get(props.KEYS)))
        if records:
            self.append(records)
        return records

    def sub_after(self, before: list[TraceRecord], batch: int, success: bool,
                  code: ConsumeReturnType) -> None:
        """SubAfter records closing ``before``: the handler's result and its cost per message."""
        if not before:
            return
        now = _now_ms()
        cost = (now - before[0].timestamp) // max(1, batch)
        self.append([TraceRecord(
            TraceType.SubAfter, now, b.region_id, b.group, b.request_id, topic=b.topic,
            msg_id=b.msg_id, keys=b.keys, cost_time=cost, success=success,
            context_code=code) for b in before])
