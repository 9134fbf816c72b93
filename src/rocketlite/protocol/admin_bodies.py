"""The bodies of the admin requests mqadmin sends (``remoting/.../protocol/admin`` and ``body``),
declared like :mod:`rocketlite.protocol.bodies` (same codecs, Java's property names).

Maps keyed by ``MessageQueue`` (``offsetTable`` of TopicStatsTable, ConsumeStats and
ResetOffsetBody) have JSON objects as keys, as Java's fastjson writes them:
``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"maxOffset":5,...}}}``. That is not
standard JSON: :func:`rocketlite.protocol.fastjson.loads` reads it (and standard JSON parsers do
not). Java ``double`` fields are written with a fraction (``0.0``), as fastjson does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketlite.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    DataVersion,
    JsonBody,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    TopicConfig,
)
from rocketlite.protocol.headers import Int32, Int64

__all__ = [
    "ClientConnection",
    "ConsumeStats",
    "ConsumerConnection",
    "GroupList",
    "MessageQueueForC",
    "OffsetWrapper",
    "ProducerConnection",
    "ResetOffsetBody",
    "ResetOffsetBodyForC",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicConfigAndQueueMapping",
    "TopicOffset",
    "TopicStatsTable",
]


@dataclass(slots=True, kw_only=True)
class TopicOffset(JsonBody):
    """``admin/TopicOffset``: a queue's offsets and the store time of its last message (0 when
    the queue is empty)."""

    minOffset: Int64 = 0
    maxOffset: Int64 = 0
    lastUpdateTimestamp: Int64 = 0


@dataclass(slots=True, kw_only=True)
class TopicStatsTable(JsonBody):
    """``admin/TopicStatsTable``, the reply of GET_TOPIC_STATS_INFO (202): every queue of the
    topic on this broker (max of read and write queue numbers). ``topicPutTps`` is 5.x's."""

    offsetTable: dict[MessageQueue, TopicOffset] = field(default_factory=dict)
    topicPutTps: float = 0.0


@dataclass(slots=True, kw_only=True)
class OffsetWrapper(JsonBody):
    """``admin/OffsetWrapper``: a queue's max offset (``brokerOffset``), the group's committed
    offset (0 if none) and pull offset, and the store time of the last consumed message (0 when
    none)."""

    brokerOffset: Int64 = 0
    consumerOffset: Int64 = 0
    pullOffset: Int64 = 0
    lastTimestamp: Int64 = 0


@dataclass(slots=True, kw_only=True)
class ConsumeStats(JsonBody):
    """``admin/ConsumeStats``, the reply of GET_CONSUME_STATS (208). The lag of a queue is
    ``brokerOffset - consumerOffset``."""

    offsetTable: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consumeTps: float = 0.0

    def total_diff(self) -> int:
        """Java's ``computeTotalDiff``: the group's lag summed over the queues."""
        return sum(w.brokerOffset - w.consumerOffset for w in self.offsetTable.values())


@dataclass(frozen=True, slots=True, order=True, kw_only=True)
class ClientConnection(JsonBody):
    """``body/Connection``: one client connection of a group. ``language`` is a LanguageCode name
    (``JAVA``, ``CPP``, ``PYTHON``...); ``version`` the client's MQVersion ordinal."""

    clientId: str = ""
    clientAddr: str = ""
    language: str = "JAVA"
    version: Int32 = 0


@dataclass(slots=True, kw_only=True)
class ConsumerConnection(JsonBody):
    """``body/ConsumerConnection``, the reply of GET_CONSUMER_CONNECTION_LIST (203): the group's
    online members, its subscriptions (topic -> SubscriptionData) and the settings its last
    heartbeat announced."""

    connectionSet: set[ClientConnection] = field(default_factory=set)
    subscriptionTable: dict[str, SubscriptionData] = field(default_factory=dict)
    consumeType: ConsumeType | None = None
    messageModel: MessageModel | None = None
    consumeFromWhere: ConsumeFromWhere | None = None


@dataclass(slots=True, kw_only=True)
class ProducerConnection(JsonBody):
    """``body/ProducerConnection``, the reply of GET_PRODUCER_CONNECTION_LIST (204)."""

    connectionSet: set[ClientConnection] = field(default_factory=set)


@dataclass(slots=True, kw_only=True)
class ResetOffsetBody(JsonBody):
    """``body/ResetOffsetBody``: the new offset of each queue. The body of
    RESET_CONSUMER_CLIENT_OFFSET (220, broker to client) and of INVOKE_BROKER_TO_RESET_OFFSET's
    reply (222)."""

    offsetTable: dict[MessageQueue, Int64] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, order=True, kw_only=True)
class MessageQueueForC(JsonBody):
    """``common/message/MessageQueueForC``: a queue and its offset, one item of
    ResetOffsetBodyForC."""

    topic: str
    brokerName: str
    queueId: Int32
    offset: Int64


@dataclass(slots=True, kw_only=True)
class ResetOffsetBodyForC(JsonBody):
    """``body/ResetOffsetBodyForC``: RESET_CONSUMER_CLIENT_OFFSET's body for C++ clients, whose
    JSON reader cannot take object keys: a list instead of a map."""

    offsetTable: list[MessageQueueForC] = field(default_factory=list)

    @classmethod
    def of(cls, offsets: dict[MessageQueue, int]) -> ResetOffsetBodyForC:
        return cls(offsetTable=sorted(
            MessageQueueForC(topic=mq.topic, brokerName=mq.brokerName, queueId=mq.queueId,
                             offset=o) for mq, o in offsets.items()))


@dataclass(slots=True, kw_only=True)
class GroupList(JsonBody):
    """``body/GroupList``, the reply of QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    groupList: set[str] = field(default_factory=set)


@dataclass(slots=True, kw_only=True)
class SubscriptionGroupConfig(JsonBody):
    """``subscription/SubscriptionGroupConfig`` with Java's defaults: the body of
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) and of GET_SUBSCRIPTIONGROUP_CONFIG's reply (352)."""

    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    consumeMessageOrderly: bool = False
    retryQueueNums: Int32 = 1
    retryMaxTimes: Int32 = 16
    brokerId: Int64 = 0
    whichBrokerWhenConsumeSlowly: Int64 = 1
    notifyConsumerIdsChangedEnable: bool = True
    groupSysFlag: Int32 = 0
    consumeTimeoutMinute: Int32 = 15
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class SubscriptionGroupWrapper(JsonBody):
    """``subscriptionGroup.json`` and GET_ALL_SUBSCRIPTIONGROUP_CONFIG's reply (201)."""

    subscriptionGroupTable: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    dataVersion: DataVersion = field(default_factory=DataVersion)


@dataclass(slots=True, kw_only=True)
class TopicConfigAndQueueMapping(TopicConfig):
    """``statictopic/TopicConfigAndQueueMapping``, the reply of GET_TOPIC_CONFIG (351, 5.x): a
    TopicConfig plus ``mappingDetail``, the logic queue mapping of a static topic. rocketlite has
    no static topics, so the mapping is null, which fastjson leaves out: the JSON is the
    TopicConfig's, and a Java broker's mapping is ignored when read."""
