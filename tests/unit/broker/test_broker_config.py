"""BrokerConfig: RocketMQ keys, defaults, validation naming the key, broker.conf, round trip."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.broker.config import BrokerConfig
from rocketlite.common.errors import ConfigError
from rocketlite.store.config import StoreConfig

KEYS = {
    "reviveQueueNum", "reviveInterval", "popPollingSize", "maxPopPollingSize",
    "popInflightMessageThreshold", "popFromRetryProbability", "popAckTimeInterval",
    "brokerClusterName", "brokerName", "brokerId", "namesrvAddr", "brokerPermission",
    "autoCreateTopicEnable", "autoCreateSubscriptionGroup", "defaultTopicQueueNums",
    "longPollingEnable", "shortPollingTimeMills", "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInMemory", "registerNameServerPeriod", "registerBrokerTimeoutMills",
    "channelExpiredTimeout", "rebalanceLockMaxLiveTime", "flushConsumerOffsetInterval",
    "frameMaxLength", "maxHeldPulls",
    # what one connection may cost (NettyServerConfig keys; maxBufferedFrameBytes is rocketlite's)
    "serverChannelMaxIdleTimeSeconds", "writeBufferHighWaterMark", "writeBufferLowWaterMark",
    "maxBufferedFrameBytes",
    # limits against abuse (rocketlite's)
    "maxConnections", "maxConnectionsPerAddress", "maxExtFields", "maxHeaderBytes",
    "maxInflightRequests",
    "autoCreateTopicsPerMinute", "autoCreateGroupsPerMinute",
    # the timer wheel (5.x MessageStoreConfig keys)
    "timerWheelEnable", "timerMaxDelaySec", "timerPrecisionMs", "timerRollWindowSlot",
    "timerFlushIntervalMs", "mappedFileSizeTimerLog",
    # transactional messages (4.9 BrokerConfig keys)
    "transactionTimeOut", "transactionCheckInterval", "transactionCheckMax",
    "rejectTransactionMessage",
    # controller mode (RocketMQ 5 keys; controllerLeaseTtl is rocketlite's)
    "enableControllerMode", "controllerAddr", "controllerLeaseTtl",
    # message trace (BrokerConfig keys)
    "traceTopicEnable", "msgTraceTopicName",
    # Prometheus /metrics (rocketlite's name for RocketMQ 5's metricsPromExporterPort)
    "metricsPort", "dashboardPort",
    # ACL (aclEnable is BrokerConfig's; aclFile is rocketlite's)
    "aclEnable", "aclFile",
}


def test_every_field_has_its_rocketmq_key() -> None:
    assert {f.metadata["key"] for f in fields(BrokerConfig)} == KEYS
    assert set(BrokerConfig().to_properties()) == KEYS


def test_defaults_are_rocketmqs() -> None:
    c = BrokerConfig()
    assert (c.broker_cluster_name, c.broker_name, c.broker_id) == ("DefaultCluster", "broker-a", 0)
    assert c.is_master and c.broker_permission == 6
    assert c.auto_create_topic_enable and c.auto_create_subscription_group
    assert c.default_topic_queue_nums == 8 and c.register_name_server_period == 30_000
    assert c.channel_expired_timeout == 120_000 and c.max_transfer_count == 32
    assert c.namesrv_addrs == ["127.0.0.1:9876"]


@pytest.mark.parametrize("key", ["autoCreateTopicEnable", "autoCreateSubscriptionGroup",
                                 "longPollingEnable"])
def test_boolean_keys_may_be_false(key: str) -> None:
    c = BrokerConfig.from_properties({key: "false"})
    assert c.to_properties()[key] == "false"
    assert BrokerConfig.from_properties({key: " TRUE "}).to_properties()[key] == "true"


def test_slave_and_read_only_broker() -> None:
    c = BrokerConfig.from_properties({"brokerId": "1", "brokerPermission": "4"})
    assert not c.is_master and c.broker_permission == 4
    assert BrokerConfig(broker_permission=0).broker_permission == 0


def test_namesrv_addr_splits_on_semicolons() -> None:
    c = BrokerConfig.from_properties({"namesrvAddr": " a:1 ;b:2;; "})
    assert c.namesrv_addrs == ["a:1", "b:2"]
    assert BrokerConfig(namesrv_addr="").namesrv_addrs == []


@pytest.mark.parametrize(("props", "named"), [
    ({"brokerId": "-1"}, "brokerId"),
    ({"brokerPermission": "16"}, "brokerPermission"),
    ({"brokerPermission": "-1"}, "brokerPermission"),
    ({"brokerName": "  "}, "brokerName"),
    ({"brokerClusterName": ""}, "brokerClusterName"),
    ({"defaultTopicQueueNums": "0"}, "defaultTopicQueueNums"),
    ({"channelExpiredTimeout": "-5"}, "channelExpiredTimeout"),
    ({"maxHeldPulls": "x"}, "maxHeldPulls"),
    ({"longPollingEnable": "yes"}, "longPollingEnable"),
    ({"frameMaxLength": "1.5"}, "frameMaxLength"),
    ({"serverChannelMaxIdleTimeSeconds": "-1"}, "serverChannelMaxIdleTimeSeconds"),
    ({"writeBufferLowWaterMark": "-1"}, "writeBufferLowWaterMark"),
    ({"writeBufferHighWaterMark": "0"}, "writeBufferHighWaterMark"),
    ({"writeBufferLowWaterMark": "2048", "writeBufferHighWaterMark": "1024"}, "writeBufferLowWaterMark"),
    ({"maxBufferedFrameBytes": "0"}, "maxBufferedFrameBytes"),
])
def test_bad_values_name_their_key(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        BrokerConfig.from_properties(props)


def test_wrong_python_types_are_refused() -> None:
    with pytest.raises(ConfigError, match="brokerId"):
        BrokerConfig(broker_id=True)
    with pytest.raises(ConfigError, match="autoCreateTopicEnable"):
        BrokerConfig(auto_create_topic_enable=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="brokerName"):
        BrokerConfig(broker_name=None)  # type: ignore[arg-type]


def test_broker_conf_feeds_both_configs(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# RocketMQ's sample broker.conf, plus a few\n"
        "brokerClusterName = DefaultCluster\n"
        "brokerName = broker-b\n"
        "brokerId = 0\n"
        "deleteWhen = 04\n"
        "fileReservedTime = 48\n"
        "brokerRole = ASYNC_MASTER\n"
        "flushDiskType = SYNC_FLUSH\n"
        "autoCreateTopicEnable=false\n"
        "namesrvAddr=127.0.0.1:9876;127.0.0.1:9877\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
        "listenPort=10921\n",
        encoding="utf-8",
    )
    b = BrokerConfig.from_file(conf)
    s = StoreConfig.from_file(conf)
    assert b.broker_name == "broker-b" and not b.auto_create_topic_enable
    assert b.namesrv_addrs == ["127.0.0.1:9876", "127.0.0.1:9877"]
    assert s.sync_flush and s.listen_port == 10921 and s.file_reserved_time == 48
    with pytest.raises(ConfigError, match="cannot read"):
        BrokerConfig.from_file(tmp_path / "missing.conf")


def test_replace_validates() -> None:
    c = BrokerConfig().replace(broker_name="b")
    assert c.broker_name == "b"
    with pytest.raises(ConfigError):
        c.replace(max_held_pulls=0)


_names = st.text(alphabet="abcXYZ-_09", min_size=1, max_size=12)


@given(
    name=_names, cluster=_names, broker_id=st.integers(0, 10), perm=st.integers(0, 15),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    queues=st.integers(1, 1024), period=st.integers(1, 10**9),
)
def test_properties_round_trip(name: str, cluster: str, broker_id: int, perm: int,
                               flags: tuple[bool, bool, bool], queues: int, period: int) -> None:
    c = BrokerConfig(broker_name=name, broker_cluster_name=cluster, broker_id=broker_id,
                     broker_permission=perm, auto_create_topic_enable=flags[0],
                     auto_create_subscription_group=flags[1], long_polling_enable=flags[2],
                     default_topic_queue_nums=queues, register_name_server_period=period)
    assert BrokerConfig.from_properties(c.to_properties()) == c


def test_remoting_limits_come_from_the_netty_keys() -> None:
    limits = BrokerConfig.from_properties({
        "serverChannelMaxIdleTimeSeconds": "0", "writeBufferHighWaterMark": "65536",
        "writeBufferLowWaterMark": "32768", "maxBufferedFrameBytes": "1000000",
        "frameMaxLength": "4194304"}).remoting_limits()
    assert (limits.max_idle_s, limits.write_high, limits.write_low) == (0.0, 65536, 32768)
    assert (limits.buffered_frames_max, limits.max_frame) == (1_000_000, 4 * 1024 * 1024)
    assert limits.read_backpressure
    default = BrokerConfig().remoting_limits()
    assert (default.max_idle_s, default.write_high, default.write_low) == (120.0, 4 << 20, 1 << 20)


def test_metrics_port_is_also_read_under_rocketmq5s_name(tmp_path: Path) -> None:
    """RocketMQ 5's ``metricsPromExporterPort`` sets ``metricsPort``; written back as metricsPort."""
    conf = tmp_path / "broker.conf"
    conf.write_text("metricsPromExporterPort = 15557\n", encoding="utf-8")
    c = BrokerConfig.from_file(conf)
    assert c.metrics_port == 15557
    assert c.to_properties()["metricsPort"] == "15557"
    assert "metricsPromExporterPort" not in c.to_properties()
    assert BrokerConfig.from_properties({"metricsPromExporterPort": "0"}).metrics_port == 0
    same = {"metricsPort": "6000", "metricsPromExporterPort": " 6000 "}
    assert BrokerConfig.from_properties(same).metrics_port == 6000


def test_metrics_port_under_both_names_with_two_values_is_refused() -> None:
    with pytest.raises(ConfigError, match="metricsPort=6000 and metricsPromExporterPort=6001"):
        BrokerConfig.from_properties({"metricsPort": "6000", "metricsPromExporterPort": "6001"})
    with pytest.raises(ConfigError, match="metricsPromExporterPort"):
        BrokerConfig.from_properties({"metricsPromExporterPort": "70000"})
    with pytest.raises(ConfigError, match="metricsPromExporterPort='x'"):
        BrokerConfig.from_properties({"metricsPromExporterPort": "x"})


def test_acl_is_off_by_default_and_takes_a_file() -> None:
    assert BrokerConfig().acl_enable is False and BrokerConfig().acl_file == ""
    c = BrokerConfig.from_properties({"aclEnable": "true", "aclFile": "/etc/rocketlite/acl.yml"})
    assert c.acl_enable and c.acl_file == "/etc/rocketlite/acl.yml"
