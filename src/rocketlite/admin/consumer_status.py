"""``consumerStatus``: what each online member of a consumer group says about itself
(GET_CONSUMER_RUNNING_INFO, 307, which the broker relays to the client and back, as mqadmin
``consumerStatus`` does): its settings, subscriptions, each queue it works on (offset to commit,
messages cached, lock, last pull and consume), per topic its pull/consume rates and times, and
with ``jstack`` a dump of its threads.

The broker asked is ``-b``, else each master in the route of the group's retry topic
(``%RETRY%<group>``, where mqadmin looks), else every master. With a client id the broker is
asked directly and its refusal is the error (SYSTEM_ERROR "The Consumer <G> <ID> not online" for
a client gone; CONSUME_MSG_TIMEOUT for one that does not answer). Without one, every member the
brokers list (GET_CONSUMER_CONNECTION_LIST) is asked; a member that cannot answer keeps its
reason in ``error`` and the others are still shown.

Like mqadmin, the result says whether the members subscribe alike (``same_subscription``) and
lists what looks stuck (Java's ``analyzeProcessQueue``): an orderly queue not locked, a queue
whose cached messages have not been consumed for a minute.
"""

from __future__ import annotations

import dataclasses
import time

from rocketlite.admin.errors import AdminError, TopicNotFoundError
from rocketlite.admin.groups import RETRY_PREFIX, broker_connection, check_group
from rocketlite.admin.session import AdminSession, decode, route_masters
from rocketlite.protocol.admin_headers import GetConsumerRunningInfoRequestHeader
from rocketlite.protocol.bodies import SubscriptionData
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
)

BLOCKED_MS = 60_000  # Java: cached messages unconsumed for a minute look blocked


@dataclasses.dataclass(slots=True)
class QueueInfo:
    """One queue a member works on."""

    topic: str
    broker_name: str
    queue_id: int
    info: ProcessQueueInfo


@dataclasses.dataclass(slots=True)
class ClientStatus:
    """One member: its connection and what it answered (``error`` when it could not)."""

    client_id: str
    client_addr: str
    language: str
    version: int
    broker: str
    properties: dict[str, str] = dataclasses.field(default_factory=dict)
    subscriptions: list[SubscriptionData] = dataclasses.field(default_factory=list)
    queues: list[QueueInfo] = dataclasses.field(default_factory=list)
    status: dict[str, ConsumeStatus] = dataclasses.field(default_factory=dict)
    jstack: str | None = None
    error: str | None = None


@dataclasses.dataclass(slots=True)
class GroupStatus:
    """A group's members, whether they subscribe alike, and what looks stuck."""

    group: str
    clients: list[ClientStatus]
    same_subscription: bool
    warnings: list[str]


async def _brokers(session: AdminSession, group: str, broker_addr: str | None) -> list[str]:
    if broker_addr is not None:
        return [broker_addr]
    try:
        masters = route_masters(await session.route(RETRY_PREFIX + group))
    except TopicNotFoundError:
        masters = await session.all_masters()
    if not masters:
        raise AdminError("no master broker is registered at the NameServer")
    return sorted(masters.values())


async def _running_info(session: AdminSession, addr: str, group: str, client_id: str,
                        jstack: bool) -> ConsumerRunningInfo:
    header = GetConsumerRunningInfoRequestHeader(consumerGroup=group, clientId=client_id,
                                                 jstackEnable=jstack)
    reply = await session.call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header,
                               timeout_s=session.timeout_s + 2)
    return decode(ConsumerRunningInfo, reply, addr, "consumer running info")


def _fill(cs: ClientStatus, info: ConsumerRunningInfo) -> None:
    cs.properties = dict(sorted(info.properties.items()))
    cs.subscriptions = sorted(info.subscriptionSet, key=lambda s: s.topic)
    cs.queues = [QueueInfo(mq.topic, mq.brokerName, mq.queueId, pq)
                 for mq, pq in sorted(info.mqTable.items())]
    cs.status = dict(sorted(info.statusTable.items()))
    cs.jstack = info.jstack


def _warnings(cs: ClientStatus, now_ms: int) -> list[str]:
    """Java's ``analyzeProcessQueue`` for a push consumer."""
    if cs.properties.get(PROP_CONSUME_TYPE) != "CONSUME_PASSIVELY":
        return []
    orderly = cs.properties.get(PROP_CONSUME_ORDERLY) == "true"
    out = []
    for q in cs.queues:
        where = f"{cs.client_id} {q.topic}/{q.broker_name}/{q.queue_id}"
        pq = q.info
        if orderly and not pq.locked:
            out.append(f"{where} can't lock for a while, {now_ms - pq.lastLockTimestamp}ms")
        elif orderly and pq.droped and pq.tryUnlockTimes > 0:
            out.append(f"{where} unlock {pq.tryUnlockTimes} times, still failed")
        elif not orderly and pq.cachedMsgCount > 0 and now_ms - pq.lastConsumeTimestamp > BLOCKED_MS:
            out.append(f"{where} can't consume for a while, maybe blocked, "
                       f"{now_ms - pq.lastConsumeTimestamp}ms")
    return out


async def consumer_status(session: AdminSession, group: str, client_id: str | None = None, *,
                          broker_addr: str | None = None, jstack: bool = False) -> GroupStatus:
    """The running info of ``group``'s members, or of ``client_id`` alone (module doc)."""
    check_group(group)
    brokers = await _brokers(session, group, broker_addr)
    clients: dict[str, ClientStatus] = {}
    if client_id is not None:
        info = await _running_info(session, brokers[0], group, client_id, jstack)
        cc = await broker_connection(session, brokers[0], group)
        conn = next((c for c in cc.connectionSet if c.clientId == client_id),
                    None) if cc is not None else None
        cs = ClientStatus(client_id, conn.clientAddr if conn else "",
                          conn.language if conn else "", conn.version if conn else 0, brokers[0])
        _fill(cs, info)
        clients[client_id] = cs
    for addr in brokers if client_id is None else []:
        cc = await broker_connection(session, addr, group)
        for c in sorted(cc.connectionSet) if cc is not None else []:
            if c.clientId in clients:
                continue
            cs = clients[c.clientId] = ClientStatus(c.clientId, c.clientAddr, c.language,
                                                    c.version, addr)
            try:
                _fill(cs, await _running_info(session, addr, group, c.clientId, jstack))
            except AdminError as e:
                cs.error = str(e)
    if not clients:
        raise AdminError(f"consumer group {group!r} is not online (no member on "
                         f"{', '.join(brokers)})")
    answered = [c for c in clients.values() if c.error is None]
    subs = {tuple((s.topic, s.subString, s.expressionType) for s in c.subscriptions)
            for c in answered}
    now_ms = int(time.time() * 1000)
    warnings = [w for c in answered for w in _warnings(c, now_ms)]
    return GroupStatus(group, sorted(clients.values(), key=lambda c: c.client_id),
                       len(subs) <= 1, warnings)
