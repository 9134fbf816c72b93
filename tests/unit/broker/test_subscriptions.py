"""SubscriptionGroupManager: auto-creation, settings, subscriptionGroup.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketlite.broker.subscriptions import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketlite.common.errors import ConfigError
from rocketlite.protocol import fastjson


def manager(tmp_path: Path, auto_create: bool = True) -> SubscriptionGroupManager:
    return SubscriptionGroupManager(tmp_path / "config" / "subscriptionGroup.json", auto_create)


def test_get_creates_a_group_with_javas_defaults_and_persists_it(tmp_path: Path) -> None:
    m = manager(tmp_path)
    g = m.get("GID_orders")
    assert g is not None and g.groupName == "GID_orders"
    assert g.consumeEnable and g.consumeBroadcastEnable and g.notifyConsumerIdsChangedEnable
    assert (g.retryQueueNums, g.retryMaxTimes, g.brokerId) == (1, 16, 0)
    assert m.get("GID_orders") is g
    assert m.data_version.counter == 1
    on_disk = fastjson.loads(m.path.read_bytes())
    assert on_disk["subscriptionGroupTable"]["GID_orders"]["retryMaxTimes"] == 16


def test_no_auto_creation(tmp_path: Path) -> None:
    m = manager(tmp_path, auto_create=False)
    assert m.get("G") is None and m.table == {}
    m.update(SubscriptionGroupConfig(groupName="G", consumeEnable=False))
    g = m.get("G")
    assert g is not None and not g.consumeEnable


def test_an_empty_group_name_is_never_created(tmp_path: Path) -> None:
    m = manager(tmp_path)
    assert m.get("") is None and m.table == {}


def test_update_delete_and_reload(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.get("A")
    m.update(SubscriptionGroupConfig(groupName="B", consumeMessageOrderly=True, retryMaxTimes=3,
                                     attributes={"k": "v"}))
    m.get("C")
    assert m.delete("C") and not m.delete("C")
    again = manager(tmp_path, auto_create=False)
    again.load()
    assert set(again.table) == {"A", "B"}
    assert again.table["B"] == m.table["B"]
    assert again.data_version.counter == m.data_version.counter


JAVA_SUBSCRIPTION_GROUP_JSON = b"""{
\t"dataVersion":{
\t\t"counter":3,
\t\t"stateVersion":0,
\t\t"timestamp":1718000000000
\t},
\t"forbiddenTable":{},
\t"subscriptionGroupTable":{
\t\t"please_rename_unique_group_name_4":{
\t\t\t"attributes":{},
\t\t\t"brokerId":0,
\t\t\t"consumeBroadcastEnable":true,
\t\t\t"consumeEnable":false,
\t\t\t"consumeFromMinEnable":true,
\t\t\t"consumeMessageOrderly":false,
\t\t\t"consumeTimeoutMinute":15,
\t\t\t"groupName":"please_rename_unique_group_name_4",
\t\t\t"groupRetryPolicy":{
\t\t\t\t"type":"CUSTOMIZED"
\t\t\t},
\t\t\t"groupSysFlag":0,
\t\t\t"notifyConsumerIdsChangedEnable":true,
\t\t\t"retryMaxTimes":5,
\t\t\t"retryQueueNums":1,
\t\t\t"subscriptionDataSet":[],
\t\t\t"whichBrokerWhenConsumeSlowly":1
\t\t}
\t}
}"""


def test_reads_a_java_written_file(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(JAVA_SUBSCRIPTION_GROUP_JSON)
    m.load()
    g = m.table["please_rename_unique_group_name_4"]
    assert not g.consumeEnable and g.retryMaxTimes == 5
    assert m.data_version.counter == 3


def test_corrupt_file_and_backup_is_a_config_error(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.get("A")
    m.get("B")
    m.path.write_bytes(b"{")
    again = manager(tmp_path)
    again.load()  # from the backup, which holds A
    assert set(again.table) == {"A"}
    m.path.with_name("subscriptionGroup.json.bak").write_bytes(b"}")
    with pytest.raises(ConfigError, match=r"subscriptionGroup\.json"):
        manager(tmp_path).load()


def test_wrong_shape_is_a_config_error(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(b'{"subscriptionGroupTable":{"G":{"retryMaxTimes":1}}}')  # no groupName
    with pytest.raises(ConfigError, match="groupName"):
        m.load()
