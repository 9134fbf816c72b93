"""StoreConfig: RocketMQ key names, .properties parsing, typed values, validation, round trips."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.common.errors import ConfigError
from rocketlite.store.config import KEY_TO_FIELD, StoreConfig, load_properties

SAMPLE_BROKER_CONF = """\
# Licensed to the Apache Software Foundation (ASF) under one or more
# contributor license agreements.
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
deleteWhen = 04;16
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = SYNC_FLUSH
namesrvAddr=127.0.0.1:9876
! a bang comment
storePathRootDir=/data/rocketmq/store
storePathCommitLog=/data/rocketmq/store/commitlog
mappedFileSizeCommitLog=1073741824
mappedFileSizeConsumeQueue=300000
diskMaxUsedSpaceRatio=88
maxMessageSize=65536
autoCreateTopicEnable=true
brokerIP1 = 10.0.0.5
listenPort=10921
messageIndexEnable=false
warmMapedFileEnable=FALSE
transientStorePoolEnable=True
"""


def test_defaults_match_rocketmq() -> None:
    c = StoreConfig()
    assert c.store_path_root_dir == Path.home() / "store"
    assert c.mapped_file_size_commit_log == 1 << 30
    assert c.mapped_file_size_consume_queue == 6_000_000
    assert c.flush_disk_type == "ASYNC_FLUSH" and not c.sync_flush
    assert (c.flush_interval_commit_log, c.commit_interval_commit_log) == (500, 200)
    assert (c.flush_interval_consume_queue, c.sync_flush_timeout) == (1000, 5000)
    assert (c.transient_store_pool_enable, c.warm_mapped_file_enable) == (False, False)
    assert (c.file_reserved_time, c.delete_when) == (72, "04")
    assert (c.disk_max_used_space_ratio, c.disk_space_clean_forcibly_ratio,
            c.disk_space_warning_level_ratio) == (75, 85, 90)
    assert (c.clean_resource_interval, c.destroy_mapped_file_interval_forcibly) == (10_000, 120_000)
    assert c.delete_file_batch_max == 10 and c.message_index_enable
    assert (c.max_hash_slot_num, c.max_index_num, c.max_message_size) == (5_000_000, 20_000_000, 4 << 20)
    assert (c.broker_ip1, c.listen_port) == ("127.0.0.1", 10911)
    assert (c.broker_role, c.ha_listen_port, c.ha_port, c.ha_master_address) == (
        "ASYNC_MASTER", -1, 10912, "")
    assert (c.ha_send_heartbeat_interval, c.ha_housekeeping_interval,
            c.ha_transfer_batch_size) == (5000, 20_000, 32768)


def test_every_field_has_its_rocketmq_key() -> None:
    assert len(KEY_TO_FIELD) == len(dataclasses.fields(StoreConfig)) == 34
    assert KEY_TO_FIELD["brokerRole"] == "broker_role"
    assert KEY_TO_FIELD["haMaxGapNotInSync"] == "ha_max_gap_not_in_sync"
    assert KEY_TO_FIELD["haMasterAddress"] == "ha_master_address"
    assert KEY_TO_FIELD["messageDelayLevel"] == "message_delay_level"
    assert KEY_TO_FIELD["flushDelayOffsetInterval"] == "flush_delay_offset_interval"
    assert KEY_TO_FIELD["warmMapedFileEnable"] == "warm_mapped_file_enable"
    assert KEY_TO_FIELD["destroyMapedFileIntervalForcibly"] == "destroy_mapped_file_interval_forcibly"
    assert KEY_TO_FIELD["brokerIP1"] == "broker_ip1"
    assert KEY_TO_FIELD["cleanFileForciblyEnable"] == "clean_file_forcibly_enable"


def test_derived_paths(tmp_path: Path) -> None:
    c = StoreConfig(store_path_root_dir=tmp_path, flush_disk_type="SYNC_FLUSH")
    assert c.sync_flush
    assert c.commit_log_dir == tmp_path / "commitlog"
    assert c.consume_queue_dir == tmp_path / "consumequeue"
    assert c.index_dir == tmp_path / "index"
    assert c.config_dir == tmp_path / "config"
    assert c.checkpoint_path == tmp_path / "checkpoint"
    assert c.abort_path == tmp_path / "abort"
    assert c.lock_path == tmp_path / "lock"


def test_config_is_frozen() -> None:
    c = StoreConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.listen_port = 1  # type: ignore[misc]
    assert c.replace(listen_port=1).listen_port == 1


# -- .properties -------------------------------------------------------------------------------


def test_separators_comments_and_blank_lines() -> None:
    text = "a=1\nb: 2\nc   3\n\n   # comment = x\n! bang: y\n\td\t=\t4\ne\n  f = =5\ng==6\n"
    assert load_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "", "f": "=5",
                                     "g": "=6"}


def test_line_continuation() -> None:
    text = "fruits = apple, banana, \\\n         pear\nnext=1\n"
    assert load_properties(text) == {"fruits": "apple, banana, pear", "next": "1"}
    # An even number of trailing backslashes is an escaped backslash, not a continuation.
    assert load_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}
    # A continued line beginning with '#' is not a comment; a comment line is never continued.
    assert load_properties("a=1\\\n  #2\n# c \\\nb=3") == {"a": "1#2", "b": "3"}
    # A continuation at the end of the text ends the entry.
    assert load_properties("a=1\\") == {"a": "1"}


def test_escapes_and_line_endings() -> None:
    text = "tab=a\\tb\r\nnl=a\\nb\rback=a\\\\b\nkey\\=with\\:seps\\ space=v\\=x\\:y\nu=\\u0041\\u00e9\n"
    assert load_properties(text) == {
        "tab": "a\tb", "nl": "a\nb", "back": "a\\b", "key=with:seps space": "v=x:y", "u": "Aé",
    }
    with pytest.raises(ConfigError, match="uxxxx"):
        load_properties("bad=\\u12")


def test_leading_whitespace_trimmed_trailing_kept_later_key_wins() -> None:
    assert load_properties("   a = 1  \na=2") == {"a": "2"}
    assert load_properties("   a = 1  ") == {"a": "1  "}


def test_full_broker_conf_with_unknown_keys(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(SAMPLE_BROKER_CONF, encoding="utf-8")
    c = StoreConfig.from_file(conf)
    assert c.store_path_root_dir == Path("/data/rocketmq/store")
    assert c.delete_when == "04;16" and c.file_reserved_time == 48
    assert c.sync_flush and c.flush_disk_type == "SYNC_FLUSH"
    assert c.mapped_file_size_consume_queue == 300_000
    assert (c.disk_max_used_space_ratio, c.max_message_size) == (88, 65536)
    assert (c.broker_ip1, c.listen_port) == ("10.0.0.5", 10921)
    assert c.message_index_enable is False
    assert c.warm_mapped_file_enable is False and c.transient_store_pool_enable is True
    # keys it did not name keep their defaults
    assert c.flush_interval_commit_log == 500


def test_from_file_missing_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.conf"):
        StoreConfig.from_file(tmp_path / "nope.conf")


# -- typed parsing and validation ----------------------------------------------------------------


def test_values_are_typed_and_stripped(tmp_path: Path) -> None:
    c = StoreConfig.from_properties({
        "storePathRootDir": f"  {tmp_path}  ", "listenPort": " +10912 ", "messageIndexEnable": "TRUE",
        "brokerIP1": " 192.168.0.1 ", "syncFlushTimeout": "7000",
    })
    assert c.store_path_root_dir == tmp_path and isinstance(c.store_path_root_dir, Path)
    assert c.listen_port == 10912 and c.message_index_enable is True
    assert c.broker_ip1 == "192.168.0.1" and c.sync_flush_timeout == 7000
    assert StoreConfig.from_properties({"storePathRootDir": "~/x"}).store_path_root_dir == Path.home() / "x"


@pytest.mark.parametrize(("key", "value"), [
    ("listenPort", "abc"),
    ("listenPort", "10_911"),
    ("listenPort", "1.5"),
    ("listenPort", ""),
    ("maxMessageSize", "99999999999999999999999"),
    ("messageIndexEnable", "yes"),
    ("messageIndexEnable", "1"),
    ("warmMapedFileEnable", ""),
    ("storePathRootDir", "   "),
])
def test_bad_values_name_key_and_value(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_properties({key: value})
    assert key in str(info.value)
    assert repr(value.strip()) in str(info.value)


@pytest.mark.parametrize(("props", "message"), [
    ({"flushDiskType": "SOMETIMES"}, "flushDiskType='SOMETIMES': must be SYNC_FLUSH or ASYNC_FLUSH"),
    ({"flushDiskType": "sync_flush"}, "flushDiskType"),
    ({"mappedFileSizeCommitLog": "4095"}, "mappedFileSizeCommitLog=4095: must be at least 4096"),
    ({"mappedFileSizeConsumeQueue": "1010"}, "mappedFileSizeConsumeQueue=1010: must be a multiple of 20"),
    ({"mappedFileSizeConsumeQueue": "0"}, "mappedFileSizeConsumeQueue=0"),
    ({"diskMaxUsedSpaceRatio": "9"}, "diskMaxUsedSpaceRatio=9: must be within 10..95"),
    ({"diskSpaceCleanForciblyRatio": "96"}, "diskSpaceCleanForciblyRatio=96"),
    ({"diskSpaceWarningLevelRatio": "100"}, "diskSpaceWarningLevelRatio=100"),
    ({"deleteWhen": "4"}, "deleteWhen='4'"),
    ({"deleteWhen": "04;"}, "deleteWhen"),
    ({"deleteWhen": "04,16"}, "deleteWhen"),
    ({"deleteWhen": "24"}, "deleteWhen"),
    ({"deleteFileBatchMax": "0"}, "deleteFileBatchMax=0: must be at least 1"),
    ({"flushIntervalCommitLog": "-1"}, "flushIntervalCommitLog"),
    ({"listenPort": "70000"}, "listenPort=70000: must be within 0..65535"),
    ({"brokerIP1": ""}, "brokerIP1"),
])
def test_validation_messages(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        StoreConfig.from_properties(props)


def test_valid_edges() -> None:
    c = StoreConfig.from_properties({
        "mappedFileSizeCommitLog": "4096", "mappedFileSizeConsumeQueue": "20",
        "diskMaxUsedSpaceRatio": "10", "diskSpaceWarningLevelRatio": "95",
        "deleteWhen": "00;04;23", "fileReservedTime": "0",
    })
    assert c.delete_when == "00;04;23" and c.mapped_file_size_consume_queue == 20


def test_constructor_validates_types() -> None:
    with pytest.raises(ConfigError, match="listenPort='1'"):
        StoreConfig(listen_port="1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="messageIndexEnable=1"):
        StoreConfig(message_index_enable=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="listenPort=True"):
        StoreConfig(listen_port=True)
    with pytest.raises(ConfigError, match="flushDiskType"):
        StoreConfig().replace(flush_disk_type="NEVER")
    assert StoreConfig(store_path_root_dir="/tmp/s").store_path_root_dir == Path("/tmp/s")  # type: ignore[arg-type]


# -- round trips -------------------------------------------------------------------------------


def test_round_trip_defaults_and_custom(tmp_path: Path) -> None:
    for c in (StoreConfig(), StoreConfig(store_path_root_dir=tmp_path / "s", flush_disk_type="SYNC_FLUSH",
                                         delete_when="01;13", message_index_enable=False,
                                         warm_mapped_file_enable=True, listen_port=0)):
        props = c.to_properties()
        assert set(props) == set(KEY_TO_FIELD)
        assert StoreConfig.from_properties(props) == c
        text = "".join(f"{k}={v}\n" for k, v in props.items())
        assert StoreConfig.from_properties(load_properties(text)) == c
    assert StoreConfig().to_properties()["warmMapedFileEnable"] == "false"
    assert StoreConfig().to_properties()["transientStorePoolEnable"] == "false"


@given(
    commit=st.integers(4096, 1 << 31),
    units=st.integers(1, 1_000_000),
    ratio=st.integers(10, 95),
    hours=st.lists(st.integers(0, 23), min_size=1, max_size=4),
    flag=st.booleans(),
    sync=st.booleans(),
    port=st.integers(0, 65535),
)
def test_round_trip_property(commit: int, units: int, ratio: int, hours: list[int], flag: bool,
                             sync: bool, port: int) -> None:
    c = StoreConfig(
        store_path_root_dir=Path("/var/rl store"), mapped_file_size_commit_log=commit,
        mapped_file_size_consume_queue=units * 20, disk_max_used_space_ratio=ratio,
        delete_when=";".join(f"{h:02d}" for h in hours), message_index_enable=flag,
        flush_disk_type="SYNC_FLUSH" if sync else "ASYNC_FLUSH", listen_port=port,
    )
    assert StoreConfig.from_properties(c.to_properties()) == c


def test_message_delay_level() -> None:
    from rocketlite.common.errors import ConfigError

    c = StoreConfig.from_properties({"messageDelayLevel": "1s 2m"})
    assert c.delay_levels_ms == (1000, 120_000)
    assert len(StoreConfig().delay_levels_ms) == 18
    with pytest.raises(ConfigError, match="messageDelayLevel"):
        StoreConfig.from_properties({"messageDelayLevel": "1s 2x"})
    assert StoreConfig().flush_delay_offset_interval == 10_000  # Java's flushDelayOffsetInterval
    with pytest.raises(ConfigError, match="flushDelayOffsetInterval=0"):
        StoreConfig.from_properties({"flushDelayOffsetInterval": "0"})


def test_ha_keys() -> None:
    c = StoreConfig.from_properties({"brokerRole": "SLAVE", "haMasterAddress": "10.0.0.1:10912",
                                     "listenPort": "20911", "haTransferBatchSize": "65536"})
    assert c.is_slave and c.ha_port == 20912 and c.ha_transfer_batch_size == 65536
    assert StoreConfig.from_properties({"listenPort": "0"}).ha_port == 0
    assert StoreConfig.from_properties({"haListenPort": "3000"}).ha_port == 3000
    assert not StoreConfig.from_properties({"brokerRole": "SYNC_MASTER"}).is_slave
    for props, message in (({"brokerRole": "slave"}, "brokerRole='slave'"),
                           ({"haMasterAddress": "nohost"}, "expected host:port"),
                           ({"haListenPort": "-2"}, "haListenPort=-2"),
                           ({"haTransferBatchSize": "0"}, "haTransferBatchSize=0")):
        with pytest.raises(ConfigError, match=message):
            StoreConfig.from_properties(props)
