"""Custom headers of the admin requests mqadmin sends, declared like
:mod:`rocketlite.protocol.headers` (Java field names are the wire keys; no default = ``@CFNotNull``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketlite.protocol.headers import Header, Int32, Int64

__all__ = [
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "GetBrokerConfigResponseHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetSubscriptionGroupConfigRequestHeader",
    "GetTopicConfigRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "QueryTopicsByConsumerRequestHeader",
    "ResetOffsetRequestHeader",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTopicStatsInfoRequestHeader(Header):
    """GET_TOPIC_STATS_INFO (202)."""

    topic: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumeStatsRequestHeader(Header):
    """GET_CONSUME_STATS (208). Without ``topic`` (or ``topicList``, 5.x: ``;``-separated) the
    stats cover every topic the group committed offsets for."""

    consumerGroup: str
    topic: str | None = None
    topicList: str | None = None

    def topics(self) -> list[str]:
        """``topicList``'s names (Java's ``fetchTopicList``), empty when not given."""
        return [t for t in (self.topicList or "").split(";") if t.strip()]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerConnectionListRequestHeader(Header):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumerGroup: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetProducerConnectionListRequestHeader(Header):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producerGroup: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSubscriptionGroupRequestHeader(Header):
    """DELETE_SUBSCRIPTIONGROUP (207); ``cleanOffset`` also drops the group's committed offsets."""

    groupName: str
    cleanOffset: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220, broker to
    client). ``timestamp`` -1 means each queue's max offset; ``isForce`` also moves offsets
    forward (without it a queue whose committed offset is behind the target keeps it).
    ``queueId``/``offset`` are 5.x's server-side reset of one queue."""

    topic: str
    group: str
    timestamp: Int64
    isForce: bool
    queueId: Int32 = -1
    offset: Int64 | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GetBrokerConfigResponseHeader(Header):
    """GET_BROKER_CONFIG's (26) reply: ``version`` is the configuration's DataVersion JSON."""

    version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicFromNamesrvRequestHeader(Header):
    """DELETE_TOPIC_IN_NAMESRV (216): the topic's routes, of one cluster's brokers if
    ``clusterName`` is given (5.x), else everywhere."""

    topic: str
    clusterName: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryTopicConsumeByWhoRequestHeader(Header):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryTopicsByConsumerRequestHeader(Header):
    """QUERY_TOPICS_BY_CONSUMER (343)."""

    group: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetSubscriptionGroupConfigRequestHeader(Header):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352)."""

    group: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTopicConfigRequestHeader(Header):
    """GET_TOPIC_CONFIG (351, 5.x). ``lo`` (5.x's TopicRequestHeader: answer the static topic's
    logic queue mapping too) is read and has nothing to add here: rocketlite has no static
    topics."""

    topic: str
    lo: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerRunningInfoRequestHeader(Header):
    """GET_CONSUMER_RUNNING_INFO (307): mqadmin to a broker, which sends it on, unchanged, to the
    client ``clientId`` of ``consumerGroup``; with ``jstackEnable`` the client adds a dump of its
    threads."""

    consumerGroup: str
    clientId: str
    jstackEnable: bool = False
