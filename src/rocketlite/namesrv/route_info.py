"""RouteInfo: the NameServer's tables (RocketMQ's ``RouteInfoManager``), with no I/O.

* clusters -> broker names; broker name -> ``BrokerData`` (cluster, ``{brokerId: address}``);
* topic -> broker name -> ``QueueData`` (queue counts and permission), taken from the topic
  configs a *master* (broker id 0) registers, refreshed when its data version changes;
* broker address -> liveness (last registration or heartbeat, its own timeout, and the
  channel, i.e. the connection, the last of them came on).

A broker silent for longer than its timeout (120 s by default) is removed by ``scan_inactive``
along with every queue it served; topics left without queues disappear. The NameServer runs the
scan every 5 s. NameServers never talk to each other: each broker registers with every one.

A broker is also removed when the channel it last registered or heartbeated on closes
(``channel_closed``, Apache's ``RouteInfoManager.onChannelDestroy`` from
``BrokerHousekeepingService``), as an unregister would: a SIGKILLed master leaves the routes as
soon as the kernel closes its socket, not 120 s later, and consumers turn to its slave. A broker
that has meanwhile registered on another channel is bound to that one and stays. The channel is
any hashable object (the server passes its ``Connection``): this module does no I/O.

rocketlite extension: when a topic is unknown but some broker serves the auto-create template
topic TBW102 (``autoCreateTopicEnable`` on the broker), ``pick_route`` answers with the TBW102
brokers' route, so clients that need a route before their first send (ali-ons) can send and the
broker creates the topic then. That route is what a Java producer makes of TBW102's: write-only
(a consumer of a topic nobody created sees no queue, as with Apache's TOPIC_NOT_EXIST, instead of
pulling queues that do not exist: the C++ client re-pulls at once on each error, thousands a
second) with at most ``CLIENT_DEFAULT_TOPIC_QUEUE_NUMS`` queues (the broker creates the topic with
min(the send's ``defaultTopicQueueNums``, TBW102's); more made ali-ons's second send go to a queue
the new topic lacks). Retry and dead-letter topics never get it: the broker creates those itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rocketlite.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)

log = logging.getLogger(__name__)

MASTER_ID = 0
DEFAULT_BROKER_TIMEOUT_MS = 120_000
AUTO_CREATE_TOPIC = "TBW102"
CLIENT_DEFAULT_TOPIC_QUEUE_NUMS = 4  # defaultTopicQueueNums of the Java, C++ and ali-ons producers
BROKER_OWNED_TOPIC_PREFIXES = ("%RETRY%", "%DLQ%")
PERM_WRITE = 0x2
MAX_TOPICS = 1_000_000
MAX_BROKERS = 10_000


@dataclass(slots=True)
class BrokerLive:
    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    ha_server_addr: str
    cluster: str
    broker_name: str
    broker_id: int
    channel: object | None = None


class RouteInfo:
    def __init__(self, auto_create_route: bool = True) -> None:
        self.auto_create_route = auto_create_route
        self.topic_queues: dict[str, dict[str, QueueData]] = {}
        self.brokers: dict[str, BrokerData] = {}
        self.clusters: dict[str, set[str]] = {}
        self.live: dict[str, BrokerLive] = {}
        self.by_channel: dict[object, set[str]] = {}  # channel -> addresses bound to it

    # -- registration ------------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topics: TopicConfigSerializeWrapper | None,
        now_ms: int,
        timeout_ms: int | None = None,
        channel: object | None = None,
    ) -> tuple[str | None, str | None]:
        """Record a broker and, for a master with new data, its topics; return the master's
        address and HA address (what a slave needs), or None where unknown. ``channel``: the
        connection the registration came on (its closing removes the broker)."""
        if broker_name not in self.brokers and len(self.brokers) >= MAX_BROKERS:
            raise ValueError(f"the NameServer already knows {MAX_BROKERS} brokers")
        self.clusters.setdefault(cluster, set()).add(broker_name)
        data = self.brokers.get(broker_name)
        if data is None:
            data = self.brokers[broker_name] = BrokerData(brokerName=broker_name, cluster=cluster)
        data.cluster = cluster
        # One address has one id: a slave promoted to master (or the reverse) moves.
        for bid, addr in list(data.brokerAddrs.items()):
            if addr == broker_addr and bid != broker_id:
                del data.brokerAddrs[bid]
        first = data.brokerAddrs.get(broker_id) != broker_addr
        data.brokerAddrs[broker_id] = broker_addr
        version = topics.dataVersion if topics is not None else DataVersion()
        prev = self.live.get(broker_addr)
        changed = first or prev is None or _version_key(prev.data_version) != _version_key(version)
        if broker_id == MASTER_ID and topics is not None and changed:
            self._update_topics(broker_name, topics)
        live = self.live[broker_addr] = BrokerLive(
            now_ms, timeout_ms or DEFAULT_BROKER_TIMEOUT_MS, version, ha_server_addr, cluster,
            broker_name, broker_id, prev.channel if prev is not None else None,
        )
        self._bind(broker_addr, live, channel)
        if first:
            log.info("broker registered: %s %s id %d at %s", cluster, broker_name, broker_id,
                     broker_addr)
        master = data.brokerAddrs.get(MASTER_ID)
        if broker_id == MASTER_ID or master is None:
            return None, None
        master_live = self.live.get(master)
        return master, master_live.ha_server_addr if master_live else None

    def _update_topics(self, broker_name: str, wrapper: TopicConfigSerializeWrapper) -> None:
        configs = wrapper.topicConfigTable
        for topic, cfg in configs.items():
            queues = self.topic_queues.get(topic)
            if queues is None:
                if len(self.topic_queues) >= MAX_TOPICS:
                    log.warning("topic table full (%d): ignoring topic %s", MAX_TOPICS, topic)
                    continue
                queues = self.topic_queues[topic] = {}
            queues[broker_name] = QueueData(
                brokerName=broker_name, readQueueNums=cfg.readQueueNums,
                writeQueueNums=cfg.writeQueueNums, perm=cfg.perm, topicSysFlag=cfg.topicSysFlag,
            )
        # Topics this master no longer reports lose its queues.
        for topic in [t for t, q in self.topic_queues.items() if broker_name in q and t not in configs]:
            self._drop_queue(topic, broker_name)

    def _drop_queue(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queues.get(topic)
        if queues is None:
            return
        queues.pop(broker_name, None)
        if not queues:
            del self.topic_queues[topic]

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Forget a topic's queues (DELETE_TOPIC_IN_NAMESRV): of one cluster's brokers when
        ``cluster`` is given, else all of them. True if any were known. A broker still serving the
        topic registers it again only with a new data version (as with Java's NameServer)."""
        queues = self.topic_queues.get(topic)
        if queues is None:
            return False
        if not cluster:
            del self.topic_queues[topic]
            return True
        names = [b for b in queues if b in self.clusters.get(cluster, set())]
        for broker_name in names:
            self._drop_queue(topic, broker_name)
        return bool(names)

    def heartbeat(self, broker_addr: str, now_ms: int, channel: object | None = None) -> bool:
        live = self.live.get(broker_addr)
        if live is None:
            return False
        live.last_update_ms = now_ms
        self._bind(broker_addr, live, channel)
        return True

    def _bind(self, broker_addr: str, live: BrokerLive, channel: object | None) -> None:
        """Tie ``broker_addr`` to ``channel`` (None: keep the channel it has)."""
        if channel is None or channel is live.channel:
            return
        self._unbind(broker_addr, live)
        live.channel = channel
        self.by_channel.setdefault(channel, set()).add(broker_addr)

    def _unbind(self, broker_addr: str, live: BrokerLive) -> None:
        if live.channel is None:
            return
        addrs = self.by_channel.get(live.channel)
        if addrs is not None:
            addrs.discard(broker_addr)
            if not addrs:
                del self.by_channel[live.channel]
        live.channel = None

    def _forget(self, broker_addr: str) -> BrokerLive | None:
        live = self.live.pop(broker_addr, None)
        if live is not None:
            self._unbind(broker_addr, live)
        return live

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self._forget(broker_addr)
        self._remove_address(broker_name, broker_addr, cluster)
        log.info("broker unregistered: %s %s id %d at %s", cluster, broker_name, broker_id,
                 broker_addr)

    def _remove_address(self, broker_name: str, broker_addr: str, cluster: str | None) -> None:
        data = self.brokers.get(broker_name)
        if data is None:
            return
        for bid, addr in list(data.brokerAddrs.items()):
            if addr == broker_addr:
                del data.brokerAddrs[bid]
        if data.brokerAddrs:
            return
        # The last address of this broker name is gone: its queues and cluster entry go too.
        del self.brokers[broker_name]
        for name in (cluster, data.cluster):
            names = self.clusters.get(name) if name else None
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.clusters[name]  # type: ignore[arg-type]
        for topic in [t for t, q in self.topic_queues.items() if broker_name in q]:
            self._drop_queue(topic, broker_name)

    def scan_inactive(self, now_ms: int) -> list[str]:
        """Remove brokers whose last registration or heartbeat is older than their timeout."""
        expired = [addr for addr, live in self.live.items()
                   if live.last_update_ms + live.timeout_ms < now_ms]
        for addr in expired:
            live = self._forget(addr)
            assert live is not None
            log.warning("broker %s (%s) silent for %d ms: removed", addr, live.broker_name,
                        now_ms - live.last_update_ms)
            self._remove_address(live.broker_name, addr, live.cluster)
        return expired

    def channel_closed(self, channel: object) -> list[str]:
        """Remove the brokers whose last registration or heartbeat came on ``channel``, now
        closed (``onChannelDestroy``); the addresses removed. Brokers that registered on another
        channel since are not touched."""
        addrs = sorted(self.by_channel.pop(channel, ()))
        for addr in addrs:
            live = self.live.pop(addr, None)
            if live is None:
                continue
            live.channel = None
            log.warning("broker %s (%s id %d): the connection it registered on closed: removed",
                        addr, live.broker_name, live.broker_id)
            self._remove_address(live.broker_name, addr, live.cluster)
        return addrs

    # -- queries -----------------------------------------------------------------------------

    def pick_route(self, topic: str) -> TopicRouteData | None:
        queues = self.topic_queues.get(topic)
        if not queues and self.auto_create_route \
                and not topic.startswith(BROKER_OWNED_TOPIC_PREFIXES):
            queues = {name: _auto_create_queues(q)
                      for name, q in self.topic_queues.get(AUTO_CREATE_TOPIC, {}).items()
                      if q.perm & PERM_WRITE}
        if not queues:
            return None
        route = TopicRouteData()
        for name in sorted(queues):
            data = self.brokers.get(name)
            if data is None or not data.brokerAddrs:
                continue
            route.queueDatas.append(queues[name])
            route.brokerDatas.append(BrokerData(
                brokerName=name, cluster=data.cluster, brokerAddrs=dict(data.brokerAddrs),
            ))
        return route if route.brokerDatas else None

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            brokerAddrTable={n: BrokerData(brokerName=n, cluster=d.cluster,
                                           brokerAddrs=dict(d.brokerAddrs))
                             for n, d in self.brokers.items()},
            clusterAddrTable={c: set(names) for c, names in self.clusters.items()},
        )

    def topic_list(self) -> TopicList:
        return TopicList(topicList=set(self.topic_queues))


def _auto_create_queues(template: QueueData) -> QueueData:
    """TBW102's queues as a producer may use them for a topic the broker has yet to create."""
    n = min(template.writeQueueNums, CLIENT_DEFAULT_TOPIC_QUEUE_NUMS)
    return QueueData(brokerName=template.brokerName, readQueueNums=0, writeQueueNums=n,
                     perm=PERM_WRITE, topicSysFlag=template.topicSysFlag)


def _version_key(v: DataVersion) -> tuple[int, int, int]:
    return (v.stateVersion, v.timestamp, v.counter)
