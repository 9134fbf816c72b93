"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to consume; the broker
re-writes it for the group's retry topic, delayed, or for its dead-letter topic once it has been
retried enough (RocketMQ 4.9's ``SendMessageProcessor.asyncConsumerSendMsgBack``).

- The subscription group must exist (or be auto-created): else SUBSCRIPTION_GROUP_NOT_EXIST.
- A broker without write permission answers NO_PERMISSION; a group with ``retryQueueNums <= 0``
  SUCCESS with nothing written (Java: the group does not retry).
- The message is read at ``header.offset`` (CommitLog offset); not there: SYSTEM_ERROR.
- ``RETRY_TOPIC`` = the original topic unless the message already names one (a retry of a retry).
- ``reconsumeTimes >= maxReconsumeTimes`` (the header's, else the group's ``retryMaxTimes``) or
  ``delayLevel < 0`` → ``%DLQ%{group}`` (1 queue), not delayed. Else ``%RETRY%{group}`` (created
  with the group's ``retryQueueNums`` queues), with ``DELAY`` = ``delayLevel``, or 3 +
  reconsumeTimes when the client leaves it 0, and through ``Broker.divert`` so the schedule
  service parks it in ``SCHEDULE_TOPIC_XXXX``.
- The new message: reconsumeTimes + 1, ``ORIGIN_MESSAGE_ID`` = the message's own (first failure
  keeps it across retries), else the header's ``originMsgId``, else the offset message id;
  ``UNIQ_KEY`` and the other properties kept.

Deliberate difference: the DLQ topic is created READ|WRITE (Java 4.9 creates it write-only, so a
consumer must first change its permission); rocketlite makes dead letters readable by pull at
once, which ``rocketlite admin resend-dlq`` and operators rely on.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_READ, PERM_WRITE
from rocketlite.broker.timer_divert import get_property, set_properties
from rocketlite.broker.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, TopicError
from rocketlite.common.errors import (
    DiskFullError,
    FlushError,
    FlushTimeoutError,
    HeaderError,
    MessageIllegalError,
    RocketliteError,
    StoreClosedError,
)
from rocketlite.formats.message_id import encode_message_id
from rocketlite.formats.message_record import SYSFLAG_BORNHOST_V6, SYSFLAG_STOREHOST_V6
from rocketlite.formats.properties import DELAY, ORIGIN_MESSAGE_ID, RETRY_TOPIC
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import ConsumerSendMsgBackRequestHeader
from rocketlite.remoting.connection import Connection
from rocketlite.store.message import MessageToStore

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

DLQ_NUMS_PER_GROUP = 1  # MixAll.DLQ_NUMS_PER_GROUP
DEFAULT_DELAY_BASE = 3  # delayLevel 0 → 3 + reconsumeTimes (10 s, 30 s, 1 m ... by default)
_HOST_FLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6  # the store sets these itself


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


class SendBackProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.sent_back = 0  # messages written to a retry topic
        self.dead = 0  # messages written to a DLQ

    def register(self) -> None:
        self.broker.server.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.send_back)

    async def send_back(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = ConsumerSendMsgBackRequestHeader.from_ext(cmd.ext_fields)
        except HeaderError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad CONSUMER_SEND_MSG_BACK header: {e}")
        try:
            built = self.build(h)
        except TopicError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        if isinstance(built, tuple):
            return cmd.response(*built)
        if built is None:
            return cmd.response(ResponseCode.SUCCESS)
        return await self._put(cmd, built)

    def build(self, h: ConsumerSendMsgBackRequestHeader
              ) -> MessageToStore | tuple[int, str] | None:
        """The message to store for a send-back, an error (code, remark), or None when the group
        does not retry. Raises TopicError if the retry or DLQ topic cannot be created."""
        b = self.broker
        sgc = b.subscriptions.get(h.group)
        if sgc is None:
            return (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                    b.subscriptions.missing(h.group, f"subscription group not exist, {h.group}"))
        if not b.config.broker_permission & PERM_WRITE:
            return (ResponseCode.NO_PERMISSION,
                    f"the broker[{b.config.broker_name}] sending message is forbidden")
        if sgc.retryQueueNums <= 0:
            return None
        rec = None
        why = "no message there"
        try:
            rec = b.store.look_message(h.offset)
        except RocketliteError as e:
            why = str(e)
        if rec is None:
            return (ResponseCode.SYSTEM_ERROR,
                    f"look message by offset failed, CommitLog offset {h.offset}: {why}")
        max_times = h.maxReconsumeTimes if h.maxReconsumeTimes is not None else sgc.retryMaxTimes
        text = rec.properties_text
        put: dict[str, str] = {}
        if get_property(text, RETRY_TOPIC) is None:
            put[RETRY_TOPIC] = rec.topic
        origin = (get_property(text, ORIGIN_MESSAGE_ID) or h.originMsgId
                  or encode_message_id(rec.store_host, rec.store_port, rec.commit_log_offset))
        put[ORIGIN_MESSAGE_ID] = origin
        level = h.delayLevel
        if rec.reconsume_times >= max_times or level < 0:
            topic = dlq_topic(h.group)
            b.topics.create_plain(topic, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
            queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
            drop: tuple[str, ...] = (DELAY,)
            self.dead += 1
        else:
            topic = retry_topic(h.group)
            tc = b.topics.create_plain(topic, sgc.retryQueueNums, PERM_READ | PERM_WRITE)
            if not tc.perm & PERM_WRITE:
                return (ResponseCode.NO_PERMISSION,
                        f"the topic[{topic}] sending message is forbidden")
            queue_id = random.randrange(max(1, tc.writeQueueNums))
            put[DELAY] = str(level if level > 0 else DEFAULT_DELAY_BASE + rec.reconsume_times)
            drop = ()
            self.sent_back += 1
        msg = MessageToStore(
            topic, rec.body, queue_id, rec.flag, set_properties(text, drop, put),
            rec.sys_flag & ~_HOST_FLAGS, rec.born_timestamp, rec.born_host, rec.born_port,
            rec.reconsume_times + 1,
        )
        return msg if drop else b.divert(msg)

    async def _put(self, cmd: RemotingCommand, msg: MessageToStore) -> RemotingCommand:
        b = self.broker
        try:
            put = b.store.put_messages((msg,))
        except MessageIllegalError as e:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(e))
        except (DiskFullError, FlushError, StoreClosedError) as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"sending the message back failed: {e}")
        b.stats.put_messages += 1
        if put.flushed is not None:
            timeout = b.store_config.sync_flush_timeout / 1000
            try:
                await asyncio.wait_for(asyncio.wrap_future(put.flushed), timeout)
            except (TimeoutError, FlushError, FlushTimeoutError) as e:
                log.warning("sent-back message for %s stored but not confirmed durable: %s",
                            msg.topic, str(e) or "timeout")
        return cmd.response(ResponseCode.SUCCESS)
