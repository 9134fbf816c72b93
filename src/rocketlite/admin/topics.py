"""Topics: ``topicList`` (GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 206), ``topicRoute``
(GET_ROUTEINFO_BY_TOPIC, 105) and ``updateTopic`` (UPDATE_AND_CREATE_TOPIC, 17, on one broker or on
every master of a cluster, as ``mqadmin updateTopic -b/-c`` does). A broker registers its topics
with the NameServers after each change, so a new topic is routed within a moment, not at once.
"""

from __future__ import annotations

import dataclasses

from rocketlite.admin.errors import AdminError
from rocketlite.admin.session import AdminSession
from rocketlite.client.errors import MQClientError
from rocketlite.client.message import check_topic
from rocketlite.protocol.bodies import TopicRouteData
from rocketlite.protocol.codes import RequestCode
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
