"""What push and lite-pull consumers share: subscriptions, the offset store, where a new queue
starts, and the rebalance (Java's ``RebalanceImpl``).

Rebalance, per subscribed topic: take the topic's readable queues from its route and the group's
consumer ids from a broker, sort both, and let the allocation strategy pick this client's share
(broadcasting: every queue). Queues no longer owned are dropped (offset persisted, then
forgotten); new ones start at the committed offset, or by ``consume_from_where`` when the group has
none: LAST is the queue's max offset, FIRST offset 0, TIMESTAMP the broker's search by time. In
clustering mode each consumer also follows its group's retry topic ``%RETRY%<group>``.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Iterable
from pathlib import Path

from rocketlite.client import running_info
from rocketlite.client.allocate import AllocateStrategy, strategy_by_name
from rocketlite.client.broker_api import BrokerApi
from rocketlite.client.config import ClientConfig, CredentialsLike, client_config
from rocketlite.client.consume_stats import ConsumeStatsTracker
from rocketlite.client.errors import MQClientError
from rocketlite.client.instance import ClientInstance
from rocketlite.client.message import check_topic
from rocketlite.client.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteOffsetStore,
)
from rocketlite.client.route import subscribe_queues
from rocketlite.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    TopicRouteData,
)
from rocketlite.protocol.running_info import ConsumerRunningInfo, ProcessQueueInfo
from rocketlite.remoting.tls import TlsOption

log = logging.getLogger(__name__)

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


class ConsumerBase(abc.ABC):
    consume_type = ConsumeType.CONSUME_PASSIVELY
    subscribe_retry_topic = True
    """Clustering consumers follow ``%RETRY%<group>`` (lite pull consumers do not)."""

    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str = "",
        config: ClientConfig | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate: AllocateStrategy | str = "AVG",
        offset_store_dir: Path | None = None,
        credentials: CredentialsLike | None = None,
        tls: TlsOption = None,
    ) -> None:
        check_topic(group)
        self.group = group
        self.config = client_config(config, namesrv_addr, credentials, tls)
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.allocate = strategy_by_name(allocate) if isinstance(allocate, str) else allocate
        self.offset_store_dir = offset_store_dir
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.topic_queues: dict[str, list[MessageQueue]] = {}
        self.instance: ClientInstance | None = None
        self.api: BrokerApi | None = None
        self.offset_store: OffsetStore | None = None
        self._started = False
        self._rebalance_lock = asyncio.Lock()
        self.stats = ConsumeStatsTracker()
        self.start_ms = 0

    # -- configuration --------------------------------------------------------------------------

    @property
    def clustering(self) -> bool:
        return self.message_model is MessageModel.CLUSTERING

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume ``topic``'s messages whose tag matches ``expression`` ("*", or "TagA || TagB")."""
        check_topic(topic)
        self.subscriptions[topic] = SubscriptionData.from_expression(topic, expression)
        if self._started and self.instance is not None:
            self.instance.rebalance_soon()

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self._started and self.instance is not None:
            self.instance.rebalance_soon()

    # -- lifecycle ------------------------------------------------------------------------------

    async def _start_base(self) -> None:
        if (self.clustering and self.subscribe_retry_topic
                and retry_topic(self.group) not in self.subscriptions):
            self.subscriptions[retry_topic(self.group)] = SubscriptionData.from_expression(
                retry_topic(self.group), "*")
        inst = self.instance = ClientInstance(self.config)
        self.api = BrokerApi(inst)
        self.start_ms = int(time.time() * 1000)
        if self.clustering:
            self.offset_store = RemoteOffsetStore(self.group, self.api)
        else:
            self.offset_store = LocalFileOffsetStore(inst.client_id.split("@")[0], self.group,
                                                     self.offset_store_dir)
        await self.offset_store.load()
        inst.register_consumer(self)
        await inst.start()
        await inst.route_subscriptions(self.group, list(self.subscriptions))
        self._started = True
        await inst.send_heartbeat()

    async def _shutdown_base(self) -> None:
        inst = self.instance
        if inst is None:
            return
        self._started = False
        await self.persist_offsets()
        await inst.unregister(consumer_group=self.group)
        await inst.close()

    def _inst(self) -> ClientInstance:
        if self.instance is None or self.api is None or self.offset_store is None:
            raise MQClientError("the consumer is not started (await consumer.start())")
        return self.instance

    # -- ClientInstance's view ------------------------------------------------------------------

    def topics(self) -> Iterable[str]:
        return list(self.subscriptions)

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        self.topic_queues[topic] = subscribe_queues(topic, route)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            groupName=self.group, consumeType=self.consume_type, messageModel=self.message_model,
            consumeFromWhere=self.consume_from_where,
            subscriptionDataSet=[self.subscriptions[t] for t in sorted(self.subscriptions)])

    def running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO's answer (``client/running_info``): settings, subscriptions,
        each owned queue, each topic's figures."""
        return running_info.build(self._settings(), self.subscriptions, {
            mq: self._queue_info(mq) for mq in self.owned_queues()}, self.stats, self.start_ms)

    def _settings(self) -> dict[str, object]:
        """The settings ``running_info`` shows, under the Java consumer's field names."""
        c = self.config
        out: dict[str, object] = {
            "consumerGroup": self.group, "messageModel": self.message_model.name,
            "consumeFromWhere": self.consume_from_where.name,
            "allocateMessageQueueStrategy": self.allocate.name,
            "namesrvAddr": c.namesrv_addr, "instanceName": c.instance_name or "DEFAULT",
            "pollNameServerInterval": int(c.poll_name_server_interval * 1000),
            "heartbeatBrokerInterval": int(c.heartbeat_interval * 1000),
            "persistConsumerOffsetInterval": int(c.persist_offset_interval * 1000)}
        if self.consume_timestamp_ms is not None:
            out["consumeTimestamp"] = self.consume_timestamp_ms
        return out

    def _queue_info(self, mq: MessageQueue) -> ProcessQueueInfo:
        """An owned queue in ``running_info``: its offset (what it will commit)."""
        store = self.offset_store
        return ProcessQueueInfo(commitOffset=store.in_memory(mq) if store is not None else -1)

    async def persist_offsets(self) -> None:
        if self.offset_store is not None:
            await self.offset_store.persist_all(self.owned_queues())

    # -- offset reset -------------------------------------------------------------------------

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET from a broker (mqadmin ``resetOffsetByTime``,
        ``skipAccumulatedMessage``), as Java's ``MQClientInstance.resetOffset``: the owned queues
        among ``offsets`` stop and drop their pending messages (no commit of the old position),
        the offset store takes the new offsets and writes them out at once (so that no later
        persist or pull carries the old ones back), and the queues start again from them. Queues
        this consumer does not own are left alone: the broker committed their offsets already."""
        if not self._started or self.offset_store is None:
            return
        async with self._rebalance_lock:
            owned = set(self.owned_queues())
            reset = {mq: o for mq, o in offsets.items() if mq in owned and mq.topic == topic}
            if not reset:
                return
            await self._stop_for_reset(sorted(reset))
            for mq, offset in reset.items():
                await self.offset_store.update(mq, offset, False)
                await self.offset_store.persist(mq)
            await self._start_after_reset(reset)
        log.info("group %s: offsets of %s reset by a broker to %s", self.group, topic,
                 {f"{mq.brokerName}/{mq.queueId}": o for mq, o in sorted(reset.items())})

    @abc.abstractmethod
    async def _stop_for_reset(self, mqs: list[MessageQueue]) -> None:
        """Stop ``mqs`` and drop what they hold, without persisting their offsets."""

    @abc.abstractmethod
    async def _start_after_reset(self, offsets: dict[MessageQueue, int]) -> None:
        """Start the queues stopped by ``_stop_for_reset`` again, at ``offsets``."""

    # -- rebalance ------------------------------------------------------------------------------

    @abc.abstractmethod
    def owned_queues(self) -> list[MessageQueue]:
        """The queues this consumer currently works on."""

    @abc.abstractmethod
    async def _apply_allocation(self, topic: str, allocated: list[MessageQueue]) -> None:
        """Drop the queues of ``topic`` not in ``allocated`` and start the new ones."""

    async def rebalance(self) -> None:
        """One rebalance at a time: the periodic one, a notified one and start's may overlap."""
        async with self._rebalance_lock:
            await self._rebalance()

    async def _rebalance(self) -> None:
        if not self._started:
            return
        for topic in list(self.subscriptions):
            allocated = await self.allocated(topic)
            if allocated is not None:
                await self._apply_allocation(topic, allocated)
        for topic in {mq.topic for mq in self.owned_queues()} - set(self.subscriptions):
            await self._apply_allocation(topic, [])

    async def allocated(self, topic: str) -> list[MessageQueue] | None:
        """This client's share of ``topic``'s queues; None when it cannot tell (no route, no ids)."""
        inst = self._inst()
        mqs = self.topic_queues.get(topic)
        if mqs is None:
            await inst.update_route(topic)
            mqs = self.topic_queues.get(topic)
        if mqs is None:
            return None
        if not self.clustering:
            return list(mqs)
        assert self.api is not None
        cids = sorted(await self.api.consumer_ids(self.group, topic))
        if not cids:
            log.warning("group %s: no consumer ids for %s from any broker", self.group, topic)
            return None
        if inst.client_id not in cids:  # the broker has not seen our heartbeat yet
            await inst.send_heartbeat()
            return None
        return self.allocate.allocate(self.group, inst.client_id, sorted(mqs), cids)

    async def start_offset(self, mq: MessageQueue) -> int:
        """Where a newly owned queue starts (Java's ``computePullFromWhere``)."""
        self._inst()
        assert self.offset_store is not None and self.api is not None
        stored = await self.offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)
        if stored >= 0:
            return stored
        cfw = self.consume_from_where
        if mq.topic.startswith(RETRY_PREFIX):
            return 0
        if cfw in (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET):
            return 0
        if cfw is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            ts = self.consume_timestamp_ms
            if ts is None:
                ts = int((time.time() - 1800) * 1000)  # Java: half an hour ago
            return await self.api.search_offset(mq, ts)
        return await self.api.max_offset(mq)
