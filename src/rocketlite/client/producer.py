"""Producer: sync, async and oneway sends, batches, ordered sends through a queue selector.

Queue choice (``route.TopicPublishInfo``): the topic's writable queues sorted by broker name then
queue id, round robin, skipping the broker that just failed; with ``latency_fault_enable`` a
broker whose sends failed or were slow is avoided for a while (``fault.LatencyFaultTolerance``).
A failed sync send is retried ``retry_times_when_send_failed`` times on another queue within one
``send_timeout`` budget; an async send ``retry_times_when_send_async_failed`` times. Sends to an
explicit queue or through a selector are not moved to another queue.
A send that fails in transport (cannot connect, connection dropped) asks the instance to
refresh the topic's route in the background (``ClientInstance.route_failed``), so sends move to
a new master within about a second of a failover rather than at the next route poll; with
``latency_fault_enable`` a broker name whose master moved is no longer avoided.

A topic the NameServers do not know is sent through the route of ``create_topic_key`` (TBW102)
with at most ``default_topic_queue_nums`` queues, so a broker with autoCreateTopicEnable creates it.

``send_async`` needs no coroutine at the call site: it returns a future at once and keeps at most
``async_window`` requests in flight, queueing up to ``async_backlog`` more.

Sends (sync, async, batch) are built without the generic codec: a ROCKETMQ binary SEND_MESSAGE_V2
(or SEND_BATCH_MESSAGE) frame from the template of its (topic, queue) (``send_codec.SendFrame``,
byte-identical to the generic encoding; with credentials ``send_sign.SignedSendFrame``, signed;
an async send's templates and queue choice are cached per
publish info, ``send_types._Lanes``), sent through ``Connection.send_request``: an async send with
a ``ReplyWaiter`` (``send_types._AsyncSend``) instead of a future. A reply's header becomes the
``SendResult`` in ``send_codec.ResultReader``. Oneway sends keep the generic command. Messages are
prepared (checked and encoded once) in the base class, ``send_prep.SendPreparation``.

With ``enable_trace`` each sent message (``send``, ``send_async``) adds a Pub record to the trace
topic (``trace_topic``, default ``RMQ_SYS_TRACE_TOPIC``) through a background ``trace.TraceDispatcher``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rocketlite.client.config import ClientConfig, CredentialsLike, client_config
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.fault import LatencyFaultTolerance, select_queue
from rocketlite.client.instance import ClientInstance
from rocketlite.client.message import Message, UniqKeyGenerator, compression_flag
from rocketlite.client.route import MASTER_ID, TopicPublishInfo, master_address, publish_info
from rocketlite.client.send_codec import PlainPrep, UniqKeysPy
from rocketlite.client.send_prep import SendPreparation
from rocketlite.client.send_sign import FrameTemplate, send_frame
from rocketlite.client.send_types import (
    RETRY_CODES,
    MessageQueueSelector,
    SendResult,
    SendStatus,
    _AsyncSend,
    _Lanes,
    _packed_ipv4,
    _Prepared,
    select_by_hash,
)
from rocketlite.client.trace import TraceDispatcher
from rocketlite.client.trace_codec import MessageType
from rocketlite.common.errors import RemotingError
from rocketlite.protocol.bodies import MessageQueue, TopicRouteData
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.pending import FutureWaiter, next_opaque
from rocketlite.remoting.tls import TlsOption

__all__ = ["RETRY_CODES", "MessageQueueSelector", "Producer", "SendResult", "SendStatus", "select_by_hash"]

log = logging.getLogger(__name__)

class Producer(SendPreparation):
    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        *,
        namesrv_addr: str = "",
        config: ClientConfig | None = None,
        send_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        compress_over: int = 4096,
        compression: str = "zlib",
        compress_level: int = 5,
        max_message_size: int = 4 * 1024 * 1024,
        latency_fault_enable: bool = False,
        create_topic_key: str = "TBW102",
        default_topic_queue_nums: int = 4,
        async_window: int = 64,
        async_backlog: int = 100_000,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        credentials: CredentialsLike | None = None,
        tls: TlsOption = None,
    ) -> None:
        compression_flag(compression)  # validates the codec name now
        self.group = group
        self.config = client_config(config, namesrv_addr, credentials, tls)
        self.send_timeout = send_timeout
        self.retry_times = retry_times_when_send_failed
        self.retry_times_async = retry_times_when_send_async_failed
        self.retry_not_store_ok = retry_another_broker_when_not_store_ok
        self.compress_over = compress_over
        self.compression = compression
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.fault = LatencyFaultTolerance() if latency_fault_enable else None
        self.create_topic_key = create_topic_key
        self.default_topic_queue_nums = default_topic_queue_nums
        self._valid_topics: set[str] = set()  # names check_topic passed (bounded)
        self.async_window = async_window
        self.async_backlog = async_backlog
        self.instance: ClientInstance | None = None
        self._infos: dict[str, TopicPublishInfo] = {}
        self._lanes: dict[str, _Lanes] = {}
        self._templates: dict[tuple[str, str, int, bool], FrameTemplate] = {}  # sync sends, batches
        self._use_uniq_keys(UniqKeyGenerator())
        self._inflight = 0
        self._backlog: collections.deque[_AsyncSend] = collections.deque()
        self._idle: asyncio.Event | None = None
        self._started = False
        self.trace = TraceDispatcher(self.config, trace_topic) if enable_trace else None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self.instance = ClientInstance(self.config)
        self._use_uniq_keys(UniqKeyGenerator(_packed_ipv4(self.instance.client_ip)))
        self.instance.register_producer(self)
        await self.instance.start()
        self._idle = asyncio.Event()
        self._idle.set()
        self._started = True
        if self.trace is not None:
            await self.trace.start()

    async def shutdown(self) -> None:
        """Wait for async sends still in flight (up to ``send_timeout``), unregister, close."""
        if not self._started or self.instance is None:
            return
        self._started = False
        if self._idle is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.send_timeout):
                    await self._idle.wait()
        if self.trace is not None:
            await self.trace.shutdown()
        await self.instance.unregister(producer_group=self.group)
        await self.instance.close()

    def _use_uniq_keys(self, uniq: UniqKeysPy) -> None:
        """UNIQ_KEYs from ``uniq``, and the plain-message fast paths that take them: one making
        ``send_async``'s ``_AsyncSend``, one the ``_Prepared`` of a sync send or a batch entry."""
        self._uniq = uniq
        self._plain = PlainPrep(Message, _AsyncSend, uniq, self._valid_topics)
        self._plain_prepared = PlainPrep(Message, _Prepared, uniq, self._valid_topics)

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _instance(self) -> ClientInstance:
        if not self._started or self.instance is None:
            raise MQClientError("the producer is not started (await producer.start())")
        return self.instance

    # -- ClientInstance's view ------------------------------------------------------------------

    def topics(self) -> Iterable[str]:
        return list(self._infos)

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        info = publish_info(topic, route)
        if info.ok:
            old = self._infos.get(topic)
            self._infos[topic] = info
            if self.fault is not None and old is not None:
                self._forgive_new_masters(old.route, route)

    def _forgive_new_masters(self, old: TopicRouteData, new: TopicRouteData) -> None:
        """A broker name whose master moved (a failover) is available again: its isolation
        was earned by the old master, and would keep sends off the new one for up to 600 s."""
        assert self.fault is not None
        for bd in new.brokerDatas:
            addr = bd.brokerAddrs.get(MASTER_ID)
            if addr is not None and addr != master_address(old, bd.brokerName) \
                    and bd.brokerName in self.fault:
                log.info("broker %s has a new master (%s): no longer avoided", bd.brokerName, addr)
                self.fault.remove(bd.brokerName)

    def on_check_transaction(self, addr: str, cmd: RemotingCommand) -> None:
        log.warning("CHECK_TRANSACTION_STATE from %s for group %s, which is not transactional",
                    addr, self.group)

    # -- routes ---------------------------------------------------------------------------------

    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues, sorted (Java's ``fetchPublishMessageQueues``)."""
        return list((await self._publish_info(topic)).queues)

    async def _publish_info(self, topic: str) -> TopicPublishInfo:
        info = self._infos.get(topic)
        if info is not None:
            return info
        inst = self._instance()
        route = await inst.update_route(topic)
        if route is not None:
            self.on_route(topic, route)
            info = self._infos.get(topic)
            if info is not None:
                return info
        else:  # unknown topic: through TBW102's route, the broker creates it
            default = await inst.namesrv.fetch_route(self.create_topic_key)
            if default is not None:
                for qd in default.queueDatas:
                    n = min(self.default_topic_queue_nums, qd.readQueueNums)
                    qd.readQueueNums = qd.writeQueueNums = n
                inst.learn_brokers(default)
                info = publish_info(topic, default)
                if info.ok:
                    self._infos[topic] = info
                    return info
        raise MQClientError(f"no route for topic {topic!r}: the NameServers {inst.namesrv_addrs} know no "
                            "broker that accepts it (create the topic or enable autoCreateTopicEnable)")

    # -- sync -----------------------------------------------------------------------------------

    async def send(
        self,
        msg: Message,
        queue: MessageQueue | None = None,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,  # noqa: ASYNC109 - RocketMQ's per-send timeout
    ) -> SendResult:
        """Send and wait for the broker's answer. ``queue`` or ``selector(queues, msg, arg)`` pin
        the queue (ordered messages: the same ``arg``, the same queue)."""
        p = self._plain_prepared.prepare(msg, self.max_message_size, self.compress_over)
        if p is None:
            p = self._prepare(msg)
        if self.trace is None:
            return await self._send(p, queue, selector, arg, msg, timeout)
        started = time.time_ns() // 1_000_000
        result = await self._send(p, queue, selector, arg, msg, timeout)
        self._trace_pub(msg, result, started)
        return result

    def _trace_pub(self, msg: Message, result: SendResult, started_ms: int,
                   msg_type: MessageType | None = None) -> None:
        if self.trace is not None and self.instance is not None:
            self.trace.pub(self.group, msg, result, started_ms,
                           self.instance.route_table.broker_addr(result.queue.brokerName), msg_type)


    async def send_batch(self, msgs: Sequence[Message], queue: MessageQueue | None = None,
                         *, timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """One SEND_BATCH_MESSAGE: all to one topic and queue; ``msg_id`` joins the UNIQ_KEYs."""
        return await self._send(self._prepare_batch(msgs), queue, None, None, None, timeout)

    async def _send(self, p: _Prepared, queue: MessageQueue | None, selector: MessageQueueSelector | None,
                    arg: Any, msg: Message | None, timeout: float | None) -> SendResult:  # noqa: ASYNC109
        inst = self._instance()
        budget = self.send_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        pinned = queue is not None or selector is not None
        attempts = 1 if pinned else 1 + self.retry_times
        last_broker: str | None = None
        errors: list[str] = []
        last_error: Exception | None = None
        for _ in range(attempts):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if queue is not None:  # an explicit queue needs only its broker's address
                mq = queue
            elif selector is not None:
                info = await self._publish_info(p.topic)
                mq = selector(info.queues, msg if msg is not None else Message(p.topic, p.body), arg)
            else:
                mq = select_queue(await self._publish_info(p.topic), last_broker, self.fault)
            last_broker = mq.brokerName
            started = time.monotonic()
            try:
                addr = await inst.require_broker_addr(mq.brokerName, p.topic)
                reply = await self._invoke(inst, addr, p, mq, left)
                result = self._result(reply, p, mq, addr)
            except (MQClientError, MQBrokerError) as e:
                self._fault(mq.brokerName, started, isolation=True)
                if isinstance(e, MQBrokerError):
                    if e.code not in RETRY_CODES:
                        raise self._explained(e, p, msg) from None
                else:  # the broker is unreachable: a failover may have moved its master
                    inst.route_failed(p.topic)
                errors.append(f"{mq.brokerName}: {e}")
                last_error = e
                continue
            self._fault(mq.brokerName, started, isolation=False)
            if result.status is not SendStatus.SEND_OK and self.retry_not_store_ok and not pinned:
                errors.append(f"{mq.brokerName}: {result.status.name}")
                continue
            return result
        if isinstance(last_error, MQBrokerError) and len(errors) == 1:
            raise last_error
        if isinstance(last_error, MQBrokerError):
            raise MQBrokerError(last_error.code, f"{last_error.remark} (after {len(errors)} attempts: "
                                + "; ".join(errors) + ")", last_error.addr) from last_error
        raise MQClientError(f"send to {p.topic!r} failed after {len(errors)} attempt(s) in {budget:.1f} s: "
                            + ("; ".join(errors) or "timed out"))

    def _new_lanes(self, info: TopicPublishInfo) -> _Lanes:
        if len(self._lanes) >= 4096:
            self._lanes.clear()
        lanes = self._lanes[info.topic] = _Lanes(info, self.group, self.create_topic_key,
                                                 self.default_topic_queue_nums,
                                                 self.config.credentials)
        return lanes

    async def _invoke(self, inst: ClientInstance, addr: str, p: _Prepared, mq: MessageQueue,
                      timeout: float) -> RemotingCommand:  # noqa: ASYNC109 - the send's budget
        """Send ``p`` to ``mq`` at ``addr`` in its template frame and wait for the reply;
        ``RemotingError`` becomes ``MQClientError`` (as ``ClientInstance.invoke`` does)."""
        conn = await inst.connection(addr)
        key = (p.topic, mq.brokerName, mq.queueId, p.batch)
        template = self._templates.get(key)
        if template is None:
            if len(self._templates) >= 4096:
                self._templates.clear()
            template = self._templates[key] = send_frame(
                self.group, p.topic, self.create_topic_key, self.default_topic_queue_nums, mq.queueId,
                mq.brokerName, p.batch, self.config.credentials)
        opaque = next_opaque()
        data = template.frame(opaque, p.sys_flag, time.time_ns() // 1_000_000, p.flag, p.wire, p.body)
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        try:
            conn.send_request(data, b"", opaque, _SEND_BATCH if p.batch else _SEND_V2, timeout,
                              FutureWaiter(fut))
            return await fut
        except RemotingError as e:
            raise MQClientError(str(e)) from e

    def _fault(self, broker: str, started: float, *, isolation: bool) -> None:
        if self.fault is not None:
            self.fault.update(broker, int((time.monotonic() - started) * 1000), isolation)

    # -- oneway ---------------------------------------------------------------------------------

    async def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        """Send without an answer: nothing tells whether the broker stored it."""
        p = self._prepare(msg)
        info = await self._publish_info(p.topic)
        mq = queue or select_queue(info, None, self.fault)
        inst = self._instance()
        addr = await inst.require_broker_addr(mq.brokerName, p.topic)
        conn = await inst.connection(addr)
        conn.send_oneway(self._command(p, mq))

    # -- async ----------------------------------------------------------------------------------

    def send_async(self, msg: Message,
                   callback: Callable[[asyncio.Future[SendResult]], None] | None = None,
                   ) -> asyncio.Future[SendResult]:
        """Start a send and return its future at once (``callback(future)`` runs when it is done).
        At most ``async_window`` are in flight; up to ``async_backlog`` more wait their turn."""
        if not self._started:
            self._instance()  # raises
        p = self._plain.prepare(msg, self.max_message_size, self.compress_over)
        if p is None:  # not a plain message (or a bad one): the general path
            p = self._prepare(msg, _AsyncSend)
        fut: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        p.traced = None if self.trace is None else (msg, time.time_ns() // 1_000_000)
        if callback is not None:
            fut.add_done_callback(callback)
        p.fut = fut
        p.producer = self
        if self._inflight < self.async_window:
            self._launch(p, self.retry_times_async, None)
        elif len(self._backlog) < self.async_backlog:
            self._backlog.append(p)
        else:
            raise MQClientError(f"{self.async_window} async sends in flight and "
                                f"{len(self._backlog)} waiting: "
                                "await some before sending more")
        return fut

    async def flush(self) -> None:
        """Wait until every async send has completed."""
        if self._idle is not None:
            await self._idle.wait()

    def _launch(self, p: _AsyncSend, retries: int, last: str | None) -> None:
        """Send ``p`` now. Never raises: it runs from reply waiters and the backlog, so a send
        that cannot go fails its future. While ``shutdown`` waits for the sends in flight, the
        backlog still goes out on the open instance. Round robin without fault avoidance takes
        the lane's cached connection (``_Lane``); one found closed sends through the slow path,
        as a broker without an open connection does."""
        inst = self.instance
        if inst is None:
            if not p.fut.done():
                p.fut.set_exception(MQClientError("the producer is not started (await producer.start())"))
            return
        self._inflight += 1
        if self._inflight == 1 and self._idle is not None:  # set only when none was in flight
            self._idle.clear()
        p.retries = retries
        info = self._infos.get(p.topic)
        if info is not None:
            lanes = self._lanes.get(p.topic)
            if lanes is None or lanes.info is not info:
                lanes = self._new_lanes(info)
            lane = None
            if last is None and self.fault is None and lanes.lanes:  # select_one's round robin
                lane = lanes.lanes[info.next_index() % len(lanes.lanes)]
                conn = lane.conn
                if conn is None or inst.broker_addrs.get(lane.broker) is not lane.addrs:
                    conn = lane.resolve(inst)
                mq, frame, addr = lane.mq, lane.frame, lane.addr
            else:
                mq = select_queue(info, last, self.fault)
                frame = lanes.frame(mq)
                addr = inst.route_table.broker_addr(mq.brokerName) or ""
                conn = inst.remoting.cached(addr) if addr else None
            if conn is not None:
                p.mq = mq
                p.addr = addr
                p.started = time.monotonic() if self.fault is not None else 0.0
                try:
                    opaque = next_opaque()
                    data = frame.frame(opaque, p.sys_flag, time.time_ns() // 1_000_000, p.flag, p.wire,
                                       p.body)
                    conn.send_request(data, b"", opaque, _SEND_V2, self.send_timeout, p)
                    return
                except Exception as e:  # noqa: BLE001 - reported through the future
                    if conn.is_open:
                        p.addr = ""
                        self._async_done(p, e)
                        return
                    if lane is not None:  # closed under us: found again next time
                        lanes.forget(conn)
        asyncio.get_running_loop().create_task(self._slow_launch(p, last))

    async def _slow_launch(self, p: _AsyncSend, last: str | None) -> None:
        p.started = time.monotonic()
        p.mq = MessageQueue(p.topic, last or "?", -1)
        p.addr = ""
        try:
            info = await self._publish_info(p.topic)
            p.mq = select_queue(info, last, self.fault)
            inst = self._instance()
            p.addr = await inst.require_broker_addr(p.mq.brokerName, p.topic)
            await inst.connection(p.addr)  # connected before the latency clock starts
            p.started = time.monotonic()
            reply = await self._invoke(inst, p.addr, p, p.mq, self.send_timeout)
        except Exception as e:  # noqa: BLE001 - reported through the future
            self._async_done(p, e)
            return
        self._async_done(p, None, reply)

    def _async_done(self, p: _AsyncSend, error: BaseException | None,
                    reply: RemotingCommand | None = None) -> None:
        """The end of ``p``'s attempt (``p.mq``, ``p.addr``, ``p.started``, ``p.retries``): its
        reply or error; a retryable failure launches the next attempt."""
        self._inflight -= 1
        fut = p.fut
        result: SendResult | None = None
        if error is None and reply is not None:
            try:
                result = self._result(reply, p, p.mq, p.addr)
            except (MQBrokerError, MQClientError) as e:
                error = e
        if error is not None:
            self._fault(p.mq.brokerName, p.started, isolation=True)
            if not isinstance(error, MQBrokerError) and self.instance is not None:
                self.instance.route_failed(p.topic)
            retryable = not isinstance(error, MQBrokerError) or error.code in RETRY_CODES
            if p.retries > 0 and retryable and not fut.done() and self._started:
                self._launch(p, p.retries - 1, p.mq.brokerName)
                return
            if not fut.done():
                fut.set_exception(error if isinstance(error, MQClientError | MQBrokerError)
                                  else MQClientError(f"async send to {p.topic!r} failed: {error}"))
        else:
            self._fault(p.mq.brokerName, p.started, isolation=False)
            if not fut.done() and result is not None:
                fut.set_result(result)
                if p.traced is not None:
                    self._trace_pub(p.traced[0], result, p.traced[1])
        self._next_from_backlog()

    def _next_from_backlog(self) -> None:
        while self._backlog and self._inflight < self.async_window:
            p = self._backlog.popleft()
            if not p.fut.done():
                self._launch(p, self.retry_times_async, None)
        if self._inflight == 0 and not self._backlog and self._idle is not None:
            self._idle.set()


_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
_SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
