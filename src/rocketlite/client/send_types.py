"""The producer's send types: ``SendStatus``, ``SendResult``, a message prepared once for every
attempt (``_Prepared``), the broker codes worth another broker (``RETRY_CODES``), Java's hash
selector, the per-topic send frame templates and connections (``_Lanes`` of ``_Lane``) and an
async send, which is its own ``ReplyWaiter`` (``_AsyncSend``). ``producer`` re-exports the public ones."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocketlite.acl.sign import Credentials
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.message import Message
from rocketlite.client.route import TopicPublishInfo
from rocketlite.client.send_codec import ResultReader
from rocketlite.client.send_sign import FrameTemplate, send_frame
from rocketlite.formats.javahash import java_string_hash
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from rocketlite.client.instance import ClientInstance
    from rocketlite.client.producer import Producer
    from rocketlite.remoting.connection import Connection

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """Java's ``SelectMessageQueueByHash``: ``abs(arg.hashCode()) % n`` (Java's hash for strings
    and ints, so Python and Java producers put a sharding key on the same queue)."""
    h = java_string_hash(arg) if isinstance(arg, str) else hash(arg) & 0x7FFFFFFF
    return queues[abs(h) % len(queues)]


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}

# DefaultMQProducer.retryResponseCodes: broker answers worth another broker.
RETRY_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY, ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT,
})


@dataclass(slots=True, frozen=True)
class SendResult:
    """``msg_id`` is the UNIQ_KEY (comma-joined for a batch); ``offset_msg_id`` the broker's id;
    ``recall_handle`` the handle a 5.3 broker answers for a delayed message the timer wheel took
    (``SendMessageResponseHeader.recallHandle``: RECALL_MESSAGE withdraws the message with it),
    else None."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    recall_handle: str | None = None


@dataclass(slots=True)
class _Prepared:
    """A message encoded once, whatever queue and retry it goes to."""

    topic: str
    body: bytes
    properties: str
    sys_flag: int
    flag: int
    uniq_key: str
    batch: bool = False
    wire: bytes = b""  # the UTF-8 of ``properties``, for the send frames


class _Lane:
    """One queue of a topic's round robin: its send frame template, and the open connection to
    its broker's master with the address map it was found in (``ClientInstance.broker_addrs``
    replaces a broker's map whenever a route is learned, so an identity check per send tells
    whether the cached connection still belongs to the broker; a closed one is dropped by the
    sender)."""

    __slots__ = ("addr", "addrs", "broker", "conn", "frame", "mq")

    def __init__(self, mq: MessageQueue, frame: FrameTemplate) -> None:
        self.mq = mq
        self.frame = frame
        self.broker = mq.brokerName
        self.addrs: dict[int, str] | None = None
        self.addr = ""
        self.conn: Connection | None = None

    def resolve(self, inst: ClientInstance) -> Connection | None:
        """The open connection to the broker's master now (None: none is open, or no address)."""
        self.addrs = inst.broker_addrs.get(self.broker)
        addr = inst.route_table.broker_addr(self.broker)
        self.addr = addr or ""
        self.conn = None if addr is None else inst.remoting.cached(addr)
        return self.conn


class _Lanes:
    """A topic's send frame templates (``SendFrame``), made once per ``TopicPublishInfo`` (so
    again when a route update replaces it): ``lanes[i]`` is ``info.queues[i]``'s ``_Lane``;
    ``frame`` finds or makes one for a queue picked another way (a retry, fault avoidance)."""

    __slots__ = ("by_queue", "create_topic_key", "credentials", "default_queue_nums", "group", "info",
                 "lanes")

    def __init__(self, info: TopicPublishInfo | None, group: str, create_topic_key: str,
                 default_queue_nums: int, credentials: Credentials | None = None) -> None:
        self.info = info
        self.credentials = credentials  # signed frames with them (ACL)
        self.group = group
        self.create_topic_key = create_topic_key
        self.default_queue_nums = default_queue_nums
        self.by_queue: dict[tuple[str, int], FrameTemplate] = {}
        self.lanes: list[_Lane] = [] if info is None else [_Lane(mq, self.frame(mq)) for mq in info.queues]

    def forget(self, conn: Connection) -> None:
        """``conn`` was found closed: every lane on it looks its broker's connection up again."""
        for lane in self.lanes:
            if lane.conn is conn:
                lane.conn = None

    def frame(self, mq: MessageQueue) -> FrameTemplate:
        key = (mq.brokerName, mq.queueId)
        frame = self.by_queue.get(key)
        if frame is None:
            if len(self.by_queue) >= 4096:
                self.by_queue.clear()
            frame = self.by_queue[key] = send_frame(self.group, mq.topic, self.create_topic_key,
                                                    self.default_queue_nums, mq.queueId, mq.brokerName,
                                                    False, self.credentials)
        return frame


_READER = ResultReader(SendResult, MessageQueue)


class _AsyncSend(_Prepared):
    """An async send: the prepared message (made by ``Producer._prepare``), its future, and the
    ``ReplyWaiter`` of its current attempt (``mq``, ``addr``, ``started``, ``retries`` left, set
    by ``Producer._launch``): one object per message, whatever the retries. ``traced`` is the
    message and its start time (ms) when the producer traces (``enable_trace``), else None."""

    __slots__ = ("addr", "fut", "mq", "producer", "retries", "started", "traced")
    fut: asyncio.Future[SendResult]
    producer: Producer
    retries: int
    mq: MessageQueue
    addr: str
    started: float
    traced: tuple[Message, int] | None

    def reply_received(self, result: RemotingCommand | BaseException) -> None:
        producer = self.producer
        if result.__class__ is RemotingCommand:
            status = _STATUS_BY_CODE.get(result.code)  # type: ignore[call-overload]
            sent = None if status is None else _READER.read(
                result.ext_fields, status, self.uniq_key, self.mq)
            if sent is None:  # an error code or a malformed reply: _result raises which
                try:
                    producer._result(result, self, self.mq, self.addr)
                except (MQBrokerError, MQClientError) as e:
                    producer._async_done(self, e)
                return
            producer._inflight -= 1
            if producer.fault is not None:
                producer._fault(self.mq.brokerName, self.started, isolation=False)
            fut = self.fut
            if not fut.done():
                fut.set_result(sent)
            if self.traced is not None:
                producer._trace_pub(self.traced[0], sent, self.traced[1])
            if producer._backlog or not producer._inflight:
                producer._next_from_backlog()
        else:
            producer._async_done(self, result)  # type: ignore[arg-type]


def _packed_ipv4(ip: str) -> bytes:
    try:
        parts = bytes(int(x) for x in ip.split("."))
    except ValueError:
        return b"\x7f\x00\x00\x01"
    return parts if len(parts) == 4 else b"\x7f\x00\x00\x01"
