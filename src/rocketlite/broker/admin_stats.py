"""What mqadmin's ``topicStatus``, ``consumerProgress``, ``consumerConnection`` and
``producerConnection`` read from a broker, computed the way Java's ``AdminBrokerProcessor`` does
(the Remoting adapter is ``admin_remoting``).

- Topic stats: every queue of the topic on this broker (the larger of its read and write queue
  numbers), its min and max offsets (0 for a queue never written) and the store time of its last
  message (0 when empty).
- Consume stats of a group: the topics asked for, else every topic the group committed offsets for;
  without an explicit ``topicList``, topics the group's online members do not subscribe to are left
  out (when they subscribe to any). Per read queue: the max offset (``brokerOffset``), the committed
  offset (0 when none) as ``consumerOffset`` and ``pullOffset`` (rocketlite keeps no separate pull
  offset), and the store time of the last consumed message (0 when none).
- Who consumes a topic: the groups whose online members subscribe to it or that committed offsets
  on it; the topics of a group: those it committed offsets on.
- Connections: the online members of a consumer or producer group, as their heartbeats announced
  them (client id, language, version) with the address they connect from.
- Rates: ``topicPutTps`` is the topic's put rate, ``consumeTps`` the group's delivery rate summed
  over the topics answered, both over the last minute (``rates``; 0.0 with metrics off).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

from rocketlite.broker.clients import ClientChannelInfo
from rocketlite.protocol.admin_bodies import (
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    ProducerConnection,
    TopicOffset,
    TopicStatsTable,
)
from rocketlite.protocol.bodies import MessageQueue

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker


class AdminStats:
    """Read-only views of the broker's queues, offsets and clients for the admin tools."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def topic_stats(self, topic: str) -> TopicStatsTable | None:
        """The topic's queues on this broker; None if the broker has no such topic."""
        b = self.broker
        tc = b.topics.get(topic)
        if tc is None:
            return None
        store = b.store
        table: dict[MessageQueue, TopicOffset] = {}
        for qid in range(max(tc.readQueueNums, tc.writeQueueNums)):
            lo = max(0, store.min_offset_in_queue(topic, qid))
            hi = max(0, store.max_offset_in_queue(topic, qid))
            last = max(0, store.message_store_time(topic, qid, hi - 1)) if hi > 0 else 0
            table[self._mq(topic, qid)] = TopicOffset(minOffset=lo, maxOffset=hi,
                                                      lastUpdateTimestamp=last)
        return TopicStatsTable(offsetTable=table, topicPutTps=b.rates.put_tps(topic))

    def consume_stats(self, group: str, topic: str | None = None,
                      topic_list: Iterable[str] = ()) -> ConsumeStats:
        """The group's progress on each queue (see the module docstring for which topics)."""
        b = self.broker
        topics = set(topic_list)
        if not topics:
            topics = {topic} if topic else b.offsets.topics_of(group)
            info = b.consumers.get(group)
            if info is not None and info.subscriptions:
                topics = {t for t in topics if t in info.subscriptions}
        stats = ConsumeStats()
        for name in sorted(topics):
            tc = b.topics.get(name)
            if tc is None:
                continue
            stats.consumeTps += b.rates.consume_tps(name, group)
            for qid in range(tc.readQueueNums):
                stats.offsetTable[self._mq(name, qid)] = self._progress(group, name, qid)
        return stats

    def _progress(self, group: str, topic: str, qid: int) -> OffsetWrapper:
        store = self.broker.store
        committed = max(0, self.broker.offsets.query(group, topic, qid))
        last = store.message_store_time(topic, qid, committed - 1) if committed > 0 else 0
        return OffsetWrapper(brokerOffset=max(0, store.max_offset_in_queue(topic, qid)),
                             consumerOffset=committed, pullOffset=committed,
                             lastTimestamp=max(0, last))

    def consumer_connection(self, group: str) -> ConsumerConnection | None:
        """The group's online members and subscriptions; None if none is online."""
        info = self.broker.consumers.get(group)
        if info is None:
            return None
        return ConsumerConnection(
            connectionSet=_connections(info.channels.items()),
            subscriptionTable=dict(info.subscriptions), consumeType=info.consume_type,
            messageModel=info.message_model, consumeFromWhere=info.consume_from_where)

    def producer_connection(self, group: str) -> ProducerConnection | None:
        """The producer group's online members; None if none is online."""
        members = self.broker.producers.groups.get(group)
        if not members:
            return None
        return ProducerConnection(connectionSet=_connections(members.items()))

    def groups_of_topic(self, topic: str) -> set[str]:
        """The groups consuming ``topic``: online members subscribing to it, and groups with
        offsets on it (Java's ``queryTopicConsumeByWho``)."""
        b = self.broker
        online = {g for g, info in list(b.consumers.groups.items()) if topic in info.subscriptions}
        return online | b.offsets.groups_of(topic)

    def topics_of_group(self, group: str) -> set[str]:
        """The topics ``group`` committed offsets for (Java's ``whichTopicByConsumer``)."""
        return self.broker.offsets.topics_of(group)

    def _mq(self, topic: str, qid: int) -> MessageQueue:
        return MessageQueue(topic=topic, brokerName=self.broker.config.broker_name, queueId=qid)


def _connections(items: Iterable[tuple[Hashable, ClientChannelInfo]]) -> set[ClientConnection]:
    return {ClientConnection(clientId=c.client_id, clientAddr=str(getattr(ch, "peer", ch)),
                             language=c.language, version=c.version)
            for ch, c in list(items)}
