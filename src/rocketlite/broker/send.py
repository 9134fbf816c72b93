"""Send processors: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320, and 10/310
with the batch flag, as C++ clients send batches).

Per request: parse the header (V2's one-letter keys for 310 and 320), check the broker and topic
are writable (creating an unknown topic from ``defaultTopic`` when allowed), pick the queue, append
to the store on the event loop thread (an append is a memory copy into the mapped CommitLog), and
reply with the offset message id, queue id and queue offset. Under SYNC_FLUSH the reply waits for
the group commit that makes the message durable, or answers FLUSH_DISK_TIMEOUT.

Errors answer with RocketMQ's codes and a remark that says why: MESSAGE_ILLEGAL (13) for a bad
message or batch, TOPIC_NOT_EXIST (17), NO_PERMISSION (16), SERVICE_NOT_AVAILABLE (14) when the
disk is too full or the store cannot write, FLUSH_DISK_TIMEOUT (10).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_WRITE
from rocketlite.broker.topics import TopicError
from rocketlite.common.errors import (
    BodyError,
    DiskFullError,
    FlushError,
    FlushTimeoutError,
    HeaderError,
    MessageIllegalError,
    StoreClosedError,
)
from rocketlite.formats.message_id import encode_message_id
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import SendMessageRequestHeader
from rocketlite.protocol.message_batch import decode_batch
from rocketlite.remoting.connection import Connection
from rocketlite.store.message import MessageBatch, MessageToStore

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

MAX_BATCH_MESSAGES = 100_000
REGION = "DefaultRegion"

Reply = RemotingCommand | Awaitable[RemotingCommand | None] | None


class SendProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.store = broker.store
        self.topics = broker.topics
        self.sync_flush = broker.store.config.sync_flush
        self.flush_timeout_s = broker.store.config.sync_flush_timeout / 1000
        self.stats = broker.stats
        self.refresh_store_address()

    def refresh_store_address(self) -> None:
        cl = self.store.commitlog
        self._store_host, self._store_port = cl.store_host, cl.store_port

    def register(self) -> None:
        server = self.broker.server
        server.register(RequestCode.SEND_MESSAGE, self.send_v1)
        server.register(RequestCode.SEND_MESSAGE_V2, self.send_v2)
        server.register(RequestCode.SEND_BATCH_MESSAGE, self.send_batch)

    # -- entry points ----------------------------------------------------------------------

    def send_v1(self, conn: Connection, cmd: RemotingCommand) -> Reply:
        header = SendMessageRequestHeader.from_ext(cmd.ext_fields)
        return self._send(conn, cmd, header, bool(header.batch))

    def send_v2(self, conn: Connection, cmd: RemotingCommand) -> Reply:
        header = SendMessageRequestHeader.from_v2_ext(cmd.ext_fields)
        return self._send(conn, cmd, header, bool(header.batch))

    def send_batch(self, conn: Connection, cmd: RemotingCommand) -> Reply:
        header = SendMessageRequestHeader.from_v2_ext(cmd.ext_fields)
        return self._send(conn, cmd, header, True)

    # -- the work --------------------------------------------------------------------------

    def _topic_config(self, cmd: RemotingCommand, h: SendMessageRequestHeader
                      ) -> TopicConfig | RemotingCommand:
        if not self.broker.config.broker_permission & PERM_WRITE:
            return cmd.response(ResponseCode.NO_PERMISSION,
                                f"the broker[{self.broker.config.broker_name}] sending message "
                                "is forbidden")
        tc = self.topics.get(h.topic)
        if tc is None:
            try:
                tc = self.topics.create_in_send(h.topic, h.defaultTopic, h.defaultTopicQueueNums)
            except TopicError as e:
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(e))
            if tc is None:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"topic[{h.topic}] not exist, apply first please!")
        if not tc.perm & PERM_WRITE:
            return cmd.response(ResponseCode.NO_PERMISSION,
                                f"the topic[{h.topic}] sending message is forbidden")
        return tc

    def _send(self, conn: Connection, cmd: RemotingCommand, h: SendMessageRequestHeader,
              batch: bool) -> Reply:
        tc = self._topic_config(cmd, h)
        if isinstance(tc, RemotingCommand):
            return tc
        queue_id = h.queueId
        if queue_id < 0:
            queue_id = random.randrange(tc.writeQueueNums)
        elif queue_id >= max(tc.writeQueueNums, tc.readQueueNums):
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"request queueId[{queue_id}] is illegal, topic {h.topic} has "
                                f"{tc.writeQueueNums} write queues")
        try:
            if batch:
                return self._put_batch(conn, cmd, h, queue_id)
            return self._put_one(conn, cmd, h, queue_id)
        except (MessageIllegalError, BodyError, HeaderError) as e:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(e))
        except (DiskFullError, FlushError, StoreClosedError) as e:
            return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, str(e))

    def _put_one(self, conn: Connection, cmd: RemotingCommand, h: SendMessageRequestHeader,
                 queue_id: int) -> Reply:
        msg = MessageToStore(
            topic=h.topic, body=cmd.body, queue_id=queue_id, flag=h.flag,
            properties=h.properties or "", sys_flag=h.sysFlag, born_timestamp=h.bornTimestamp,
            born_host=conn.peer_host, born_port=conn.peer_port,
            reconsume_times=h.reconsumeTimes or 0,
        )
        put = self.store.put_messages((msg,))
        r = put.results[0]
        self.stats.put_messages += 1
        reply = cmd.response(ResponseCode.SUCCESS, None, {
            "msgId": encode_message_id(self._store_host, self._store_port, r.commit_log_offset),
            "queueId": str(queue_id),
            "queueOffset": str(r.queue_offset),
            "MSG_REGION": REGION,
            "TRACE_ON": "true",
        })
        return self._after_flush(cmd, reply, put.flushed)

    def _put_batch(self, conn: Connection, cmd: RemotingCommand, h: SendMessageRequestHeader,
                   queue_id: int) -> Reply:
        if h.topic.startswith("%RETRY%"):
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL,
                                "batch sending is not supported for retry topics")
        bodies, props, flags = decode_batch(cmd.body, max_count=MAX_BATCH_MESSAGES)
        if not bodies:
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "the batch has no messages")
        put = self.store.put_batch(MessageBatch(
            topic=h.topic, queue_id=queue_id, bodies=bodies, properties=props,
            flags=flags if any(flags) else None, sys_flag=h.sysFlag,
            born_timestamp=h.bornTimestamp, born_host=conn.peer_host, born_port=conn.peer_port,
        ))
        res = put.result
        self.stats.put_messages += len(res)
        host, port = self._store_host, self._store_port
        ids = ",".join([encode_message_id(host, port, off) for off in res.offsets])
        reply = cmd.response(ResponseCode.SUCCESS, None, {
            "msgId": ids,
            "queueId": str(queue_id),
            "queueOffset": str(res.queue_offset),
            "MSG_REGION": REGION,
            "TRACE_ON": "true",
        })
        return self._after_flush(cmd, reply, put.flushed)

    def _after_flush(self, cmd: RemotingCommand, reply: RemotingCommand,
                     flushed: Future[None] | None) -> Reply:
        if flushed is None:
            return reply
        if flushed.done() and flushed.exception() is None:
            return reply
        return self._wait_flush(cmd, reply, flushed)

    async def _wait_flush(self, cmd: RemotingCommand, reply: RemotingCommand,
                          flushed: Future[None]) -> RemotingCommand:
        try:
            await asyncio.wait_for(asyncio.wrap_future(flushed), self.flush_timeout_s)
        except (TimeoutError, FlushTimeoutError):
            # Stored but not yet durable: the client's SendStatus.FLUSH_DISK_TIMEOUT, with the ids.
            reply.code = ResponseCode.FLUSH_DISK_TIMEOUT
            reply.remark = f"the message was not flushed within {self.flush_timeout_s:g} s"
            return reply
        except (FlushError, OSError) as e:
            return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                                f"the store could not flush the message: {e}")
        return reply
