"""TopicConfigManager: built-in topics, auto-creation from TBW102, validation, topics.json."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.broker.config import PERM_INHERIT, PERM_READ, PERM_WRITE, BrokerConfig
from rocketlite.broker.topics import (
    AUTO_CREATE_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TopicConfigManager,
    TopicError,
    is_system_topic,
    perm_to_string,
    validate_topic,
)
from rocketlite.common.errors import ConfigError
from rocketlite.protocol import fastjson
from rocketlite.protocol.bodies import TopicConfig, TopicFilterType

RW = PERM_READ | PERM_WRITE


def manager(tmp_path: Path, **cfg: object) -> TopicConfigManager:
    return TopicConfigManager(BrokerConfig(**cfg), tmp_path / "config" / "topics.json")  # type: ignore[arg-type]


def test_builtin_topics(tmp_path: Path) -> None:
    m = manager(tmp_path, broker_name="bk", broker_cluster_name="Cl", default_topic_queue_nums=6)
    assert set(m.table) == {SELF_TEST_TOPIC, AUTO_CREATE_TOPIC, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC,
                            "bk", "Cl"}
    tbw = m.get(AUTO_CREATE_TOPIC)
    assert tbw is not None and (tbw.readQueueNums, tbw.writeQueueNums) == (6, 6)
    assert tbw.perm == RW | PERM_INHERIT
    sched = m.get(SCHEDULE_TOPIC)
    assert sched is not None and sched.writeQueueNums == 18
    cluster = m.get("Cl")
    assert cluster is not None and cluster.writeQueueNums == 16 and cluster.perm & PERM_INHERIT
    assert len(m) == 6
    for t in (AUTO_CREATE_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC, "bk", "Cl",
              "rmq_sys_TRACE"):
        assert is_system_topic(t, m.config), t
    assert not is_system_topic("TopicTest", m.config)


def test_trace_topic_with_trace_topic_enable(tmp_path: Path) -> None:
    assert manager(tmp_path).get("RMQ_SYS_TRACE_TOPIC") is None  # off by default, as Java
    m = manager(tmp_path, trace_topic_enable=True)
    tc = m.get("RMQ_SYS_TRACE_TOPIC")
    assert tc is not None and (tc.readQueueNums, tc.writeQueueNums, tc.perm) == (1, 1, RW)
    assert is_system_topic("RMQ_SYS_TRACE_TOPIC", m.config)  # Java adds it to the system topics
    assert not is_system_topic("RMQ_SYS_TRACE_TOPIC", manager(tmp_path).config)
    named = manager(tmp_path, trace_topic_enable=True, msg_trace_topic_name="MyTrace")
    assert named.get("MyTrace") is not None and named.get("RMQ_SYS_TRACE_TOPIC") is None


def test_no_tbw102_without_auto_create(tmp_path: Path) -> None:
    m = manager(tmp_path, auto_create_topic_enable=False)
    assert m.get(AUTO_CREATE_TOPIC) is None
    assert m.create_in_send("NewTopic", AUTO_CREATE_TOPIC, 4) is None
    assert m.get("NewTopic") is None


@pytest.mark.parametrize(("asked", "default_queues", "expected"), [
    (4, 8, 4), (16, 8, 8), (8, 8, 8), (0, 8, 1), (-3, 8, 1),
])
def test_create_in_send_takes_the_smaller_queue_count(
    tmp_path: Path, asked: int, default_queues: int, expected: int
) -> None:
    m = manager(tmp_path, default_topic_queue_nums=default_queues)
    changed: list[str] = []
    m.on_change.append(lambda tc: changed.append(tc.topicName))
    tc = m.create_in_send("OrderTopic", AUTO_CREATE_TOPIC, asked)
    assert tc is not None
    assert (tc.readQueueNums, tc.writeQueueNums) == (expected, expected)
    assert tc.perm == RW  # inherited without INHERIT
    assert m.get("OrderTopic") is tc and changed == ["OrderTopic"]
    # the second send finds it: no change, same config
    assert m.create_in_send("OrderTopic", AUTO_CREATE_TOPIC, 99) is tc and changed == ["OrderTopic"]
    assert (m.path).exists()


def test_create_in_send_from_another_inheritable_topic(tmp_path: Path) -> None:
    m = manager(tmp_path, auto_create_topic_enable=False)
    m.update(TopicConfig(topicName="Parent", readQueueNums=2, writeQueueNums=3,
                         perm=PERM_READ | PERM_INHERIT))
    m.update(TopicConfig(topicName="Plain", readQueueNums=2, writeQueueNums=2))
    tc = m.create_in_send("Child", "Parent", 8, topic_sys_flag=1)
    assert tc is not None and tc.writeQueueNums == 3 and tc.perm == PERM_READ
    assert tc.topicSysFlag == 1
    assert m.create_in_send("Orphan", "Plain", 8) is None  # no INHERIT bit
    assert m.create_in_send("Orphan", "Missing", 8) is None
    assert m.get("Orphan") is None


def test_tbw102_loaded_from_a_file_does_not_create_when_disabled(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.persist()  # holds TBW102 with INHERIT
    off = manager(tmp_path, auto_create_topic_enable=False)
    off.load()
    assert off.get(AUTO_CREATE_TOPIC) is not None
    assert off.create_in_send("NewTopic", AUTO_CREATE_TOPIC, 4) is None


@pytest.mark.parametrize("bad", ["", "  ", "a b", "topic/x", "t@g", "中文", "x" * 128, "a\x00"])
def test_invalid_topic_names(tmp_path: Path, bad: str) -> None:
    with pytest.raises(TopicError):
        validate_topic(bad)
    m = manager(tmp_path)
    with pytest.raises(TopicError):
        m.create_in_send(bad, AUTO_CREATE_TOPIC, 4)
    with pytest.raises(TopicError):
        m.update(TopicConfig(topicName=bad))
    assert bad not in m.table


@given(st.text(max_size=140))
def test_validate_topic_is_javas_regex(name: str) -> None:
    ok = re.fullmatch(r"[%|a-zA-Z0-9_-]{1,127}", name, re.ASCII) is not None
    try:
        validate_topic(name)
    except TopicError:
        assert not ok
    else:
        assert ok


@pytest.mark.parametrize("tc", [
    TopicConfig(topicName="T", readQueueNums=0, writeQueueNums=4),
    TopicConfig(topicName="T", readQueueNums=4, writeQueueNums=1025),
    TopicConfig(topicName="T", perm=16),
    TopicConfig(topicName="T", perm=-1),
])
def test_update_refuses_bad_settings(tmp_path: Path, tc: TopicConfig) -> None:
    m = manager(tmp_path)
    with pytest.raises(TopicError):
        m.update(tc)
    assert m.get("T") is None


def test_update_and_delete_bump_the_data_version(tmp_path: Path) -> None:
    m = manager(tmp_path)
    v0 = m.data_version.counter
    m.update(TopicConfig(topicName="T", readQueueNums=2, writeQueueNums=2))
    assert m.data_version.counter == v0 + 1
    assert m.delete("T") and m.get("T") is None
    assert m.data_version.counter == v0 + 2
    assert not m.delete("T") and m.data_version.counter == v0 + 2
    assert m.wrapper().dataVersion.counter == v0 + 2


def test_create_plain_keeps_an_existing_topic(tmp_path: Path) -> None:
    m = manager(tmp_path)
    a = m.create_plain("%RETRY%G", 1)
    assert (a.readQueueNums, a.perm) == (1, RW)
    assert m.create_plain("%RETRY%G", 5) is a


def test_a_failing_listener_does_not_stop_the_change(tmp_path: Path) -> None:
    m = manager(tmp_path)
    seen: list[str] = []

    def broken(tc: TopicConfig) -> None:
        raise RuntimeError("listener broke")

    m.on_change.extend([broken, lambda tc: seen.append(tc.topicName)])
    m.update(TopicConfig(topicName="T"))
    assert seen == ["T"] and m.get("T") is not None


def test_persist_and_reload_round_trip(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.update(TopicConfig(topicName="Orders", readQueueNums=3, writeQueueNums=5, perm=PERM_READ,
                         topicFilterType=TopicFilterType.MULTI_TAG, topicSysFlag=2, order=True,
                         attributes={"+message.type": "FIFO"}))
    m.create_in_send("Auto", AUTO_CREATE_TOPIC, 2)
    again = manager(tmp_path)
    again.load()
    assert again.table == m.table
    assert again.data_version.counter == m.data_version.counter
    # a deleted built-in comes back (Java's constructor adds them before loading)
    m.delete(SELF_TEST_TOPIC)
    fresh = manager(tmp_path)
    fresh.load()
    assert fresh.get(SELF_TEST_TOPIC) is not None and fresh.get("Orders") is not None


def test_reload_uses_the_backup_when_the_file_is_corrupt(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.update(TopicConfig(topicName="A"))
    m.update(TopicConfig(topicName="B"))  # the .bak now holds A
    m.path.write_bytes(b'{"topicConfigTable":{"B":')
    again = manager(tmp_path)
    again.load()
    assert again.get("A") is not None and again.get("B") is None
    m.path.with_name("topics.json.bak").write_bytes(b"garbage")
    with pytest.raises(ConfigError, match=r"topics\.json"):
        manager(tmp_path).load()


def test_a_file_of_the_wrong_shape_is_a_config_error(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(b'{"topicConfigTable":{"T":{"readQueueNums":"many"}}}')
    with pytest.raises(ConfigError, match=r"topics\.json"):
        m.load()


JAVA_TOPICS_JSON = """{
\t"dataVersion":{
\t\t"counter":7,
\t\t"stateVersion":0,
\t\t"timestamp":1718000000000
\t},
\t"topicConfigTable":{
\t\t"TopicTest":{
\t\t\t"attributes":{},
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":4,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TopicTest",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":4
\t\t},
\t\t"%RETRY%please_rename_unique_group_name_4":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":1,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"%RETRY%please_rename_unique_group_name_4",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":1
\t\t},
\t\t"TBW102":{
\t\t\t"order":false,
\t\t\t"perm":7,
\t\t\t"readQueueNums":8,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TBW102",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":8
\t\t}
\t},
\t"topicQueueMappingInfoMap":{}
}"""


def test_reads_a_java_written_topics_json(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_text(JAVA_TOPICS_JSON, encoding="utf-8")
    m.load()
    t = m.get("TopicTest")
    assert t is not None and (t.readQueueNums, t.writeQueueNums, t.perm) == (4, 4, 6)
    retry = m.get("%RETRY%please_rename_unique_group_name_4")
    assert retry is not None and retry.writeQueueNums == 1
    assert m.data_version.counter == 7
    assert m.get(SCHEDULE_TOPIC) is not None  # builtins kept
    # and writes a file a Java broker reads: standard JSON with the same shape
    m.persist()
    written = fastjson.loads(m.path.read_bytes())
    assert written["topicConfigTable"]["TopicTest"]["topicFilterType"] == "SINGLE_TAG"
    assert written["topicConfigTable"]["TopicTest"]["perm"] == 6
    assert written["dataVersion"]["counter"] == 7


def test_an_entry_whose_key_differs_from_its_name_uses_the_key(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.path.parent.mkdir(parents=True)
    m.path.write_bytes(b'{"topicConfigTable":{"K":{"topicName":"N","perm":4}}}')
    m.load()
    tc = m.get("K")
    assert tc is not None and tc.topicName == "K" and m.get("N") is None


@pytest.mark.parametrize(("perm", "text"), [(0, "---"), (6, "RW-"), (7, "RWX"), (4, "R--"),
                                            (3, "-WX")])
def test_perm_to_string(perm: int, text: str) -> None:
    assert perm_to_string(perm) == text


def test_adopt_queues_creates_only_missing_user_topics(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.create_plain("Known", 8)
    created = m.adopt_queues([("Young", 0), ("Young", 2), ("Known", 9), ("%RETRY%G", 0),
                              ("rmq_sys_wheel_timer", 0), ("SCHEDULE_TOPIC_XXXX", 3)])
    assert created == ["%RETRY%G", "Young"]
    young = m.get("Young")
    assert young is not None and (young.readQueueNums, young.writeQueueNums) == (3, 3)
    assert young.perm == PERM_READ | PERM_WRITE
    known = m.get("Known")
    assert known is not None and known.readQueueNums == 8  # an existing config is kept
    assert m.get("rmq_sys_wheel_timer") is None and m.adopt_queues([("Young", 5)]) == []
