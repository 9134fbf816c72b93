"""The POP family's Remoting codes over ``PopService``: POP_MESSAGE (200050), ACK_MESSAGE
(200051), CHANGE_MESSAGE_INVISIBLETIME (200053), BATCH_ACK_MESSAGE (200151: a JSON body of
``BatchAck`` entries, each a CK's start offset and a BitSet of acked offsets). These codes only
travel in JSON headers.

POP_MESSAGE's body is the popped records back to back (as a pull's); its header carries what a
Remoting client builds each message's extraInfo from: ``popTime``, ``invisibleTime``,
``reviveQid``, ``startOffsetInfo`` and ``msgOffsetInfo`` (``retry queueId offsets`` entries), and
for an orderly pop ``orderCountInfo`` (each message's earlier deliveries).

Answers (RocketMQ's): messages SUCCESS; none (after polling, or without) POLLING_TIMEOUT, as for
a request that arrives more than 500 ms past ``bornTime + pollTime``; too many held POLLING_FULL;
more than 32 messages or a bad queue id SYSTEM_ERROR; an ack or change with an expired handle or
an offset outside the queue NO_MESSAGE; unknown group SUBSCRIPTION_GROUP_NOT_EXIST; unknown topic
TOPIC_NOT_EXIST; forbidden NO_PERMISSION. Not Java's: a malformed handle or header is
INVALID_PARAMETER with the reason (Java fails with SYSTEM_ERROR).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from rocketlite.broker.pop.acks import parse_handle
from rocketlite.broker.pop.errors import (
    BadPopRequest,
    GroupNotFound,
    InvalidReceiptHandle,
    NoPermission,
    PollingFull,
    PopError,
    ReceiptHandleExpired,
    TopicNotFound,
)
from rocketlite.broker.pop.service import PopResult, PopService, PopStatus, now_ms
from rocketlite.common.errors import HeaderError, RocketliteError
from rocketlite.protocol.bodies import SubscriptionData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketlite.protocol.pop_info import (
    PopInfoError,
    ReceiptHandle,
    msg_offset_info,
    order_count_info,
    parse_batch_ack_body,
    start_offset_info,
)
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.server import RemotingServer

log = logging.getLogger(__name__)

_RC = ResponseCode
TIMEOUT_TOO_MUCH_MS = 500  # PopMessageRequestHeader.isTimeoutTooMuch
_ERROR_CODES: dict[type[PopError], int] = {
    GroupNotFound: _RC.SUBSCRIPTION_GROUP_NOT_EXIST,
    TopicNotFound: _RC.TOPIC_NOT_EXIST,
    NoPermission: _RC.NO_PERMISSION,
    BadPopRequest: _RC.SYSTEM_ERROR,  # as Java answers maxMsgNums > 32 or a bad queueId
    InvalidReceiptHandle: _RC.INVALID_PARAMETER,
    ReceiptHandleExpired: _RC.NO_MESSAGE,
    PollingFull: _RC.POLLING_FULL,
}
_STATUS_CODES = {
    PopStatus.FOUND: _RC.SUCCESS,
    PopStatus.NO_NEW_MSG: _RC.POLLING_TIMEOUT,  # Java: no message and no polling
    PopStatus.POLLING_NOT_FOUND: _RC.POLLING_TIMEOUT,
    PopStatus.POLLING_FULL: _RC.POLLING_FULL,
}

Handler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]


def error_code(e: PopError) -> int:
    return next((c for t, c in _ERROR_CODES.items() if isinstance(e, t)), _RC.SYSTEM_ERROR)


class PopProcessor:
    def __init__(self, pop: PopService, server: RemotingServer) -> None:
        self.pop = pop
        self.server = server

    def register(self) -> None:
        for code, fn in ((RequestCode.POP_MESSAGE, self.pop_message),
                         (RequestCode.ACK_MESSAGE, self.ack_message),
                         (RequestCode.CHANGE_MESSAGE_INVISIBLETIME, self.change_invisible),
                         (RequestCode.BATCH_ACK_MESSAGE, self.batch_ack)):
            self.server.register(code, _guarded(fn))

    async def pop_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = PopMessageRequestHeader.from_ext(cmd.ext_fields)
        if h.bornTime > 0 and now_ms() - h.bornTime - h.pollTime > TIMEOUT_TOO_MUCH_MS:
            return cmd.response(_RC.POLLING_TIMEOUT, f"the broker[{self.pop.config.broker_name}] "
                                "pop message is timeout too much")
        sub = SubscriptionData.from_expression(h.topic, h.exp, h.expType or "TAG")
        queue_id = h.queueId if h.queueId >= 0 else -1  # as Java's getQueueId
        result = await self.pop.pop(h.consumerGroup, h.topic, queue_id, h.maxMsgNums,
                                    h.invisibleTime, h.pollTime, sub, fifo=h.order,
                                    init_mode=h.initMode, attempt_id=h.attemptId)
        return reply(cmd, result, h.order)

    async def ack_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = AckMessageRequestHeader.from_ext(cmd.ext_fields)
        self.pop.ack(h.consumerGroup, h.topic, h.extraInfo, h.offset)
        return cmd.response(_RC.SUCCESS)

    async def batch_ack(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            broker, acks = parse_batch_ack_body(cmd.body)
        except PopInfoError as e:
            return cmd.response(_RC.INVALID_PARAMETER, str(e))
        broker = broker or self.pop.config.broker_name
        refused: list[PopError] = []
        for a in acks:
            results = self.pop.ack_many(a.cid, a.topic, a.handles(broker))
            refused += [e for e in results if e is not None]
        if refused:
            return cmd.response(error_code(refused[0]),
                                f"{len(refused)} of the acks refused, the first: {refused[0]}")
        return cmd.response(_RC.SUCCESS)

    async def change_invisible(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = ChangeInvisibleTimeRequestHeader.from_ext(cmd.ext_fields)
        old = parse_handle(h.extraInfo)
        if old.msg_queue_offset is None:  # a 7-field handle: the offset is the header's
            old = ReceiptHandle(old.ck_queue_offset, old.pop_time, old.invisible_time,
                                old.revive_qid, old.retry, old.broker_name, old.queue_id,
                                h.offset)
        new = parse_handle(self.pop.change_invisible(h.consumerGroup, h.topic, old.encode(),
                                                     h.invisibleTime))
        out = ChangeInvisibleTimeResponseHeader(popTime=new.pop_time,
                                                invisibleTime=new.invisible_time,
                                                reviveQid=new.revive_qid)
        return cmd.response(_RC.SUCCESS, None, out.to_ext())


def reply(cmd: RemotingCommand, result: PopResult, order: bool) -> RemotingCommand:
    """POP_MESSAGE's answer for ``result``."""
    msgs = result.messages
    by_queue: dict[tuple[bool, int], list[int]] = {}
    for m in msgs:
        by_queue.setdefault((m.record.topic != m.topic, m.queue_id), []).append(m.queue_offset)
    header = PopMessageResponseHeader(
        popTime=result.pop_time, invisibleTime=result.invisible_time,
        reviveQid=result.revive_qid, restNum=result.rest_num,
        startOffsetInfo=start_offset_info(list(result.start_offsets)),
        msgOffsetInfo=msg_offset_info([(r, q, o) for (r, q), o in by_queue.items()]),
        orderCountInfo=order_count_info([(m.record.topic != m.topic, m.queue_id, m.queue_offset,
                                          m.delivery_attempt - 1) for m in msgs])
        if order else None,
    )
    code = _STATUS_CODES[result.status]
    body = b"".join([m.record.encode() for m in msgs])
    remark = "FOUND" if msgs else "NO_MESSAGE_IN_QUEUE"  # Java's GetMessageStatus names
    return cmd.response(code, remark, header.to_ext(), body)


def _guarded(fn: Handler) -> Handler:
    async def run(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            return await fn(conn, cmd)
        except HeaderError as e:
            return cmd.response(_RC.INVALID_PARAMETER, f"bad header: {e}")
        except PopError as e:
            return cmd.response(error_code(e), str(e))
        except RocketliteError as e:  # the store refused a write (disk full, closing ...)
            log.warning("request %d failed: %s", cmd.code, e)
            return cmd.response(_RC.SYSTEM_ERROR, f"{type(e).__name__}: {e}")

    return run
