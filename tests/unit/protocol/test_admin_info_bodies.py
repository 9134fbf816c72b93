"""GET_TOPIC_CONFIG's (351) and GET_CONSUMER_RUNNING_INFO's (307) headers and bodies: any value
survives a round trip, and what a Java broker or client writes (fastjson's member order, fields
rocketlite does not keep) is read."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.protocol.admin_bodies import TopicConfigAndQueueMapping
from rocketlite.protocol.admin_headers import GetTopicConfigRequestHeader
from rocketlite.protocol.bodies import TopicFilterType

names = st.text(alphabet="abcXYZ019_-%|", min_size=1, max_size=40)
int32 = st.integers(-(2**31), 2**31 - 1)
attrs = st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=3)


@st.composite
def topic_configs(draw: st.DrawFn) -> TopicConfigAndQueueMapping:
    return TopicConfigAndQueueMapping(
        topicName=draw(names), readQueueNums=draw(int32), writeQueueNums=draw(int32),
        perm=draw(st.integers(0, 15)), topicFilterType=draw(st.sampled_from(TopicFilterType)),
        topicSysFlag=draw(int32), order=draw(st.booleans()), attributes=draw(attrs))


@given(topic_configs())
def test_topic_config_round_trip(tc: TopicConfigAndQueueMapping) -> None:
    assert TopicConfigAndQueueMapping.from_json(tc.to_json()) == tc


@given(names, st.sampled_from([None, True, False]))
def test_get_topic_config_header_round_trip(topic: str, lo: bool | None) -> None:
    h = GetTopicConfigRequestHeader(topic=topic, lo=lo)
    assert GetTopicConfigRequestHeader.from_ext(h.to_ext()) == h


def test_topic_config_as_a_java_broker_answers_it() -> None:
    # a static topic's mappingDetail (rocketlite has none) is skipped, the rest read
    data = (b'{"attributes":{"+message.type":"FIFO"},"mappingDetail":{"bname":"b","epoch":1,'
            b'"hostedQueues":{0:[{"bname":"b","logicOffset":0}]}},"order":true,"perm":4,'
            b'"readQueueNums":2,"topicFilterType":"MULTI_TAG","topicName":"T","topicSysFlag":0,'
            b'"writeQueueNums":3}')
    tc = TopicConfigAndQueueMapping.from_json(data)
    assert tc == TopicConfigAndQueueMapping(
        topicName="T", readQueueNums=2, writeQueueNums=3, perm=4,
        topicFilterType=TopicFilterType.MULTI_TAG, order=True,
        attributes={"+message.type": "FIFO"})
    assert b"mappingDetail" not in tc.to_json()  # null: fastjson leaves it out
