"""Topics seen from the brokers: ``topicStatus``, ``deleteTopic`` and ``statsAll``.

``topic_status``: each queue's min and max offsets and the store time of its last message, from
GET_TOPIC_STATS_INFO (202) on every master of the topic's route.

``delete_topic``: DELETE_TOPIC_IN_BROKER (215) on every master of the cluster, then
DELETE_TOPIC_IN_NAMESRV (216, for that cluster) on every NameServer, as mqadmin does.

``stats_all``: per topic, and per group consuming it (QUERY_TOPIC_CONSUME_BY_WHO, 300), what the
brokers can tell: the messages each queue holds and has ever taken (202), each group's lag and
online members (208, 203). The tps figures are the brokers' own (``topicPutTps``,
``consumeTps``), shown as answered: rocketlite's brokers give the last minute's rates (0 when
their metrics are off). No figure is computed from time windows here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rocketlite.admin.errors import AdminError, TopicNotFoundError
from rocketlite.admin.groups import connection_count
from rocketlite.admin.session import AdminSession, decode, route_masters
from rocketlite.client.errors import MQClientError
from rocketlite.client.message import check_topic
from rocketlite.protocol.admin_bodies import ConsumeStats, GroupList, TopicStatsTable
from rocketlite.protocol.admin_headers import (
    DeleteTopicFromNamesrvRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.headers import DeleteTopicRequestHeader

SKIPPED_PREFIXES = ("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_")
SKIPPED_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC",
                            "BenchmarkTest"})


@dataclasses.dataclass(slots=True)
class QueueStatus:
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclasses.dataclass(slots=True)
class TopicDeletion:
    topic: str
    brokers: list[str]
    namesrvs: list[str]


@dataclasses.dataclass(slots=True)
class GroupStats:
    """A group consuming a topic: its lag summed over the topic's queues, its online members and
    the brokers' consume tps (as answered)."""

    group: str
    accumulation: int
    online: int
    consume_tps: float


@dataclasses.dataclass(slots=True)
class TopicStats:
    """A topic: ``messages`` held now (max - min offsets), ``put_total`` taken ever (max
    offsets), the newest store time, the brokers' put tps (as answered) and its groups."""

    topic: str
    queues: int
    messages: int
    put_total: int
    last_update_timestamp: int
    put_tps: float
    groups: list[GroupStats]


async def _stats_tables(session: AdminSession, topic: str) -> dict[str, TopicStatsTable]:
    """Master address -> GET_TOPIC_STATS_INFO of ``topic``."""
    masters = route_masters(await session.route(topic))
    if not masters:
        raise AdminError(f"topic {topic!r} has no master broker in its route")
    header = GetTopicStatsInfoRequestHeader(topic=topic)
    return {addr: decode(TopicStatsTable, await session.call(
        addr, RequestCode.GET_TOPIC_STATS_INFO, header), addr, "topic stats")
        for addr in masters.values()}


async def topic_status(session: AdminSession, topic: str) -> list[QueueStatus]:
    """Every queue of ``topic`` on its masters, by broker and queue."""
    out = [QueueStatus(mq.brokerName, mq.queueId, o.minOffset, o.maxOffset, o.lastUpdateTimestamp)
           for table in (await _stats_tables(session, topic)).values()
           for mq, o in table.offsetTable.items()]
    return sorted(out, key=lambda q: (q.broker_name, q.queue_id))


async def delete_topic(session: AdminSession, topic: str, cluster: str) -> TopicDeletion:
    """Delete ``topic`` from every master of ``cluster``, then from every NameServer
    (``TopicNotFoundError`` when no broker registered it)."""
    try:
        check_topic(topic)
    except MQClientError as e:
        raise AdminError(str(e)) from e
    if not session.namesrvs:
        raise AdminError("no NameServer address: give -n/--namesrv host:port")
    brokers = sorted((await session.master_addrs(cluster)).values())
    if not brokers:
        raise AdminError(f"cluster {cluster!r} has no master registered")
    if topic not in await session.topics():  # a typo must not read as "deleted"
        raise TopicNotFoundError(f"topic {topic!r} does not exist (no broker registered it with "
                                 "the NameServer): nothing deleted")
    for addr in brokers:
        await session.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                           DeleteTopicRequestHeader(topic=topic))
    header = DeleteTopicFromNamesrvRequestHeader(topic=topic, clusterName=cluster)
    for ns in session.namesrvs:
        await session.call(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, header, what="NameServer")
    return TopicDeletion(topic, brokers, list(session.namesrvs))


def _listed(topic: str) -> bool:
    return topic not in SKIPPED_TOPICS and not topic.startswith(SKIPPED_PREFIXES)


async def _topic_stats(session: AdminSession, topic: str) -> TopicStats:
    tables = await _stats_tables(session, topic)
    offsets = [o for t in tables.values() for o in t.offsetTable.values()]
    groups: set[str] = set()
    for addr in tables:
        reply = await session.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                   QueryTopicConsumeByWhoRequestHeader(topic=topic))
        groups |= decode(GroupList, reply, addr, "group list").groupList
    per_group = []
    for g in sorted(groups):
        lag, tps = 0, 0.0
        for addr in tables:
            reply = await session.call(addr, RequestCode.GET_CONSUME_STATS,
                                       GetConsumeStatsRequestHeader(consumerGroup=g, topic=topic))
            stats = decode(ConsumeStats, reply, addr, "consume stats")
            lag += stats.total_diff()
            tps += stats.consumeTps
        per_group.append(GroupStats(g, lag, await connection_count(session, g, list(tables)), tps))
    return TopicStats(
        topic, len(offsets), sum(o.maxOffset - o.minOffset for o in offsets),
        sum(o.maxOffset for o in offsets), max((o.lastUpdateTimestamp for o in offsets), default=0),
        sum(t.topicPutTps for t in tables.values()), per_group)


async def stats_all(session: AdminSession, topic: str | None = None, *,
                    on_total: Callable[[int], None] | None = None,
                    on_progress: Callable[[int], None] | None = None) -> list[TopicStats]:
    """The figures of ``topic``, or of every user topic (not retry, DLQ or system topics), by
    name; ``on_total``/``on_progress`` count topics (for a progress bar). A topic deleted
    meanwhile is left out."""
    if topic is not None:
        topics = [topic]
    else:
        ci = await session.cluster_info()  # brokers register their cluster and own names as topics
        names = set(ci.clusterAddrTable) | set(ci.brokerAddrTable)
        topics = sorted(t for t in await session.topics() if _listed(t) and t not in names)
    if on_total is not None:
        on_total(len(topics))
    out = []
    for t in topics:
        try:
            out.append(await _topic_stats(session, t))
        except TopicNotFoundError:
            if topic is not None:
                raise
        if on_progress is not None:
            on_progress(1)
    return out
