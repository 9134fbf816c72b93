"""The Remoting adapter of mqadmin's broker requests (issue 21), over the services
``admin_stats`` (GET_TOPIC_STATS_INFO 202, GET_CONSUME_STATS 208, GET_CONSUMER_CONNECTION_LIST 203,
GET_PRODUCER_CONNECTION_LIST 204, QUERY_TOPIC_CONSUME_BY_WHO 300: a GroupList,
QUERY_TOPICS_BY_CONSUMER 343: a TopicList with this broker's address), ``admin_groups``
(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200, GET_SUBSCRIPTIONGROUP_CONFIG 352: the group's
SubscriptionGroupConfig or SUBSCRIPTION_GROUP_NOT_EXIST "No group in this broker",
DELETE_SUBSCRIPTIONGROUP 207, INVOKE_BROKER_TO_RESET_OFFSET 222) and ``admin_config``
(GET_BROKER_CONFIG 26, UPDATE_BROKER_CONFIG 25), GET_TOPIC_CONFIG (351, 5.x: one topic's
TopicConfigAndQueueMapping), and CLEAN_EXPIRED_CONSUMEQUEUE (306, the
store's ``drop_expired_queues``: queues whose messages all left the CommitLog, not of system
topics (``topics.keeps_queues``), are dropped and start again at offset 0, as in Java). Codes,
headers, bodies and remarks are Java's (``protocol.admin_headers``, ``protocol.admin_bodies``):

- 202 on an unknown topic: TOPIC_NOT_EXIST "topic[T] not exist"; 351 on one: TOPIC_NOT_EXIST
  "No topic in this broker. topic: T".
- 203 for a group without online members: CONSUMER_NOT_ONLINE "the consumer group[G] not online";
  204 for a producer group without any: SYSTEM_ERROR "the producer group[G] not exist".
- 200 with a bad group name: INVALID_PARAMETER (Java's ``validateGroup`` remark).
- 222 answers a ResetOffsetBody of the committed offsets and pushes them to each online member of
  the group as RESET_CONSUMER_CLIENT_OFFSET (220, one-way; header topic, group, timestamp,
  isForce; a ResetOffsetBody, or ResetOffsetBodyForC to a C++ client). Refusals: TOPIC_NOT_EXIST,
  SUBSCRIPTION_GROUP_NOT_EXIST, SYSTEM_ERROR (a slave; an offset out of the queue's range).
- 26's body is ``key=value`` lines, its header ``version`` the DataVersion JSON; 25 takes
  properties text and answers NO_PERMISSION naming the key that cannot change live
  (``admin_config.HOT_KEYS``) or INVALID_PARAMETER for a bad value.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING

from rocketlite.broker.admin_config import BrokerConfigAdmin, ConfigRefused, KeyNotLive
from rocketlite.broker.admin_groups import (
    AdminRequestError,
    GroupAdmin,
    GroupNotFound,
    InvalidRequest,
    TopicNotFound,
)
from rocketlite.broker.admin_stats import AdminStats
from rocketlite.broker.subscriptions import SubscriptionGroupConfig
from rocketlite.broker.topics import keeps_queues
from rocketlite.common.errors import BodyError
from rocketlite.protocol.admin_bodies import (
    GroupList,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    TopicConfigAndQueueMapping,
)
from rocketlite.protocol.admin_headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    QueryTopicsByConsumerRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketlite.protocol.bodies import MessageQueue, TopicConfig, TopicList
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

RC = ResponseCode
TOPIC_CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(TopicConfig))


class AdminRemoting:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.stats = AdminStats(broker)
        self.groups = GroupAdmin(broker)
        self.config = BrokerConfigAdmin(broker)

    def register(self) -> None:
        server = self.broker.server
        for code, fn in (
            (RequestCode.GET_TOPIC_STATS_INFO, self.topic_stats),
            (RequestCode.GET_TOPIC_CONFIG, self.topic_config),
            (RequestCode.GET_CONSUME_STATS, self.consume_stats),
            (RequestCode.GET_CONSUMER_CONNECTION_LIST, self.consumer_connections),
            (RequestCode.GET_PRODUCER_CONNECTION_LIST, self.producer_connections),
            (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, self.topic_consumers),
            (RequestCode.QUERY_TOPICS_BY_CONSUMER, self.group_topics),
            (RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, self.get_group),
            (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_group),
            (RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_group),
            (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.reset_offset),
            (RequestCode.GET_BROKER_CONFIG, self.get_config),
            (RequestCode.UPDATE_BROKER_CONFIG, self.update_config),
            (RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, self.clean_expired_queues),
        ):
            server.register(code, fn)

    # -- stats and connections -------------------------------------------------------------

    def topic_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.from_ext(cmd.ext_fields)
        table = self.stats.topic_stats(h.topic)
        if table is None:
            return cmd.response(RC.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        return cmd.response(RC.SUCCESS, None, None, table.to_json())

    def topic_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetTopicConfigRequestHeader.from_ext(cmd.ext_fields)
        tc = self.broker.topics.get(h.topic)
        if tc is None:
            return cmd.response(RC.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
        body = TopicConfigAndQueueMapping(**{f: getattr(tc, f) for f in TOPIC_CONFIG_FIELDS})
        return cmd.response(RC.SUCCESS, None, None, body.to_json())

    def consume_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext(cmd.ext_fields)
        stats = self.stats.consume_stats(h.consumerGroup, h.topic, h.topics())
        return cmd.response(RC.SUCCESS, None, None, stats.to_json())

    def consumer_connections(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerConnectionListRequestHeader.from_ext(cmd.ext_fields)
        body = self.stats.consumer_connection(h.consumerGroup)
        if body is None:
            return cmd.response(RC.CONSUMER_NOT_ONLINE,
                                f"the consumer group[{h.consumerGroup}] not online")
        return cmd.response(RC.SUCCESS, None, None, body.to_json())

    def producer_connections(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetProducerConnectionListRequestHeader.from_ext(cmd.ext_fields)
        body = self.stats.producer_connection(h.producerGroup)
        if body is None:
            return cmd.response(RC.SYSTEM_ERROR, f"the producer group[{h.producerGroup}] not exist")
        return cmd.response(RC.SUCCESS, None, None, body.to_json())

    def topic_consumers(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryTopicConsumeByWhoRequestHeader.from_ext(cmd.ext_fields)
        body = GroupList(groupList=self.stats.groups_of_topic(h.topic))
        return cmd.response(RC.SUCCESS, None, None, body.to_json())

    def group_topics(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryTopicsByConsumerRequestHeader.from_ext(cmd.ext_fields)
        body = TopicList(topicList=self.stats.topics_of_group(h.group),
                         brokerAddr=self.broker.address)
        return cmd.response(RC.SUCCESS, None, None, body.to_json())

    # -- groups ----------------------------------------------------------------------------

    def update_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        if not cmd.body:  # Java: nothing to do
            return cmd.response(RC.SUCCESS)
        try:
            sgc = SubscriptionGroupConfig.from_json(cmd.body)
            self.groups.update_group(sgc)
        except (BodyError, InvalidRequest) as e:
            return cmd.response(RC.INVALID_PARAMETER, str(e))
        log.info("subscription group %s updated by %s", sgc.groupName, conn.peer)
        return cmd.response(RC.SUCCESS)

    def get_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetSubscriptionGroupConfigRequestHeader.from_ext(cmd.ext_fields)
        sgc = self.broker.subscriptions.table.get(h.group)
        if sgc is None:
            return cmd.response(RC.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return cmd.response(RC.SUCCESS, None, None, sgc.to_json())

    def delete_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.from_ext(cmd.ext_fields)
        self.groups.delete_group(h.groupName, h.cleanOffset)
        return cmd.response(RC.SUCCESS)

    def reset_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = ResetOffsetRequestHeader.from_ext(cmd.ext_fields)
        try:
            offsets = self.groups.reset_offset(h.topic, h.group, h.timestamp, h.isForce,
                                               h.queueId, h.offset)
        except TopicNotFound as e:
            return cmd.response(RC.TOPIC_NOT_EXIST, str(e))
        except GroupNotFound as e:
            return cmd.response(RC.SUBSCRIPTION_GROUP_NOT_EXIST, str(e))
        except AdminRequestError as e:
            return cmd.response(RC.SYSTEM_ERROR, str(e))
        self.push_reset(h, offsets)
        return cmd.response(RC.SUCCESS, None, None, ResetOffsetBody(offsetTable=offsets).to_json())

    def push_reset(self, h: ResetOffsetRequestHeader, offsets: dict[MessageQueue, int]) -> int:
        """Tell the group's online Remoting members their new offsets; how many were told."""
        info = self.broker.consumers.get(h.group)
        if info is None:
            return 0
        ext = ResetOffsetRequestHeader(topic=h.topic, group=h.group, timestamp=h.timestamp,
                                       isForce=h.isForce).to_ext()
        body = ResetOffsetBody(offsetTable=offsets).to_json()
        body_c = ResetOffsetBodyForC.of(offsets).to_json()  # C++ reads no object keys
        told = 0
        for ch, client in list(info.channels.items()):
            if not isinstance(ch, Connection) or not ch.is_open:
                continue
            ch.send_oneway(RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext),
                body_c if client.language == "CPP" else body))
            told += 1
        log.info("told %d member(s) of %s their reset offsets on %s", told, h.group, h.topic)
        return told

    async def clean_expired_queues(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        store, config = self.broker.store, self.broker.config
        dropped = await asyncio.to_thread(store.drop_expired_queues,
                                          lambda topic: keeps_queues(topic, config))
        await asyncio.to_thread(store.remove_queue_files, dropped)
        log.info("dropped %d expired ConsumeQueue(s) for %s: %s", len(dropped), conn.peer,
                 [f"{cq.topic}/{cq.queue_id}" for cq in dropped])
        return cmd.response(RC.SUCCESS)

    # -- configuration ---------------------------------------------------------------------

    def get_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ext = GetBrokerConfigResponseHeader(
            version=self.config.data_version.to_json().decode()).to_ext()
        return cmd.response(RC.SUCCESS, None, ext, self.config.text().encode())

    def update_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        if not cmd.body:
            return cmd.response(RC.SUCCESS)
        try:
            text = bytes(cmd.body).decode("utf-8")
        except UnicodeDecodeError:
            return cmd.response(RC.SYSTEM_ERROR, "string2Properties error: the body is not UTF-8")
        try:
            changed = self.config.update_text(text)
        except KeyNotLive as e:
            return cmd.response(RC.NO_PERMISSION, str(e))
        except ConfigRefused as e:
            return cmd.response(RC.INVALID_PARAMETER, str(e))
        log.info("broker config updated by %s: %s", conn.peer, changed)
        return cmd.response(RC.SUCCESS)
