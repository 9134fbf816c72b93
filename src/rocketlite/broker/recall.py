"""Recalling a delayed message (RocketMQ 5.3): the recall handle's codec and the broker's
``RecallMessageProcessor`` (Remoting RECALL_MESSAGE, 370), which the gRPC front's RecallMessage
calls too.

Handle (``RecallMessageHandle.HandleV1``): ``"v1 <topic> <brokerName> <timestamp> <messageId>"``
(space-joined) in URL-safe Base64 with padding. ``timestamp`` is the stored timer message's
``TIMER_OUT_MS`` + 1 (``SendMessageProcessor``: "consider of floor"), a time inside the slot that
delivers it; ``messageId`` is its UNIQ_KEY. Decoding accepts the text without padding (Java's URL
decoder does) and refuses anything else that is not Base64, not ``v1`` or has fewer than 5 fields.

Recall: the topic must exist (TOPIC_NOT_EXIST); the broker must be writable (SERVICE_NOT_AVAILABLE);
the handle must decode, name the request's topic and this broker, and its time must be ahead, by
less than ``timerMaxDelaySec`` (each ILLEGAL_OPERATION with the Java remark). The broker then
stores a delete marker: a message to the topic's queue 0, body ``0``, tag ``_RECALL_TAG_``,
``UNIQ_KEY`` = the message id, ``TIMER_DELIVER_MS`` = the handle's time, ``TIMER_DEL_UNIQKEY`` =
``build_delete_key(topic, id)``, through the diverters (so into the timer wheel's slot of the
message; see ``broker/timer.py``), and answers SUCCESS with ``msgId``. Under SYNC_FLUSH it waits
for the flush; a flush timeout is still SUCCESS (Java: FLUSH_DISK_TIMEOUT is SUCCESS).

Deliberate difference: 5.x refuses RECALL_MESSAGE unless ``recallMessageEnable`` (default false)
is set; this broker has no such switch and always recalls.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import logging
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_WRITE
from rocketlite.broker.timer_divert import (
    TIMER_DEL_UNIQKEY,
    TIMER_DELIVER_MS,
    TIMER_OUT_MS,
    TIMER_TOPIC,
    build_delete_key,
    get_property,
    parse_int,
)
from rocketlite.broker.topics import RETRY_GROUP_TOPIC_PREFIX
from rocketlite.common.errors import (
    FlushTimeoutError,
    HeaderError,
    MessageIllegalError,
    RocketliteError,
)
from rocketlite.formats.properties import PGROUP, REAL_TOPIC, TAGS, UNIQ_KEY, encode_properties
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import RecallMessageRequestHeader, RecallMessageResponseHeader
from rocketlite.remoting.connection import Connection
from rocketlite.store.commitlog import now_ms
from rocketlite.store.message import LOOPBACK_V4, MessageToStore

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

VERSION_1 = "v1"
SEPARATOR = " "
RECALL_TAG = "_RECALL_TAG_"
MAX_HANDLE_CHARS = 4096  # a handle longer than this is refused before decoding


class RecallError(RocketliteError):
    """A recall the broker refuses; ``response_code`` is the Remoting code it answers."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.response_code = code


@dataclasses.dataclass(frozen=True, slots=True)
class RecallHandle:
    """``RecallMessageHandle.HandleV1``; ``timestamp`` is kept as the text it was sent as."""

    topic: str
    broker_name: str
    timestamp: str
    message_id: str
    version: str = VERSION_1

    def encode(self) -> str:
        raw = SEPARATOR.join((self.version, self.topic, self.broker_name, self.timestamp,
                              self.message_id))
        return base64.urlsafe_b64encode(raw.encode()).decode("ascii")

    @classmethod
    def decode(cls, handle: str) -> RecallHandle:
        """Raises ``RecallError`` (ILLEGAL_OPERATION, "recall handle is invalid")."""
        invalid = RecallError(ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid")
        if not handle or len(handle) > MAX_HANDLE_CHARS:
            raise invalid
        text = handle.rstrip("=")
        try:
            raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            raise invalid from None
        items = raw.decode("utf-8", errors="replace").split(SEPARATOR)
        while items and not items[-1]:  # Java's split drops trailing empty strings
            items.pop()
        if len(items) < 5 or items[0] != VERSION_1:
            raise invalid
        return cls(items[1], items[2], items[3], items[4])


def recall_handle(topic: str, broker_name: str, out_ms: int, message_id: str) -> str:
    """The handle SendMessage answers for a delayed message stored with ``TIMER_OUT_MS`` =
    ``out_ms`` (the handle's time is ``out_ms + 1``, as 5.x's broker builds it)."""
    return RecallHandle(topic, broker_name, str(out_ms + 1), message_id).encode()


def handle_for(stored: MessageToStore, broker_name: str) -> str:
    """The recall handle a send answers (gRPC ``SendResultEntry.recall_handle``, Remoting
    ``SendMessageResponseHeader.recallHandle``): for a message the timer wheel took (stored to
    the timer topic with ``TIMER_OUT_MS`` and ``REAL_TOPIC``, not a retry topic: 5.x's
    ``SendMessageProcessor``), else ``""``."""
    if stored.topic != TIMER_TOPIC:
        return ""
    text = stored.properties
    out_ms = parse_int(get_property(text, TIMER_OUT_MS))
    topic = get_property(text, REAL_TOPIC)
    msg_id = get_property(text, UNIQ_KEY)
    if out_ms is None or topic is None or msg_id is None or topic.startswith(
            RETRY_GROUP_TOPIC_PREFIX):
        return ""
    return recall_handle(topic, broker_name, out_ms, msg_id)


def check(broker: Broker, topic: str, handle_text: str, now: int) -> RecallHandle:
    """The request's handle, once every check passed (see the module docstring)."""
    cfg = broker.config
    if not cfg.broker_permission & PERM_WRITE:
        raise RecallError(ResponseCode.SERVICE_NOT_AVAILABLE,
                          "recall failed, broker service not available")
    if broker.topics.get(topic) is None:
        raise RecallError(ResponseCode.TOPIC_NOT_EXIST,
                          f"recall failed, the topic[{topic}] not exist")
    handle = RecallHandle.decode(handle_text)
    if handle.topic != topic:
        raise RecallError(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
    if handle.broker_name != cfg.broker_name:
        raise RecallError(ResponseCode.ILLEGAL_OPERATION,
                          "recall failed, broker service not available")
    try:
        left = int(handle.timestamp) - now
    except ValueError:
        left = -1
    if left <= 0 or left >= cfg.timer_max_delay_sec * 1000:
        raise RecallError(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
    return handle


def marker(handle: RecallHandle, producer_group: str | None, born_host: bytes | None,
           born_port: int, now: int) -> MessageToStore:
    """The delete marker for ``handle`` (``RecallMessageProcessor.buildMessage``)."""
    props = {TAGS: RECALL_TAG, TIMER_DEL_UNIQKEY: build_delete_key(handle.topic, handle.message_id),
             UNIQ_KEY: handle.message_id, TIMER_DELIVER_MS: handle.timestamp}
    if producer_group:
        props[PGROUP] = producer_group
    return MessageToStore(handle.topic, b"0", 0, properties=encode_properties(props),
                          born_timestamp=now, born_host=born_host or LOOPBACK_V4,
                          born_port=born_port)


async def recall(broker: Broker, topic: str, handle_text: str, producer_group: str | None = None,
                 born_host: bytes | None = None, born_port: int = 0) -> str:
    """Check the request, store its delete marker; the recalled message's id. Raises
    ``RecallError``, the timer's errors (disabled, too late) or the store's."""
    now = now_ms()
    handle = check(broker, topic, handle_text, now)
    try:
        msg = broker.divert(marker(handle, producer_group, born_host, born_port, now))
    except MessageIllegalError as e:  # its time came since the check
        raise RecallError(ResponseCode.ILLEGAL_OPERATION,
                          f"recall failed, timestamp invalid: {e}") from None
    if msg.topic != TIMER_TOPIC:
        raise RecallError(ResponseCode.SYSTEM_ERROR, "recall failed, the delete marker was not "
                          "taken by the timer wheel")
    put = broker.store.put_messages([msg])
    if put.flushed is not None:
        timeout = broker.store.config.sync_flush_timeout / 1000
        try:
            async with asyncio.timeout(timeout):
                await asyncio.wrap_future(put.flushed)
        except (TimeoutError, FlushTimeoutError):
            log.warning("recall of %s: marker stored, not flushed within %g s",
                        handle.message_id, timeout)
    return handle.message_id


class RecallProcessor:
    """RECALL_MESSAGE (370) on the broker's Remoting server."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def register(self) -> None:
        self.broker.server.register(RequestCode.RECALL_MESSAGE, self.recall)

    async def recall(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = RecallMessageRequestHeader.from_ext(cmd.ext_fields)
        except HeaderError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad RECALL_MESSAGE header: {e}")
        try:
            msg_id = await recall(self.broker, h.topic, h.recallHandle, h.producerGroup,
                                  conn.peer_host, conn.peer_port)
        except RecallError as e:
            return cmd.response(e.response_code, str(e))
        return cmd.response(ResponseCode.SUCCESS, None,
                            RecallMessageResponseHeader(msgId=msg_id).to_ext())
