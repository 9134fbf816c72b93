"""Finding messages: ``queryMsgById`` (VIEW_MESSAGE_BY_ID, 33, at the broker and CommitLog offset
the offset msgId encodes), ``queryMsgByKey`` / ``queryMsgByUniqueKey`` (QUERY_MESSAGE, 12, on every
broker of the topic's route: the index holds KEYS and UNIQ_KEY) and ``queryMsgByOffset``
(PULL_MESSAGE of one message at a queue offset).

A UNIQ_KEY (the id a producer gives, ``SendResult.msg_id``) has the length of an IPv4 offset msgId,
so both decode; as Java's ``DefaultMQAdminExtImpl.viewMessage`` does, with a topic the id is looked
up as an offset msgId only when the broker it names is in the topic's route, and as a UNIQ_KEY
otherwise (or when that finds nothing).
"""

from __future__ import annotations

import dataclasses
import ipaddress

from rocketlite.admin.errors import AdminError
from rocketlite.admin.session import AdminSession, broker_addr
from rocketlite.client.errors import MQClientError
from rocketlite.client.message import MessageExt, decode_messages
from rocketlite.common.errors import FormatError
from rocketlite.formats.message_id import decode_message_id
from rocketlite.protocol.bodies import TopicRouteData
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.headers import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
)

TOOLS_GROUP = "TOOLS_CONSUMER"
"""``MixAll.TOOLS_CONSUMER_GROUP``: the group mqadmin pulls as (it commits nothing)."""
MAX_KEY_RESULTS = 64
END_OF_TIME = 2**63 - 1
INDEX_SLACK_MS = 1000


@dataclasses.dataclass(slots=True)
class MessageView:
    """A stored message as the admin commands show it (``properties`` all of them, ``tags`` and
    ``keys`` taken out for convenience)."""

    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    msg_id: str
    offset_msg_id: str
    tags: str | None
    keys: list[str]
    born_timestamp: int
    store_timestamp: int
    born_host: str
    store_host: str
    reconsume_times: int
    commit_log_offset: int
    sys_flag: int
    body_crc: int
    properties: dict[str, str]
    body: bytes


def view(m: MessageExt) -> MessageView:
    return MessageView(m.topic, m.broker_name, m.queue_id, m.queue_offset, m.msg_id,
                       m.offset_msg_id, m.tags, m.keys, m.born_timestamp, m.store_timestamp,
                       m.born_host, m.store_host, m.reconsume_times, m.commit_log_offset,
                       m.sys_flag, m.body_crc, dict(m.properties), m.body)


def decode(body: bytes, broker_name: str, addr: str) -> list[MessageView]:
    """A reply's records as views; AdminError naming ``addr`` for a corrupt one."""
    try:
        return [view(m) for m in decode_messages(body, broker_name)]
    except (MQClientError, FormatError) as e:
        raise AdminError(f"broker {addr} answered a corrupt message: {e}") from e


def _addr_of_id(msg_id: str) -> tuple[str, int]:
    """The broker address and CommitLog offset an offset msgId encodes."""
    try:
        ip, port, offset = decode_message_id(msg_id)
    except FormatError as e:
        raise AdminError(f"{msg_id!r} is not a message id: {e}") from e
    host = str(ipaddress.IPv4Address(ip)) if len(ip) == 4 else f"[{ipaddress.IPv6Address(ip)}]"
    return f"{host}:{port}", offset


def _route_addrs(route: TopicRouteData) -> set[str]:
    return {a for bd in route.brokerDatas for a in bd.brokerAddrs.values()}


async def _view_by_offset_id(session: AdminSession, addr: str, offset: int,
                             msg_id: str) -> MessageView:
    reply = await session.call(addr, RequestCode.VIEW_MESSAGE_BY_ID,
                               ViewMessageRequestHeader(offset=offset),
                               accept=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
    found = decode(reply.body or b"", "", addr) if reply.code == ResponseCode.SUCCESS else []
    if not found:
        raise AdminError(f"no message {msg_id} on broker {addr} (CommitLog offset {offset}): "
                         f"{reply.remark or 'nothing there'}")
    m = found[0]
    if session.namesrvs:  # the broker's name, for the record; the message was found without it
        try:
            ci = await session.cluster_info()
        except AdminError:
            return m
        m.broker_name = next((bd.brokerName for bd in ci.brokerAddrTable.values()
                              if addr in bd.brokerAddrs.values()), "")
    return m


async def query_msg_by_id(session: AdminSession, msg_id: str,
                          topic: str | None = None) -> MessageView:
    """The message of an offset msgId; with ``topic`` also of a UNIQ_KEY (see the module doc)."""
    msg_id = msg_id.strip()
    addr, offset = _addr_of_id(msg_id)
    if topic is None:
        return await _view_by_offset_id(session, addr, offset, msg_id)
    route = await session.route(topic)
    if addr in _route_addrs(route):
        try:
            return await _view_by_offset_id(session, addr, offset, msg_id)
        except AdminError:
            pass
    found = await _query(session, topic, route, msg_id, 1, 0, END_OF_TIME, unique=True)
    if not found:
        raise AdminError(f"no message {msg_id} in topic {topic!r} (neither an offset msgId of "
                         "its brokers nor a UNIQ_KEY in their index)")
    return found[0]


async def _query(session: AdminSession, topic: str, route: TopicRouteData, key: str,
                 max_num: int, begin_ms: int, end_ms: int, *, unique: bool) -> list[MessageView]:
    out: list[MessageView] = []
    for bd in sorted(route.brokerDatas, key=lambda b: b.brokerName):
        addr = broker_addr(route, bd.brokerName, master=False)
        header = QueryMessageRequestHeader(topic=topic, key=key, maxNum=max_num,
                                           beginTimestamp=begin_ms, endTimestamp=end_ms,
                                           uniqueKeyQuery=unique or None)
        reply = await session.call(addr, RequestCode.QUERY_MESSAGE, header,
                                   accept=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if reply.code == ResponseCode.SUCCESS:
            out += [m for m in decode(reply.body or b"", bd.brokerName, addr)
                    if m.topic == topic and (m.msg_id == key if unique else key in m.keys)]
    return out


async def query_msg_by_key(session: AdminSession, topic: str, key: str, *, begin_ms: int = 0,
                           end_ms: int = END_OF_TIME,
                           max_num: int = MAX_KEY_RESULTS) -> list[MessageView]:
    """The messages of ``topic`` with ``key`` among their KEYS stored in [begin_ms, end_ms] (to
    the millisecond), at most ``max_num`` per broker, ordered by store time; empty when there is
    none."""
    route = await session.route(topic)
    # The index keeps store times to the second (an entry's time is its file's begin time plus
    # whole seconds): ask a second wider, keep the exact range here.
    found = await _query(session, topic, route, key, max_num, max(0, begin_ms - INDEX_SLACK_MS),
                         end_ms, unique=False)
    return sorted((m for m in found if begin_ms <= m.store_timestamp <= end_ms),
                  key=lambda m: (m.store_timestamp, m.broker_name, m.commit_log_offset))


async def query_msg_by_unique_key(session: AdminSession, topic: str,
                                  uniq_key: str) -> list[MessageView]:
    """The messages of ``topic`` whose UNIQ_KEY is ``uniq_key`` (one, or more when a broker
    stored it twice, e.g. a retried send); AdminError when there is none."""
    route = await session.route(topic)
    found = await _query(session, topic, route, uniq_key, 32, 0, END_OF_TIME, unique=True)
    if not found:
        raise AdminError(f"no message with UNIQ_KEY {uniq_key!r} in topic {topic!r}")
    return found


# ------------------------------------------------------------------------------ pull


@dataclasses.dataclass(slots=True)
class Pulled:
    """One PULL_MESSAGE's answer: the messages and the queue's bounds at the time."""

    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageView]


async def pull(session: AdminSession, addr: str, topic: str, broker_name: str, queue_id: int,
               offset: int, max_nums: int = 32, group: str = TOOLS_GROUP) -> Pulled:
    """PULL_MESSAGE of up to ``max_nums`` messages from ``offset``, committing nothing."""
    header = PullMessageRequestHeader(
        consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset,
        maxMsgNums=max_nums, sysFlag=int(PullSysFlag.SUBSCRIPTION), commitOffset=0,
        suspendTimeoutMillis=0, subVersion=0, subscription="*", expressionType="TAG")
    reply = await session.call(addr, RequestCode.PULL_MESSAGE, header, accept=(
        ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED))
    try:
        h = PullMessageResponseHeader.from_ext(reply.ext_fields)
    except FormatError as e:
        raise AdminError(f"broker {addr} answered a malformed pull reply: {e}") from e
    msgs = decode(reply.body or b"", broker_name, addr) if reply.code == ResponseCode.SUCCESS else []
    return Pulled(reply.code, h.nextBeginOffset, h.minOffset, h.maxOffset, msgs)


async def query_msg_by_offset(session: AdminSession, topic: str, broker_name: str, queue_id: int,
                              offset: int) -> MessageView:
    """The message at ``offset`` of queue ``queue_id`` of ``topic`` on ``broker_name``."""
    route = await session.route(topic)
    addr = broker_addr(route, broker_name, master=False)
    got = await pull(session, addr, topic, broker_name, queue_id, offset, 1)
    for m in got.messages:
        if m.queue_offset == offset:
            return m
    raise AdminError(f"no message at offset {offset} of {topic}/{broker_name}/{queue_id} (the "
                     f"queue holds offsets {got.min_offset} to {got.max_offset - 1})")
