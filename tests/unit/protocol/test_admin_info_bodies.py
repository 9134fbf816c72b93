"""GET_TOPIC_CONFIG's (351) and GET_CONSUMER_RUNNING_INFO's (307) headers and bodies: any value
survives a round trip, and what a Java broker or client writes (fastjson's member order, fields
rocketlite does not keep) is read."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.protocol.admin_bodies import TopicConfigAndQueueMapping
from rocketlite.protocol.admin_headers import (
    GetConsumerRunningInfoRequestHeader,
    GetTopicConfigRequestHeader,
)
from rocketlite.protocol.bodies import MessageQueue, SubscriptionData, TopicFilterType
from rocketlite.protocol.running_info import (
    PROP_CONSUME_ORDERLY,
    ConsumerRunningInfo,
    ConsumeStatus,
    PopProcessQueueInfo,
    ProcessQueueInfo,
)

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


int64 = st.integers(-(2**63), 2**63 - 1)
doubles = st.floats(allow_nan=False, allow_infinity=False, width=64)
mqs = st.builds(MessageQueue, topic=names, brokerName=names, queueId=st.integers(0, 2**31 - 1))


@st.composite
def running_infos(draw: st.DrawFn) -> ConsumerRunningInfo:
    pq = st.builds(
        ProcessQueueInfo, commitOffset=int64, cachedMsgMinOffset=int64, cachedMsgMaxOffset=int64,
        cachedMsgCount=int32, cachedMsgSizeInMiB=int32, transactionMsgMinOffset=int64,
        transactionMsgMaxOffset=int64, transactionMsgCount=int32, locked=st.booleans(),
        tryUnlockTimes=int64, lastLockTimestamp=int64, droped=st.booleans(),
        lastPullTimestamp=int64, lastConsumeTimestamp=int64)
    status = st.builds(ConsumeStatus, pullRT=doubles, pullTPS=doubles, consumeRT=doubles,
                       consumeOKTPS=doubles, consumeFailedTPS=doubles, consumeFailedMsgs=int64)
    subs = st.builds(SubscriptionData.from_expression, names,
                     st.sampled_from(["*", "a || b", "TagA"]))
    return ConsumerRunningInfo(
        properties=draw(st.dictionaries(names, st.text(max_size=20), max_size=4)),
        subscriptionSet=draw(st.lists(subs, max_size=3)),
        mqTable=draw(st.dictionaries(mqs, pq, max_size=4)),
        mqPopTable=draw(st.dictionaries(mqs, st.builds(
            PopProcessQueueInfo, waitAckCount=int32, droped=st.booleans(),
            lastPopTimestamp=int64), max_size=2)),
        statusTable=draw(st.dictionaries(names, status, max_size=3)),
        userConsumerInfo=draw(st.dictionaries(names, names, max_size=2)),
        jstack=draw(st.none() | st.text(max_size=50)))


@given(running_infos())
def test_running_info_round_trip(info: ConsumerRunningInfo) -> None:
    assert ConsumerRunningInfo.from_json(info.to_json()) == info


@given(names, names, st.booleans())
def test_running_info_header_round_trip(group: str, client: str, jstack: bool) -> None:
    h = GetConsumerRunningInfoRequestHeader(consumerGroup=group, clientId=client, jstackEnable=jstack)
    assert GetConsumerRunningInfoRequestHeader.from_ext(h.to_ext()) == h
    assert GetConsumerRunningInfoRequestHeader.from_ext(
        {"consumerGroup": group, "clientId": client}).jstackEnable is False


def test_running_info_as_a_java_client_answers_it() -> None:
    # fastjson's member order, a MessageQueue object key, doubles, a jstack string
    data = (b'{"jstack":"\\"main\\" RUNNABLE","mqPopTable":{},"mqTable":{{"brokerName":"b",'
            b'"queueId":1,"topic":"T"}:{"cachedMsgCount":2,"cachedMsgMaxOffset":9,'
            b'"cachedMsgMinOffset":8,"cachedMsgSizeInMiB":0,"commitOffset":8,"droped":false,'
            b'"lastConsumeTimestamp":1700000000000,"lastLockTimestamp":1700000000000,'
            b'"lastPullTimestamp":1700000000001,"locked":false,"transactionMsgCount":0,'
            b'"transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,"tryUnlockTimes":0}},'
            b'"properties":{"PROP_CONSUMEORDERLY":"false","consumerGroup":"G"},'
            b'"statusTable":{"T":{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,'
            b'"consumeOKTPS":1.5,"consumeRT":2.0,"pullRT":1.0,"pullTPS":3.25}},'
            b'"subscriptionSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG",'
            b'"subString":"*","subVersion":1700000000000,"tagsSet":[],"topic":"T"}],'
            b'"userConsumerInfo":{}}')
    info = ConsumerRunningInfo.from_json(data)
    mq = MessageQueue(topic="T", brokerName="b", queueId=1)
    assert info.mqTable[mq].cachedMsgCount == 2 and info.mqTable[mq].commitOffset == 8
    assert info.statusTable["T"] == ConsumeStatus(pullRT=1.0, pullTPS=3.25, consumeRT=2.0,
                                                  consumeOKTPS=1.5)
    assert info.properties[PROP_CONSUME_ORDERLY] == "false"
    assert [s.topic for s in info.subscriptionSet] == ["T"] and info.jstack == '"main" RUNNABLE'
    assert ConsumerRunningInfo.from_json(info.to_json()) == info
