"""BrokerConfig: the broker's own settings (the store's are ``StoreConfig``), under RocketMQ's keys.

Both are read from the same ``broker.conf``; each takes its keys and ignores the rest.

================================  ==================================  ==================  =====
RocketMQ key                      field                               default             unit
================================  ==================================  ==================  =====
brokerClusterName                 broker_cluster_name                 DefaultCluster
brokerName                        broker_name                         broker-a
brokerId                          broker_id                           0 (master)
namesrvAddr                       namesrv_addr                        127.0.0.1:9876      ``;``-separated
brokerPermission                  broker_permission                   6 (read, write)
autoCreateTopicEnable             auto_create_topic_enable            true
autoCreateSubscriptionGroup       auto_create_subscription_group      true
defaultTopicQueueNums             default_topic_queue_nums            8
longPollingEnable                 long_polling_enable                 true
shortPollingTimeMills             short_polling_time_mills            1000                ms
maxTransferCountOnMessageInMemory max_transfer_count                  32                  msgs
maxTransferBytesOnMessageInMemory max_transfer_bytes                  262144              bytes
registerNameServerPeriod          register_name_server_period         30000               ms
registerBrokerTimeoutMills        register_broker_timeout_mills       6000                ms
channelExpiredTimeout             channel_expired_timeout             120000              ms
rebalanceLockMaxLiveTime          rebalance_lock_max_live_time        60000               ms
flushConsumerOffsetInterval       flush_consumer_offset_interval      5000                ms
frameMaxLength                    frame_max_length                    16777216            bytes
serverChannelMaxIdleTimeSeconds   server_channel_max_idle_time_seconds 120                s
writeBufferHighWaterMark          write_buffer_high_water_mark        4194304 (4 MiB)     bytes
writeBufferLowWaterMark           write_buffer_low_water_mark         1048576 (1 MiB)     bytes
maxBufferedFrameBytes             max_buffered_frame_bytes            268435456 (256 MiB) bytes
maxConnections                    max_connections                     10000               conns
maxConnectionsPerAddress          max_connections_per_address         2000                conns
maxExtFields                      max_ext_fields                      1000                fields
maxHeaderBytes                    max_header_bytes                    1048576 (1 MiB)     bytes
maxInflightRequests               max_inflight_requests               1024                reqs
autoCreateTopicsPerMinute         auto_create_topics_per_minute       1000                topics
autoCreateGroupsPerMinute         auto_create_groups_per_minute       1000                groups
maxHeldPulls                      max_held_pulls                      100000              pulls
timerWheelEnable                  timer_wheel_enable                  true
timerMaxDelaySec                  timer_max_delay_sec                 259200 (3 days)     s
timerPrecisionMs                  timer_precision_ms                  1000                ms
timerRollWindowSlot               timer_roll_window_slot              172800 (2 days)     ticks
timerFlushIntervalMs              timer_flush_interval_ms             1000                ms
mappedFileSizeTimerLog            mapped_file_size_timer_log          104857600 (100 MiB) bytes
transactionTimeOut                transaction_time_out                6000                ms
transactionCheckInterval          transaction_check_interval          30000               ms
transactionCheckMax               transaction_check_max               15                  checks
rejectTransactionMessage          reject_transaction_message          false
reviveQueueNum                    revive_queue_num                    8                   queues
reviveInterval                    revive_interval                     1000                ms
popPollingSize                    pop_polling_size                    1024                pops
maxPopPollingSize                 max_pop_polling_size                100000              pops
popInflightMessageThreshold       pop_inflight_message_threshold      10000               CKs
popFromRetryProbability           pop_from_retry_probability          20                  %
popAckTimeInterval                pop_ack_time_interval               1000                ms
enableControllerMode              enable_controller_mode              false
controllerAddr                    controller_addr                     (none)              etcd://host:port
controllerLeaseTtl                controller_lease_ttl                3                   s
traceTopicEnable                  trace_topic_enable                  false
msgTraceTopicName                 msg_trace_topic_name                RMQ_SYS_TRACE_TOPIC
metricsPort                       metrics_port                        5557                port, 0: off
dashboardPort                     dashboard_port                      8082                port, 0: off
aclEnable                         acl_enable                          false
aclFile                           acl_file                            $ROCKETMQ_HOME/conf/plain_acl.yml
================================  ==================================  ==================  =====

The Remoting keys bound what one client can cost the broker (``remoting/limits.py``):
``serverChannelMaxIdleTimeSeconds`` (NettyServerConfig's; 0: never) closes a connection with
neither a read nor a write for that long, and one whose replies have waited unread above the
high mark for that long. ``writeBufferHighWaterMark``/``writeBufferLowWaterMark`` (NettyServerConfig's,
Netty's ``WriteBufferWaterMark``) are each connection's write-buffer marks: above the high mark the
broker stops reading from that client until it has read its replies down to the low mark.
``maxBufferedFrameBytes`` (not a RocketMQ key) bounds the bytes of incomplete frames of all
connections together; past it the connections holding the largest are closed.
``maxConnections`` and ``maxConnectionsPerAddress`` (per client IP) bound the open connections: one
past either is closed as soon as it is accepted. ``maxExtFields`` bounds a request header's ext
fields (more: answered SYSTEM_ERROR, not run), ``maxHeaderBytes`` its bytes (more: the frame is
not decoded and the connection closed); the frame decoder checks both as it reads the header.
``maxInflightRequests`` bounds one connection's requests answered by coroutines at once (reading
from it pauses until half are done). The NameServer of ``rocketlite start`` uses the same values.
None of these is a RocketMQ key.

``autoCreateTopicsPerMinute`` and ``autoCreateGroupsPerMinute`` (not RocketMQ keys) bound what
auto-creation (``autoCreateTopicEnable``, ``autoCreateSubscriptionGroup``) may create: a token
bucket each, refilled at that rate, holding at most a minute's worth. A send to an unknown topic
past it is answered TOPIC_NOT_EXIST, a pull or send-back of an unknown group
SUBSCRIPTION_GROUP_NOT_EXIST, each with a remark naming the limit. Every crossing of a limit is
counted in ``rocketlite_limit_rejections_total{limit=...}`` (``remoting.limits.LIMITS``).

TLS (``tlsServerMode``, ``tls.server.*``, ``tls.enable``, ``tls.client.*``) is read from the same
file into ``remoting.tls.TlsSettings``, not into this class: ``getBrokerConfig`` never shows a
key's password (docs/security.md).

The listening address is the store's (``brokerIP1``, ``listenPort``): it is also written into
every message id. ``rebalanceLockMaxLiveTime`` is Java's ``rocketmq.broker.rebalance.
lockMaxLiveTime`` system property; ``maxHeldPulls`` bounds long polling (not a RocketMQ key).
The ``timer*`` keys and ``mappedFileSizeTimerLog`` are 5.x's ``MessageStoreConfig`` keys for the
timer wheel (``broker/timer.py``). The ``transaction*`` keys drive the check-back of undecided
half messages (``broker/transaction/check.py``); with ``rejectTransactionMessage`` a prepared
send is answered NO_PERMISSION.

The POP keys (``broker/pop``) are 5.x BrokerConfig's: ``reviveQueueNum`` queues of the revive
topic, scanned every ``reviveInterval``; ``popPollingSize`` pops held per topic and
``maxPopPollingSize`` in all (more are answered POLLING_FULL); ``popInflightMessageThreshold``
bounds the checkpoints one revive queue keeps in memory (reading stops there until some are
revived or acked); ``popFromRetryProbability`` is the chance a pop reads the retry topic first.
``popAckTimeInterval`` (PopAckConstants' ``ackTimeInterval``, a constant in Java) is how long past
its revive time a checkpoint waits for acks still being written.

Controller mode (issue 20, ``broker/ha/role.py``): with ``enableControllerMode=true`` and
``controllerAddr=etcd://host:port`` (RocketMQ 5's keys; the controller is etcd here) the broker
registers its replica with a lease of ``controllerLeaseTtl`` seconds (not a RocketMQ key) and
takes the role the controller's state names; ``brokerRole`` is then only the role it runs as
when master (SLAVE there means ASYNC_MASTER), and ``brokerId`` (above 0) names the replica.

``metricsPort`` is also read under RocketMQ 5's name for it, ``metricsPromExporterPort`` (either
key sets it; both with different values is refused), so a RocketMQ 5 broker.conf carries over.
With ``aclEnable`` every Remoting request is checked against ``aclFile`` (not a RocketMQ key:
Java reads ``$ROCKETMQ_HOME/conf/plain_acl.yml``, the default here too, ``./conf`` without
``ROCKETMQ_HOME``) before its processor runs (``remoting/acl_gate.py``, docs/security.md).

With ``traceTopicEnable`` the broker creates the message trace topic ``msgTraceTopicName`` (one
queue) at start, as Java does, for clients that write traces (``client/trace.py``).

Outside controller mode ``brokerId`` must agree with the store's ``brokerRole`` (``check_role``):
0 for ASYNC_MASTER and SYNC_MASTER, more than 0 for a SLAVE, which also needs ``haMasterAddress``
or a ``namesrvAddr`` (then it replicates from the master's HA address the NameServer answers
its registration).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from rocketlite.common.errors import ConfigError
from rocketlite.remoting.limits import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
    DEFAULT_MAX_EXT_FIELDS,
    DEFAULT_MAX_HEADER,
    DEFAULT_MAX_INFLIGHT,
    ConnectionLimits,
)
from rocketlite.store.config import (
    StoreConfig,
    kwargs_from_properties,
    read_properties_file,
    to_properties,
)

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1


def _key(name: str) -> dict[str, str]:
    return {"key": name}


@dataclass(slots=True, frozen=True)
class BrokerConfig:
    broker_cluster_name: str = field(default="DefaultCluster", metadata=_key("brokerClusterName"))
    broker_name: str = field(default="broker-a", metadata=_key("brokerName"))
    broker_id: int = field(default=0, metadata=_key("brokerId"))
    namesrv_addr: str = field(default="127.0.0.1:9876", metadata=_key("namesrvAddr"))
    broker_permission: int = field(default=PERM_READ | PERM_WRITE, metadata=_key("brokerPermission"))
    auto_create_topic_enable: bool = field(default=True, metadata=_key("autoCreateTopicEnable"))
    auto_create_subscription_group: bool = field(default=True,
                                                 metadata=_key("autoCreateSubscriptionGroup"))
    default_topic_queue_nums: int = field(default=8, metadata=_key("defaultTopicQueueNums"))
    long_polling_enable: bool = field(default=True, metadata=_key("longPollingEnable"))
    short_polling_time_mills: int = field(default=1000, metadata=_key("shortPollingTimeMills"))
    max_transfer_count: int = field(default=32,
                                    metadata=_key("maxTransferCountOnMessageInMemory"))
    max_transfer_bytes: int = field(default=256 * 1024,
                                    metadata=_key("maxTransferBytesOnMessageInMemory"))
    register_name_server_period: int = field(default=30_000,
                                             metadata=_key("registerNameServerPeriod"))
    register_broker_timeout_mills: int = field(default=6000,
                                               metadata=_key("registerBrokerTimeoutMills"))
    channel_expired_timeout: int = field(default=120_000, metadata=_key("channelExpiredTimeout"))
    rebalance_lock_max_live_time: int = field(default=60_000,
                                              metadata=_key("rebalanceLockMaxLiveTime"))
    flush_consumer_offset_interval: int = field(default=5000,
                                                metadata=_key("flushConsumerOffsetInterval"))
    frame_max_length: int = field(default=16 * 1024 * 1024, metadata=_key("frameMaxLength"))
    max_held_pulls: int = field(default=100_000, metadata=_key("maxHeldPulls"))
    server_channel_max_idle_time_seconds: int = field(
        default=120, metadata=_key("serverChannelMaxIdleTimeSeconds"))
    write_buffer_high_water_mark: int = field(default=4 * 1024 * 1024,
                                              metadata=_key("writeBufferHighWaterMark"))
    write_buffer_low_water_mark: int = field(default=1024 * 1024,
                                             metadata=_key("writeBufferLowWaterMark"))
    max_buffered_frame_bytes: int = field(default=256 * 1024 * 1024,
                                          metadata=_key("maxBufferedFrameBytes"))
    max_connections: int = field(default=DEFAULT_MAX_CONNECTIONS, metadata=_key("maxConnections"))
    max_connections_per_address: int = field(default=DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
                                             metadata=_key("maxConnectionsPerAddress"))
    max_ext_fields: int = field(default=DEFAULT_MAX_EXT_FIELDS, metadata=_key("maxExtFields"))
    max_header_bytes: int = field(default=DEFAULT_MAX_HEADER, metadata=_key("maxHeaderBytes"))
    max_inflight_requests: int = field(default=DEFAULT_MAX_INFLIGHT,
                                       metadata=_key("maxInflightRequests"))
    auto_create_topics_per_minute: int = field(default=1000,
                                               metadata=_key("autoCreateTopicsPerMinute"))
    auto_create_groups_per_minute: int = field(default=1000,
                                               metadata=_key("autoCreateGroupsPerMinute"))
    timer_wheel_enable: bool = field(default=True, metadata=_key("timerWheelEnable"))
    timer_max_delay_sec: int = field(default=3 * 86_400, metadata=_key("timerMaxDelaySec"))
    timer_precision_ms: int = field(default=1000, metadata=_key("timerPrecisionMs"))
    timer_roll_window_slot: int = field(default=2 * 86_400, metadata=_key("timerRollWindowSlot"))
    timer_flush_interval_ms: int = field(default=1000, metadata=_key("timerFlushIntervalMs"))
    mapped_file_size_timer_log: int = field(default=100 * 1024 * 1024,
                                            metadata=_key("mappedFileSizeTimerLog"))
    transaction_time_out: int = field(default=6000, metadata=_key("transactionTimeOut"))
    transaction_check_interval: int = field(default=30_000,
                                            metadata=_key("transactionCheckInterval"))
    transaction_check_max: int = field(default=15, metadata=_key("transactionCheckMax"))
    reject_transaction_message: bool = field(default=False,
                                             metadata=_key("rejectTransactionMessage"))
    revive_queue_num: int = field(default=8, metadata=_key("reviveQueueNum"))
    revive_interval: int = field(default=1000, metadata=_key("reviveInterval"))
    pop_polling_size: int = field(default=1024, metadata=_key("popPollingSize"))
    max_pop_polling_size: int = field(default=100_000, metadata=_key("maxPopPollingSize"))
    pop_inflight_message_threshold: int = field(default=10_000,
                                                metadata=_key("popInflightMessageThreshold"))
    pop_from_retry_probability: int = field(default=20, metadata=_key("popFromRetryProbability"))
    pop_ack_time_interval: int = field(default=1000, metadata=_key("popAckTimeInterval"))
    enable_controller_mode: bool = field(default=False, metadata=_key("enableControllerMode"))
    controller_addr: str = field(default="", metadata=_key("controllerAddr"))
    controller_lease_ttl: int = field(default=3, metadata=_key("controllerLeaseTtl"))
    trace_topic_enable: bool = field(default=False, metadata=_key("traceTopicEnable"))
    msg_trace_topic_name: str = field(default="RMQ_SYS_TRACE_TOPIC", metadata=_key("msgTraceTopicName"))
    # Prometheus' /metrics (5557); 0: no metrics at all. RocketMQ 5 names it
    # metricsPromExporterPort: broker.conf (and updateBrokerConfig) take that name too
    metrics_port: int = field(default=5557, metadata={"key": "metricsPort",
                                                      "aliases": ("metricsPromExporterPort",)})
    # the web dashboard (rocketlite.dashboard) on loopback, served by the broker's process; 0: off
    dashboard_port: int = field(default=8082, metadata=_key("dashboardPort"))
    # ACL (rocketlite.acl): check every request against plain_acl.yml; "" : the default path
    acl_enable: bool = field(default=False, metadata=_key("aclEnable"))
    acl_file: str = field(default="", metadata=_key("aclFile"))

    def __post_init__(self) -> None:
        for f in fields(self):
            value, typ = getattr(self, f.name), _TYPES[f.name]
            if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
                raise ConfigError(f"{f.metadata['key']}={value!r}: expected {typ.__name__}")
            if (isinstance(value, int) and not isinstance(value, bool)
                    and f.name not in _MAY_BE_ZERO and value <= 0):
                raise ConfigError(f"{f.metadata['key']}={value}: must be positive")
        if self.broker_id < 0:
            raise ConfigError(f"brokerId={self.broker_id}: must be 0 (master) or more (slave)")
        for name in ("server_channel_max_idle_time_seconds", "write_buffer_low_water_mark",
                     "pop_from_retry_probability", "pop_ack_time_interval"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{_KEYS[name]}={getattr(self, name)}: must not be negative")
        if self.write_buffer_low_water_mark > self.write_buffer_high_water_mark:
            raise ConfigError(f"writeBufferLowWaterMark={self.write_buffer_low_water_mark}: above "
                              f"writeBufferHighWaterMark={self.write_buffer_high_water_mark}")
        if self.pop_from_retry_probability > 100:
            raise ConfigError(f"popFromRetryProbability={self.pop_from_retry_probability}: "
                              "must be within 0..100")
        if self.revive_queue_num > 64:
            raise ConfigError(f"reviveQueueNum={self.revive_queue_num}: at most 64")
        for key, port in (("metricsPort (metricsPromExporterPort)", self.metrics_port),
                          ("dashboardPort", self.dashboard_port)):
            if not 0 <= port <= 65535:
                raise ConfigError(f"{key}={port}: must be within 0..65535 (0: off)")
        if not 0 <= self.broker_permission <= 0xF:
            raise ConfigError(f"brokerPermission={self.broker_permission}: must be within 0..15")
        for name in ("broker_cluster_name", "broker_name"):
            if not getattr(self, name).strip():
                raise ConfigError(f"{_KEYS[name]}='': must not be empty")

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    @property
    def is_master(self) -> bool:
        return self.broker_id == 0

    def remoting_limits(self) -> ConnectionLimits:
        """The limits of the broker's (and ``rocketlite start``'s NameServer's) connections."""
        return ConnectionLimits(
            max_frame=self.frame_max_length,
            write_high=self.write_buffer_high_water_mark,
            write_low=self.write_buffer_low_water_mark,
            max_idle_s=float(self.server_channel_max_idle_time_seconds),
            buffered_frames_max=self.max_buffered_frame_bytes,
            max_connections=self.max_connections,
            max_connections_per_address=self.max_connections_per_address,
            max_ext_fields=self.max_ext_fields,
            max_header=self.max_header_bytes,
            max_inflight=self.max_inflight_requests,
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        return cls(**kwargs_from_properties(cls, props))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BrokerConfig:
        return cls.from_properties(read_properties_file(path))

    def to_properties(self) -> dict[str, str]:
        return to_properties(self)

    def replace(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **changes)


_TYPES: dict[str, type] = {
    name: typ for name, typ in typing.get_type_hints(BrokerConfig).items() if isinstance(typ, type)
}
_MAY_BE_ZERO = frozenset({"broker_id", "broker_permission", "server_channel_max_idle_time_seconds",
                          "metrics_port", "dashboard_port",
                          "write_buffer_low_water_mark", "pop_from_retry_probability",
                          "pop_ack_time_interval"})
_KEYS: dict[str, str] = {f.name: f.metadata["key"] for f in fields(BrokerConfig)}


def check_role(config: BrokerConfig, store: StoreConfig) -> None:
    """Refuse a ``brokerId`` that contradicts ``brokerRole`` (a SLAVE with brokerId 0, a master
    with brokerId > 0), and a SLAVE with neither ``haMasterAddress`` nor a NameServer (whose reply to
its registration names the master's HA address). Raises ``ConfigError``."""
    role = store.broker_role
    if config.enable_controller_mode:
        # the controller decides the role; brokerId names the replica (0 is the route's master id)
        if not config.controller_addr.startswith("etcd://"):
            raise ConfigError(f"enableControllerMode=true needs controllerAddr=etcd://host:port "
                              f"(got {config.controller_addr!r})")
        if config.broker_id == 0:
            raise ConfigError("enableControllerMode=true with brokerId=0: each replica needs its "
                              "own brokerId above 0 (the master registers under 0)")
        if store.ha_port == 0:
            raise ConfigError("enableControllerMode=true needs a fixed HA port (haListenPort, or "
                              "a listenPort other than 0): it is registered before it listens")
        return
    if store.is_slave and config.broker_id == 0:
        raise ConfigError("brokerRole=SLAVE with brokerId=0: a slave needs a brokerId above 0 "
                          "(0 is the master's)")
    if not store.is_slave and config.broker_id > 0:
        raise ConfigError(f"brokerRole={role} with brokerId={config.broker_id}: a master has "
                          "brokerId=0 (set brokerRole=SLAVE for a slave)")
    if store.is_slave and not store.ha_master_address and not config.namesrv_addrs:
        raise ConfigError("brokerRole=SLAVE needs haMasterAddress (the master's host:haListenPort) "
                          "or a namesrvAddr to learn it from")
