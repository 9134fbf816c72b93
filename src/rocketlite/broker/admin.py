"""Offsets, lookups and topic administration: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET
(15), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
GET_EARLIEST_MSG_STORETIME (32), QUERY_MESSAGE (12), VIEW_MESSAGE_BY_ID (33),
UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_BROKER_RUNTIME_INFO (28), GET_BROKER_HA_STATUS (907), and what a slave syncs from its master
besides the topics: GET_ALL_CONSUMER_OFFSET (43, ``consumerOffset.json``'s content, a
ConsumerOffsetSerializeWrapper) and GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201, a
SubscriptionGroupWrapper). GET_ALL_DELAY_OFFSET (45) is the schedule service's; mqadmin's
stats, connections, group, reset and config codes are ``admin_remoting``'s.

Replication figures. RocketMQ's runtime info (4.x and 5.x ``prepareRuntimeInfo``) has no HA
key; 5.x answers them to GET_BROKER_HA_STATUS with an ``HARuntimeInfo`` body, which mqadmin
``haStatus`` prints, and ``ha_runtime_info`` builds that body with Java's field names:
``master``, ``masterCommitLogMaxOffset``, ``inSyncSlaveNums`` and ``haConnectionInfo`` (per slave:
``addr``, ``slaveAckOffset``, ``diff`` = master max offset - acked, ``inSync`` = diff below
``haMaxGapNotInSync``, ``transferredByteInSecond`` (not measured: 0), ``transferFromWhere``)
on a master; ``haClientRuntimeInfo`` (``masterAddr``, ``maxOffset``, ``lastReadTimestamp``; the
transfer rate, ``lastWriteTimestamp`` and ``masterFlushOffset`` are 0: not measured, and 4.x
does not send the master's flush offset) on a slave. rocketlite adds to each connection
``lagMillis`` (time behind, defined in ``ha/server``) and ``lastReportTimestamp``; Java's
fastjson ignores fields it does not know.

The runtime info gets a summary under rocketlite's keys (none is RocketMQ's except
``slaveFallBehindMuch``, 4.x's ``MessageStore.slaveFallBehindMuch()``: the master's max offset
minus the highest offset any slave acked, which 4.x logs but does not answer): ``brokerRole``;
on a master ``haServerAddr``, ``haSlaveNum``, ``haInSyncSlaveNum``, ``slaveFallBehindMuch``
and ``haSlaveLagMillis`` (the largest of its slaves', 0 without one); on a slave
``haMasterAddress`` (the HA address it replicates from, configured or learned from the
NameServer, empty until known), ``masterAddr`` (its master's Remoting address, from the
NameServer), ``haConnected``, ``haMasterMaxOffset`` (the end of the last frame, -1 before one)
and ``haLastReadTimestamp``.

QUERY_CONSUMER_OFFSET without a committed offset answers 0 when the queue still starts at 0 (its
first message was never deleted), else QUERY_NOT_FOUND so the client applies consumeFromWhere:
what Java does when the queue's head is in memory, and what the C++ orderly consumer relies on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

from rocketlite import __version__
from rocketlite.broker.subscriptions import SubscriptionGroupWrapper
from rocketlite.broker.topics import TopicError, is_system_topic
from rocketlite.common.errors import FormatError
from rocketlite.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    KVTable,
    TopicConfig,
    TopicFilterType,
)
from rocketlite.protocol.codes import CURRENT_VERSION, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rocketlite.remoting.connection import Connection

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

MAX_QUERY_NUM = 64  # RocketMQ's defaultQueryMaxNum


class AdminProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.store = broker.store

    def register(self) -> None:
        server = self.broker.server
        for code, fn in (
            (RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset),
            (RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset),
            (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset),
            (RequestCode.GET_MAX_OFFSET, self.max_offset),
            (RequestCode.GET_MIN_OFFSET, self.min_offset),
            (RequestCode.GET_EARLIEST_MSG_STORETIME, self.earliest_time),
            (RequestCode.QUERY_MESSAGE, self.query_message),
            (RequestCode.VIEW_MESSAGE_BY_ID, self.view_message),
            (RequestCode.UPDATE_AND_CREATE_TOPIC, self.create_topic),
            (RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic),
            (RequestCode.GET_ALL_TOPIC_CONFIG, self.all_topic_config),
            (RequestCode.GET_BROKER_RUNTIME_INFO, self.runtime_info),
            (RequestCode.GET_BROKER_HA_STATUS, self.ha_status),
            (RequestCode.GET_ALL_CONSUMER_OFFSET, self.all_consumer_offset),
            (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.all_subscription_group),
        ):
            server.register(code, fn)

    # -- offsets ---------------------------------------------------------------------------

    def query_consumer_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        offset = self.broker.offsets.query(h.consumerGroup, h.topic, h.queueId)
        if offset < 0:
            if h.setZeroIfNotFound is False or self.store.min_offset_in_queue(h.topic, h.queueId) > 0:
                return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                                    "Not found, maybe this group consumer boot first")
            offset = 0
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def update_consumer_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        self.broker.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return cmd.response(ResponseCode.SUCCESS)

    def all_consumer_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_CONSUMER_OFFSET (43): what ``consumerOffset.json`` would hold now (bare
        integer queue ids, as Java's ``ConsumerOffsetManager.encode()``)."""
        body = ConsumerOffsetSerializeWrapper(offsetTable=self.broker.offsets.snapshot())
        return cmd.response(ResponseCode.SUCCESS, None, None, body.to_json(legacy=True))

    def all_subscription_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): ``subscriptionGroup.json``'s content."""
        subs = self.broker.subscriptions
        with subs.lock:
            wrapper = SubscriptionGroupWrapper(subscriptionGroupTable=dict(subs.table),
                                               dataVersion=subs.data_version)
        return cmd.response(ResponseCode.SUCCESS, None, None, wrapper.to_json())

    def search_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext(cmd.ext_fields)
        offset = self.store.offset_in_queue_by_time(h.topic, h.queueId, h.timestamp)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def max_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext(cmd.ext_fields)
        offset = self.store.max_offset_in_queue(h.topic, h.queueId)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def min_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.from_ext(cmd.ext_fields)
        offset = self.store.min_offset_in_queue(h.topic, h.queueId)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def earliest_time(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetEarliestMsgStoretimeRequestHeader.from_ext(cmd.ext_fields)
        ts = self.store.earliest_message_time(h.topic, h.queueId)
        return cmd.response(ResponseCode.SUCCESS, None, {"timestamp": str(ts)})

    # -- lookups ---------------------------------------------------------------------------

    def query_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext(cmd.ext_fields)
        max_num = 1 if h.uniqueKeyQuery else min(max(h.maxNum, 1), MAX_QUERY_NUM)
        found = self.store.query_message(h.topic, h.key, max_num, h.beginTimestamp,
                                         h.endTimestamp)
        raws = [r for r in (self.store.read_raw(m.commit_log_offset, m.total_size)
                            for m in found) if r is not None]
        index = self.store.index
        ext = {
            "indexLastUpdateTimestamp": str(index.last_update_timestamp() if index else 0),
            "indexLastUpdatePhyoffset": str(index.end_phy_offset() if index else 0),
        }
        if not raws:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                                "can not find message, maybe time range not correct", ext)
        return cmd.response(ResponseCode.SUCCESS, None, ext, b"".join(raws))

    def view_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext(cmd.ext_fields)
        raw = None
        cl = self.store.commitlog
        if cl.min_offset <= h.offset < cl.max_offset:
            try:
                size = cl.record_size_at(h.offset)
                raw = self.store.read_raw(h.offset, size) if size > 0 else None
            except FormatError:
                raw = None
        if raw is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"can not find message by the offset, {h.offset}")
        return cmd.response(ResponseCode.SUCCESS, None, None, raw)

    # -- topics ----------------------------------------------------------------------------

    def create_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = CreateTopicRequestHeader.from_ext(cmd.ext_fields)
        b = self.broker
        if h.topic == b.config.broker_cluster_name or is_system_topic(h.topic, b.config):
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"the topic[{h.topic}] is conflict with system topic.")
        try:
            filter_type = TopicFilterType[h.topicFilterType or "SINGLE_TAG"]
        except KeyError:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"topicFilterType {h.topicFilterType!r} is not SINGLE_TAG or "
                                "MULTI_TAG")
        attributes = _parse_attributes(h.attributes)
        try:
            b.topics.update(TopicConfig(
                topicName=h.topic, readQueueNums=h.readQueueNums, writeQueueNums=h.writeQueueNums,
                perm=h.perm, topicFilterType=filter_type, topicSysFlag=h.topicSysFlag or 0,
                order=h.order, attributes=attributes,
            ))
        except TopicError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        return cmd.response(ResponseCode.SUCCESS)

    async def delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = DeleteTopicRequestHeader.from_ext(cmd.ext_fields)
        b = self.broker
        if is_system_topic(h.topic, b.config):
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"the topic[{h.topic}] is a system topic and cannot be deleted")
        b.topics.delete(h.topic)
        b.offsets.remove_topic(h.topic)
        await asyncio.to_thread(self.store.delete_topic, h.topic)
        return cmd.response(ResponseCode.SUCCESS)

    def all_topic_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, None, self.broker.topics.wrapper().to_json())

    def runtime_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        b = self.broker
        cl = self.store.commitlog
        stats = b.stats
        disk_ratio = self.store.retention.disk_usage(b.store_config.store_path_root_dir)
        table = {
            "brokerVersionDesc": f"rocketlite {__version__}",
            "brokerVersion": str(CURRENT_VERSION),
            "bootTimestamp": str(b.boot_timestamp),
            "runtime": _runtime(b.boot_timestamp),
            "commitLogMinOffset": str(cl.min_offset),
            "commitLogMaxOffset": str(cl.max_offset),
            "dispatchBehindBytes": str(max(0, cl.max_offset - self.store.dispatcher.dispatch_from)),
            "earliestMessageTimeStamp": str(self.store.earliest_message_time()),
            "msgPutTotalTodayNow": str(stats.put_messages),
            "msgGetTotalTodayNow": str(stats.got_messages),
            "putTps": f"{stats.put_tps():.2f}",
            "getTransferedTps": f"{stats.get_tps():.2f}",
            "brokerActive": "true",
            # Java's key: the used share of the store's file system (what retention watches)
            "commitLogDiskRatio": f"{disk_ratio:.4f}",
            "remainHowManyDataToFlush": f"{max(0, cl.max_offset - cl.flushed_offset)} B",
            "pullThreadPoolQueueSize": "0",
            "sendThreadPoolQueueSize": "0",
            "heldPullRequests": str(b.hold.count),
            "topicCount": str(len(b.topics)),
        }
        table.update(self._ha_summary())
        return cmd.response(ResponseCode.SUCCESS, None, None, KVTable(table=table).to_json())

    def _ha_summary(self) -> dict[str, str]:
        b = self.broker
        # the live role: in controller mode a configured master may be a slave now, and back
        out = {"brokerRole": "SLAVE" if b.slave else b.store_config.broker_role}
        gap = b.store_config.ha_max_gap_not_in_sync
        if b.ha_server is not None:
            st = b.ha_server.status()
            pushed = max(b.ha_server.max_acked, 0)  # Java's push2SlaveMaxOffset starts at 0
            out.update({
                "haServerAddr": b.ha_address,
                "haSlaveNum": str(len(st.slaves)),
                "haInSyncSlaveNum": str(sum(s.lag < gap for s in st.slaves)),
                "slaveFallBehindMuch": str(max(0, st.max_offset - pushed)),
                "haSlaveLagMillis": str(max((s.lag_ms for s in st.slaves), default=0)),
            })
        if b.ha_client is not None:
            cs = b.ha_client.status()
            out.update({
                "haMasterAddress": cs.master_address,
                "masterAddr": b.master_addr,
                "haConnected": str(cs.connected).lower(),
                "haMasterMaxOffset": str(cs.master_offset),
                "haLastReadTimestamp": str(cs.last_read_ms),
            })
        return out

    def ha_status(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, None,
                            json.dumps(self.ha_runtime_info(), separators=(",", ":")).encode())

    def ha_runtime_info(self) -> dict[str, object]:
        """The ``HARuntimeInfo`` body of GET_BROKER_HA_STATUS (see the module docstring)."""
        b = self.broker
        connections: list[dict[str, object]] = []
        client: dict[str, object] = {"masterAddr": None, "transferredByteInSecond": 0,
                                     "maxOffset": 0, "lastReadTimestamp": 0,
                                     "lastWriteTimestamp": 0, "masterFlushOffset": 0}
        info: dict[str, object] = {"master": b.ha_server is not None,
                                   "masterCommitLogMaxOffset": 0, "inSyncSlaveNums": 0,
                                   "haConnectionInfo": connections,
                                   "haClientRuntimeInfo": client}
        if b.ha_server is not None:
            st = b.ha_server.status()
            info["masterCommitLogMaxOffset"] = st.max_offset
            gap = b.store_config.ha_max_gap_not_in_sync
            info["inSyncSlaveNums"] = sum(s.lag < gap for s in st.slaves)
            for s in st.slaves:
                in_sync = s.lag < gap
                connections.append({
                    "addr": s.address, "slaveAckOffset": s.acked_offset, "diff": s.lag,
                    "inSync": in_sync, "transferredByteInSecond": 0,
                    "transferFromWhere": s.transfer_from, "lagMillis": s.lag_ms,
                    "lastReportTimestamp": s.last_report_ms,
                })
        if b.ha_client is not None:
            cs = b.ha_client.status()
            client.update(masterAddr=cs.master_address or None, maxOffset=cs.max_offset,
                          lastReadTimestamp=cs.last_read_ms)
        return info


def _runtime(boot_ms: int) -> str:
    s = max(0, int(time.time() - boot_ms / 1000))
    return f"[ {s // 86400} days, {s // 3600 % 24} hours, {s // 60 % 60} minutes, {s % 60} seconds ]"


def _parse_attributes(text: str | None) -> dict[str, str]:
    """``+key=value,+key2=value2`` (``-key`` deletes, which a new config ignores)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item.startswith("+") or "=" not in item:
            continue
        key, _, value = item[1:].partition("=")
        if key:
            out[key] = value
    return out


