"""Topics: ``topicList`` (GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 206), ``topicRoute``
(GET_ROUTEINFO_BY_TOPIC, 105) and ``updateTopic`` (UPDATE_AND_CREATE_TOPIC, 17, on one broker or on
every master of a cluster, as ``mqadmin updateTopic -b/-c`` does). A broker registers its topics
with the NameServers after each change, so a new topic is routed within a moment, not at once.

``getTopicConfig`` (not an mqadmin command: mqadmin reads a broker's TopicConfig only inside its
static-topic commands, ``DefaultMQAdminExt.examineTopicConfig``) asks GET_TOPIC_CONFIG (351, 5.x)
of one broker (``-b``), of every master of a cluster (``-c``), or of every master in the topic's
route: what each broker holds (queue numbers, perm, order, filter type, attributes), not what the
NameServer was last told. A broker without the topic answers TOPIC_NOT_EXIST: an error with
``-b``; with ``-c`` those brokers are left out, and none having it is an error.
"""

from __future__ import annotations

import dataclasses

from rocketlite.admin.errors import AdminError, TopicNotFoundError
from rocketlite.admin.session import AdminSession, decode, route_masters
from rocketlite.client.errors import MQClientError
from rocketlite.client.message import check_topic
from rocketlite.protocol.admin_bodies import TopicConfigAndQueueMapping
from rocketlite.protocol.admin_headers import GetTopicConfigRequestHeader
from rocketlite.protocol.bodies import TopicConfig, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.headers import CreateTopicRequestHeader

PERM_WRITE = 2
PERM_READ = 4
PERM_READ_WRITE = 6
PERMS = (PERM_WRITE, PERM_READ, PERM_READ_WRITE)
"""The perms ``updateTopic -p`` takes: 2 write only, 4 read only, 6 read and write."""
MAX_QUEUES = 1024


@dataclasses.dataclass(slots=True)
class TopicUpdate:
    """One broker that took ``updateTopic``'s config."""

    broker_name: str
    address: str
    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    order: bool


@dataclasses.dataclass(slots=True)
class BrokerTopicConfig:
    """One broker's config of a topic (GET_TOPIC_CONFIG)."""

    address: str
    config: TopicConfig


async def get_topic_config(session: AdminSession, topic: str, *, broker_addr: str | None = None,
                           cluster: str | None = None) -> list[BrokerTopicConfig]:
    """``topic``'s config on ``broker_addr``, each master of ``cluster``, or (neither given)
    each master of its route, by address (module doc)."""
    if broker_addr is not None and cluster is not None:
        raise AdminError("give at most one of a broker address and a cluster")
    if broker_addr is None and cluster is None:
        targets = sorted(route_masters(await session.route(topic)).values())
    else:
        targets = await session.targets(broker_addr, cluster)
    out = []
    for addr in targets:
        reply = await session.call(addr, RequestCode.GET_TOPIC_CONFIG,
                                   GetTopicConfigRequestHeader(topic=topic),
                                   accept=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            if broker_addr is not None:
                raise TopicNotFoundError(f"topic {topic!r} does not exist on broker {addr} "
                                         f"(TOPIC_NOT_EXIST: {reply.remark or ''})")
            continue
        out.append(BrokerTopicConfig(
            addr, decode(TopicConfigAndQueueMapping, reply, addr, "topic config")))
    if not out:
        raise TopicNotFoundError(f"topic {topic!r} does not exist on {', '.join(targets) or 'any broker'}")
    return out


async def topic_list(session: AdminSession) -> list[str]:
    """Every topic the NameServer routes (system topics included), sorted."""
    return sorted(await session.topics())


async def topic_route(session: AdminSession, topic: str) -> TopicRouteData:
    """The route of ``topic``; AdminError when it does not exist."""
    return await session.route(topic)


async def update_topic(session: AdminSession, topic: str, *, broker_addr: str | None = None,
                       cluster: str | None = None, read_queue_nums: int = 8,
                       write_queue_nums: int = 8, perm: int = PERM_READ_WRITE,
                       order: bool = False) -> list[TopicUpdate]:
    """Create or update ``topic`` on ``broker_addr``, or on every master of ``cluster``."""
    if (broker_addr is None) == (cluster is None):
        raise AdminError("give exactly one of a broker address and a cluster")
    try:
        check_topic(topic)
    except MQClientError as e:
        raise AdminError(str(e)) from e
    if perm not in PERMS:
        raise AdminError(f"perm {perm} is not 2 (write), 4 (read) or 6 (read and write)")
    for what, n in (("read", read_queue_nums), ("write", write_queue_nums)):
        if not 1 <= n <= MAX_QUEUES:
            raise AdminError(f"{what} queue count {n} is not between 1 and {MAX_QUEUES}")
    if cluster is not None:
        targets = await session.master_addrs(cluster)
        if not targets:
            raise AdminError(f"cluster {cluster!r} has no master registered")
    else:
        assert broker_addr is not None
        targets = {"": broker_addr}
    header = CreateTopicRequestHeader(
        topic=topic, defaultTopic="TBW102", readQueueNums=read_queue_nums,
        writeQueueNums=write_queue_nums, perm=perm, topicFilterType="SINGLE_TAG", order=order)
    out = []
    for name, addr in targets.items():
        await session.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        out.append(TopicUpdate(name, addr, topic, read_queue_nums, write_queue_nums, perm, order))
    return out
