"""Client bookkeeping requests: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP
(38), LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42); and NOTIFY_CONSUMER_IDS_CHANGED (40), which the
broker sends to a group's members when the group's membership changes.

A heartbeat registers each producer group and consumer group of the client on its connection,
creates the consumer group's subscription group and ``%RETRY%<group>`` topic (clustering mode,
as Java does), and fills tag codes for clients that send only ``subString`` (C++).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_READ, PERM_WRITE
from rocketlite.broker.topics import RETRY_GROUP_TOPIC_PREFIX
from rocketlite.protocol.bodies import (
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    UnlockBatchRequestBody,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
)
from rocketlite.remoting.connection import Connection

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)


class ClientProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def register(self) -> None:
        server = self.broker.server
        server.register(RequestCode.HEART_BEAT, self.heartbeat)
        server.register(RequestCode.UNREGISTER_CLIENT, self.unregister_client)
        server.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.consumer_list)
        server.register(RequestCode.LOCK_BATCH_MQ, self.lock_batch)
        server.register(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch)
        server.close_listeners.append(self.connection_closed)

    def heartbeat(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        b = self.broker
        hb = HeartbeatData.from_json(cmd.body)
        for cd in hb.consumerDataSet:
            # An unknown group (autoCreateSubscriptionGroup=false) is registered all the same, as
            # Java does; its pulls are what gets refused (SUBSCRIPTION_GROUP_NOT_EXIST).
            sgc = b.subscriptions.get(cd.groupName)
            if sgc is not None and cd.messageModel is not MessageModel.BROADCASTING:
                retry_topic = RETRY_GROUP_TOPIC_PREFIX + cd.groupName
                if b.topics.get(retry_topic) is None:
                    b.topics.create_plain(retry_topic, max(1, sgc.retryQueueNums),
                                          PERM_READ | PERM_WRITE)
            subs = [s.with_codes() for s in cd.subscriptionDataSet]
            changed = b.consumers.register(
                cd.groupName, conn, hb.clientID, cmd.language, cmd.version, cd.consumeType,
                cd.messageModel, cd.consumeFromWhere, subs,
            )
            if changed and (sgc is None or sgc.notifyConsumerIdsChangedEnable):
                b.notify_consumer_ids_changed(cd.groupName)
        for pd in hb.producerDataSet:
            b.producers.register(pd.groupName, conn, hb.clientID, cmd.language, cmd.version)
        # The Java client null-checks these two.
        return cmd.response(ResponseCode.SUCCESS, None,
                            {"IS_SUPPORT_HEART_BEAT_V2": "false", "IS_SUB_CHANGE": "false"})

    def unregister_client(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        b = self.broker
        h = UnregisterClientRequestHeader.from_ext(cmd.ext_fields)
        if h.producerGroup:
            b.producers.unregister(h.producerGroup, conn)
        if h.consumerGroup:
            # A client leaving the group keeps no queue locked: the C++ 4.x client's
            # UNLOCK_BATCH_MQ on shutdown leaves out the first queue of its set, which no other
            # orderly consumer could then take for rebalanceLockMaxLiveTime (60 s).
            if h.clientID:
                b.locks.unlock_client(h.consumerGroup, h.clientID)
            if b.consumers.unregister(h.consumerGroup, conn):
                sgc = b.subscriptions.table.get(h.consumerGroup)
                if sgc is None or sgc.notifyConsumerIdsChangedEnable:
                    b.notify_consumer_ids_changed(h.consumerGroup)
        return cmd.response(ResponseCode.SUCCESS)

    def consumer_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerListByGroupRequestHeader.from_ext(cmd.ext_fields)
        ids = self.broker.consumers.client_ids(h.consumerGroup)
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"no consumer for this group, {h.consumerGroup}")
        return cmd.response(ResponseCode.SUCCESS, None, None,
                            GetConsumerListByGroupResponseBody(consumerIdList=ids).to_json())

    def lock_batch(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        req = LockBatchRequestBody.from_json(cmd.body)
        if not req.consumerGroup or not req.clientId:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                "LOCK_BATCH_MQ needs consumerGroup and clientId")
        mine = {mq for mq in req.mqSet if mq.brokerName == self.broker.config.broker_name}
        locked = self.broker.locks.try_lock_batch(req.consumerGroup, mine, req.clientId)
        return cmd.response(ResponseCode.SUCCESS, None, None,
                            LockBatchResponseBody(lockOKMQSet=locked).to_json())

    def unlock_batch(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        req = UnlockBatchRequestBody.from_json(cmd.body)
        if req.consumerGroup and req.clientId:
            self.broker.locks.unlock_batch(req.consumerGroup, req.mqSet, req.clientId)
        return cmd.response(ResponseCode.SUCCESS)

    def connection_closed(self, conn: Connection) -> None:
        b = self.broker
        b.producers.channel_closed(conn)
        for group in b.consumers.channel_closed(conn):
            log.info("consumer %s left group %s (connection closed)", conn.peer, group)
            b.notify_consumer_ids_changed(group)
