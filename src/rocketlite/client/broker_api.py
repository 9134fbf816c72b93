"""The broker requests consumers make (Java's ``MQClientAPIImpl``), one coroutine each, on top of
a ``ClientInstance``: pull, POP (pop, ack, batch ack, change of invisible time), offsets, queue
bounds, locks, group members, send-back, lookups.

Each takes a ``MessageQueue`` (the broker is found by its name in the instance's routes) and
raises ``MQBrokerError`` for a refusal the caller cannot treat as an answer.
"""

from __future__ import annotations

import enum
import ipaddress
import time
from dataclasses import dataclass

from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.instance import ClientInstance
from rocketlite.client.message import MessageExt, decode_messages
from rocketlite.client.route import MASTER_ID
from rocketlite.common.errors import FormatError
from rocketlite.formats.message_id import decode_message_id
from rocketlite.protocol.bodies import (
    GetConsumerListByGroupResponseBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    UnlockBatchRequestBody,
)
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    Header,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rocketlite.protocol.pop_info import (
    BatchAck,
    PopInfoError,
    PopReplyInfo,
    ReceiptHandle,
    encode_batch_ack_body,
)


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]
    suggest_broker_id: int = 0


@dataclass(slots=True)
class PopReply:
    """POP_MESSAGE's answer: the records as stored (a retry's topic is the retry topic), what the
    header says to build their handles from (None when nothing was found), and ``rest_num``, the
    messages left in the queues read."""

    messages: list[MessageExt]
    info: PopReplyInfo | None
    rest_num: int


_POP_NONE = (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND)


def _ext(header: Header) -> dict[str, str]:
    return header.to_ext()


def _rest(reply: RemotingCommand) -> int:
    try:
        return int(reply.ext_fields.get("restNum", 0))
    except ValueError:
        return 0


class BrokerApi:
    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance
        # (group, queue) -> the broker id the last pull reply suggested for the next pull
        # (Java's ``PullAPIWrapper.pullFromWhichNodeTable``); missing: the master.
        self.pull_from: dict[tuple[str, MessageQueue], int] = {}

    async def _addr(self, mq: MessageQueue, master: bool = True) -> str:
        return await self.instance.require_broker_addr(mq.brokerName, mq.topic, master=master)

    async def _call(self, mq: MessageQueue, code: int, header: Header, body: bytes = b"",
                    timeout: float | None = None,  # noqa: ASYNC109
                    master: bool = True) -> tuple[str, RemotingCommand]:
        addr = await self._addr(mq, master=master)
        cmd = RemotingCommand.request(code, _ext(header), body)
        return addr, await self.instance.invoke(addr, cmd, timeout)

    async def _invoke_routed(self, topic: str, addr: str, cmd: RemotingCommand,
                             timeout: float | None) -> RemotingCommand:  # noqa: ASYNC109
        """``instance.invoke``; a transport failure (the broker unreachable) also refreshes
        ``topic``'s route soon, should a failover have moved the broker's master."""
        try:
            return await self.instance.invoke(addr, cmd, timeout)
        except MQClientError:
            self.instance.route_failed(topic)
            raise

    # -- pull -----------------------------------------------------------------------------------

    async def pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int, *,
                   expression: str | None = "*", sub_version: int = 0, commit_offset: int = 0,
                   suspend_ms: int = 0, timeout: float | None = None,  # noqa: ASYNC109
                   expression_type: str = "TAG") -> PullResult:
        """PULL_MESSAGE; with ``suspend_ms`` the broker holds the request until a message
        arrives or the time is up (the socket timeout must exceed it).

        Sent where the previous reply for the queue suggested (``suggestWhichBrokerId``: a
        slave while the consumer reads far behind, the master again once it has caught up),
        to the master when there is no suggestion, and to a slave when the route has no
        master (it is down). A pull to a slave does not carry the commit offset: a slave's
        offsets are its master's (Java clears COMMIT_OFFSET likewise)."""
        inst = self.instance
        key = (group, mq)
        which = self.pull_from.get(key, MASTER_ID)
        found = inst.route_table.broker_addr_in_subscribe(mq.brokerName, which)
        if found is None:
            await inst.update_route(mq.topic)
            found = inst.route_table.broker_addr_in_subscribe(mq.brokerName, which)
        if found is None:
            raise MQClientError(f"broker {mq.brokerName!r} has no address in the route of "
                                f"{mq.topic!r}")
        addr, slave = found
        flags = PullSysFlag.SUBSCRIPTION
        if commit_offset > 0 and not slave:
            flags |= PullSysFlag.COMMIT_OFFSET
        if suspend_ms > 0:
            flags |= PullSysFlag.SUSPEND
        header = PullMessageRequestHeader(
            consumerGroup=group, topic=mq.topic, queueId=mq.queueId, queueOffset=offset,
            maxMsgNums=max_nums, sysFlag=int(flags), commitOffset=commit_offset,
            suspendTimeoutMillis=suspend_ms, subVersion=sub_version, subscription=expression or "*",
            expressionType=expression_type)
        if timeout is None:
            timeout = self.instance.config.request_timeout + suspend_ms / 1000
        reply = await self._invoke_routed(
            mq.topic, addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, _ext(header)), timeout)
        status = _PULL_STATUS.get(reply.code)  # type: ignore[call-overload]
        if status is None:
            raise MQBrokerError(reply.code, reply.remark, addr)
        try:
            h = PullMessageResponseHeader.from_ext(reply.ext_fields)
        except FormatError as e:
            raise MQClientError(f"the pull reply from {addr} is malformed: {e}") from e
        if h.suggestWhichBrokerId == MASTER_ID:
            self.pull_from.pop(key, None)
        else:
            self.pull_from[key] = h.suggestWhichBrokerId
        msgs = decode_messages(reply.body, mq.brokerName) if status is PullStatus.FOUND else []
        return PullResult(status, h.nextBeginOffset, h.minOffset, h.maxOffset, msgs, h.suggestWhichBrokerId)

    # -- pop ------------------------------------------------------------------------------------

    async def pop(self, group: str, topic: str, broker_name: str, *, max_nums: int,
                  invisible_ms: int, poll_ms: int, expression: str = "*",
                  expression_type: str = "TAG", order: bool = False, init_mode: int = 0,
                  queue_id: int = -1, attempt_id: str | None = None) -> PopReply:
        """POP_MESSAGE to ``broker_name`` (queue -1: any of its queues), held up to ``poll_ms``
        when nothing is visible. Found nothing (POLLING_TIMEOUT, PULL_NOT_FOUND): no messages;
        any other refusal (POLLING_FULL included) raises ``MQBrokerError``. ``attempt_id``: an
        orderly pop repeated with the id of one whose answer was lost gets that batch again."""
        addr = await self.instance.require_broker_addr(broker_name, topic)
        header = PopMessageRequestHeader(
            consumerGroup=group, topic=topic, queueId=queue_id, maxMsgNums=max_nums,
            invisibleTime=invisible_ms, pollTime=poll_ms, bornTime=int(time.time() * 1000),
            initMode=init_mode, expType=expression_type, exp=expression, order=order,
            attemptId=attempt_id)
        timeout = self.instance.config.request_timeout + poll_ms / 1000
        reply = await self._invoke_routed(
            topic, addr, RemotingCommand.request(RequestCode.POP_MESSAGE, _ext(header)), timeout)
        if reply.code in _POP_NONE:
            return PopReply([], None, _rest(reply))
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, addr)
        try:
            h = PopMessageResponseHeader.from_ext(reply.ext_fields)
            info = PopReplyInfo.parse(h.popTime, h.invisibleTime, h.reviveQid, h.startOffsetInfo,
                                      h.msgOffsetInfo, h.orderCountInfo)
        except FormatError as e:
            raise MQClientError(f"the pop reply from {addr} is malformed: {e}") from e
        return PopReply(decode_messages(reply.body, broker_name), info, h.restNum)

    async def ack(self, group: str, topic: str, handle: ReceiptHandle,
                  route_topic: str | None = None) -> None:
        """ACK_MESSAGE for the message of ``handle``; ``topic`` is the one it was popped from
        (the retry topic for a retry), as the Java client sends it; the broker's address comes
        from ``route_topic``'s route (default ``topic``)."""
        if handle.msg_queue_offset is None:
            raise MQClientError(f"the receipt handle {handle.encode()!r} has no message offset")
        header = AckMessageRequestHeader(consumerGroup=group, topic=topic,
                                         queueId=handle.queue_id, extraInfo=handle.encode(),
                                         offset=handle.msg_queue_offset)
        addr = await self.instance.require_broker_addr(handle.broker_name, route_topic or topic)
        await self.instance.invoke_ok(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE,
                                                                    _ext(header)))

    async def batch_ack(self, broker_name: str, route_topic: str, acks: list[BatchAck]) -> None:
        """BATCH_ACK_MESSAGE of ``acks`` (CKs of ``broker_name``, found in ``route_topic``'s
        route). A refusal of any raises ``MQBrokerError`` (the broker still applied the others)."""
        try:
            body = encode_batch_ack_body(broker_name, acks)
        except PopInfoError as e:
            raise MQClientError(str(e)) from e
        addr = await self.instance.require_broker_addr(broker_name, route_topic)
        await self.instance.invoke_ok(addr, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE,
                                                                    body=body))

    async def change_invisible(self, group: str, topic: str, handle: ReceiptHandle,
                               invisible_ms: int, route_topic: str | None = None
                               ) -> ReceiptHandle:
        """CHANGE_MESSAGE_INVISIBLETIME: hide the message ``invisible_ms`` from now; returns its
        new handle, built as ``changeInvisibleTimeAsync`` does (the message's offset is the new
        CK's start)."""
        offset = handle.msg_queue_offset
        if offset is None:
            raise MQClientError(f"the receipt handle {handle.encode()!r} has no message offset")
        header = ChangeInvisibleTimeRequestHeader(
            consumerGroup=group, topic=topic, queueId=handle.queue_id, extraInfo=handle.encode(),
            offset=offset, invisibleTime=invisible_ms)
        addr = await self.instance.require_broker_addr(handle.broker_name, route_topic or topic)
        reply = await self.instance.invoke_ok(addr, RemotingCommand.request(
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME, _ext(header)))
        try:
            h = ChangeInvisibleTimeResponseHeader.from_ext(reply.ext_fields)
        except FormatError as e:
            raise MQClientError(f"the change-invisible reply from {addr} is malformed: {e}") from e
        return ReceiptHandle(offset, h.popTime, h.invisibleTime, h.reviveQid, handle.retry,
                             handle.broker_name, handle.queue_id, offset)

    # -- offsets --------------------------------------------------------------------------------

    async def query_offset(self, group: str, mq: MessageQueue) -> int | None:
        """The group's committed offset on the broker; None when it has none (QUERY_NOT_FOUND).

        Sent with ``setZeroIfNotFound=false``: a broker would otherwise answer 0 for a group
        without an offset whenever the queue still starts at 0, and CONSUME_FROM_LAST_OFFSET would
        read the whole backlog (Java clients before 5.x see that surprise)."""
        header = QueryConsumerOffsetRequestHeader(consumerGroup=group, topic=mq.topic, queueId=mq.queueId,
                                                  setZeroIfNotFound=False)
        addr, reply = await self._call(mq, RequestCode.QUERY_CONSUMER_OFFSET, header, master=False)
        if reply.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return self._offset(reply, addr)

    async def update_offset(self, group: str, mq: MessageQueue, offset: int, oneway: bool = False) -> None:
        header = UpdateConsumerOffsetRequestHeader(consumerGroup=group, topic=mq.topic, queueId=mq.queueId,
                                                   commitOffset=offset)
        if oneway:
            addr = await self._addr(mq, master=False)
            conn = await self.instance.connection(addr)
            conn.send_oneway(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, _ext(header)))
            return
        addr, reply = await self._call(mq, RequestCode.UPDATE_CONSUMER_OFFSET, header, master=False)
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, addr)

    async def max_offset(self, mq: MessageQueue) -> int:
        addr, reply = await self._call(mq, RequestCode.GET_MAX_OFFSET,
                                       GetMaxOffsetRequestHeader(topic=mq.topic, queueId=mq.queueId))
        return self._offset(reply, addr)

    async def min_offset(self, mq: MessageQueue) -> int:
        addr, reply = await self._call(mq, RequestCode.GET_MIN_OFFSET,
                                       GetMinOffsetRequestHeader(topic=mq.topic, queueId=mq.queueId))
        return self._offset(reply, addr)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset whose store time is at or after ``timestamp_ms``."""
        header = SearchOffsetRequestHeader(topic=mq.topic, queueId=mq.queueId, timestamp=timestamp_ms)
        addr, reply = await self._call(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header)
        return self._offset(reply, addr)

    @staticmethod
    def _offset(reply: RemotingCommand, addr: str) -> int:
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, addr)
        try:
            return int(reply.ext_fields["offset"])
        except (KeyError, ValueError):
            raise MQClientError(f"the reply from {addr} has no offset: {reply.ext_fields}") from None

    # -- group, locks, send-back ----------------------------------------------------------------

    async def consumer_ids(self, group: str, topic: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP, asked of one broker that serves ``topic``."""
        inst = self.instance
        route = inst.routes.get(topic) or await inst.update_route(topic)
        names = sorted(bd.brokerName for bd in route.brokerDatas) if route is not None else []
        for name in names:
            addr = inst.route_table.broker_addr(name, master=False)
            if addr is None:
                continue
            cmd = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                          _ext(GetConsumerListByGroupRequestHeader(consumerGroup=group)))
            try:
                reply = await inst.invoke_ok(addr, cmd)
            except (MQClientError, MQBrokerError):
                continue
            return GetConsumerListByGroupResponseBody.from_json(reply.body).consumerIdList
        return []

    async def lock(self, group: str, broker_name: str, topic: str,
                   mqs: set[MessageQueue]) -> set[MessageQueue]:
        body = LockBatchRequestBody(consumerGroup=group, clientId=self.instance.client_id, mqSet=mqs)
        addr = await self.instance.require_broker_addr(broker_name, topic)
        reply = await self.instance.invoke_ok(addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ,
                                                                            body=body.to_json()))
        return LockBatchResponseBody.from_json(reply.body).lockOKMQSet

    async def unlock(self, group: str, broker_name: str, topic: str, mqs: set[MessageQueue],
                     oneway: bool = False) -> None:
        body = UnlockBatchRequestBody(consumerGroup=group, clientId=self.instance.client_id, mqSet=mqs)
        addr = await self.instance.require_broker_addr(broker_name, topic)
        cmd = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body.to_json())
        if oneway:
            (await self.instance.connection(addr)).send_oneway(cmd)
        else:
            await self.instance.invoke_ok(addr, cmd)

    async def send_back(self, group: str, msg: MessageExt, delay_level: int,
                        max_reconsume_times: int) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker copies the message to the group's retry topic."""
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset, group=group, delayLevel=delay_level, originMsgId=msg.msg_id,
            originTopic=msg.topic, maxReconsumeTimes=max_reconsume_times)
        mq = MessageQueue(msg.topic, msg.broker_name, msg.queue_id)
        addr, reply = await self._call(mq, RequestCode.CONSUMER_SEND_MSG_BACK, header)
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, addr)

    # -- lookups --------------------------------------------------------------------------------

    async def query_by_key(self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
                           end_ms: int = 2**63 - 1, unique: bool = False) -> list[MessageExt]:
        """QUERY_MESSAGE on every broker of ``topic`` (by KEYS, or by UNIQ_KEY with ``unique``)."""
        inst = self.instance
        route = inst.routes.get(topic) or await inst.update_route(topic)
        if route is None:
            raise MQClientError(f"no route for topic {topic!r}")
        out: list[MessageExt] = []
        for bd in sorted(route.brokerDatas, key=lambda b: b.brokerName):
            addr = inst.route_table.broker_addr(bd.brokerName, master=False)
            if addr is None:
                continue
            header = QueryMessageRequestHeader(topic=topic, key=key, maxNum=max_num, beginTimestamp=begin_ms,
                                               endTimestamp=end_ms, uniqueKeyQuery=unique or None)
            reply = await inst.invoke(addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, _ext(header)))
            if reply.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            if reply.code != ResponseCode.SUCCESS:
                raise MQBrokerError(reply.code, reply.remark, addr)
            out += decode_messages(reply.body, bd.brokerName)
        return out

    async def view_by_offset_id(self, offset_msg_id: str) -> MessageExt:
        """VIEW_MESSAGE_BY_ID: the broker and CommitLog offset are in the offset msgId."""
        try:
            ip, port, offset = decode_message_id(offset_msg_id)
        except FormatError as e:
            raise MQClientError(f"{offset_msg_id!r} is not an offset msgId: {e}") from e
        host = str(ipaddress.IPv4Address(ip)) if len(ip) == 4 else f"[{ipaddress.IPv6Address(ip)}]"
        addr = f"{host}:{port}"
        reply = await self.instance.invoke_ok(addr, RemotingCommand.request(
            RequestCode.VIEW_MESSAGE_BY_ID, _ext(ViewMessageRequestHeader(offset=offset))))
        msgs = decode_messages(reply.body)
        if not msgs:
            raise MQClientError(f"{addr} returned no message for {offset_msg_id}")
        return msgs[0]
