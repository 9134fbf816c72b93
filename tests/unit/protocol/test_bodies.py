"""JSON bodies: PROTOCOL.md's examples, round trips in both JSON forms, the compressed
RegisterBrokerBody layout, and BodyError for every malformed input."""

from __future__ import annotations

import contextlib
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.common.errors import BodyError
from rocketlite.protocol import bodies as b
from rocketlite.protocol import fastjson
from rocketlite.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    DataVersion,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    ProducerData,
    QueueData,
    RegisterBrokerBody,
    SubscriptionData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    TopicList,
    TopicRouteData,
    UnlockBatchRequestBody,
)

# ---------------------------------------------------------------------------- PROTOCOL.md, verbatim

# 2.3 TopicRouteData, as printed (legacy form: bare integer key)
ROUTE_LEGACY = b"""{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],
 "filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"""  # noqa: E501
ROUTE_STANDARD = ROUTE_LEGACY.replace(b'{0:"', b'{"0":"')

ROUTE = TopicRouteData(
    queueDatas=[QueueData(brokerName="broker-a", readQueueNums=4, writeQueueNums=4, perm=6, topicSysFlag=0)],
    brokerDatas=[
        BrokerData(
            brokerName="broker-a",
            cluster="DefaultCluster",
            brokerAddrs={0: "127.0.0.1:10911"},
            enableActingMaster=False,
        )
    ],
    filterServerTable={},
)


def test_route_data_both_forms() -> None:
    assert TopicRouteData.from_json(ROUTE_LEGACY) == ROUTE
    assert TopicRouteData.from_json(ROUTE_STANDARD) == ROUTE
    compact_legacy = ROUTE_LEGACY.replace(b"\n ", b"")
    assert ROUTE.to_json(legacy=True) == compact_legacy
    assert ROUTE.to_json() == compact_legacy.replace(b'{0:"', b'{"0":"')


# 2.3 HeartbeatData from ali-ons. The document elides the retry subscription as
# {"topic":"%RETRY%GID",...}; the elision is filled in with the first subscription's fields.
HEARTBEAT_ALI_ONS = b"""{"clientID":"192.0.2.2@14446","consumerDataSet":[{"groupName":"GID","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
 "consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"topic":"TopicTest","subString":"*","classFilterMode":false,
 "tagsSet":[],"codeSet":[],"subVersion":1795359447379},{"topic":"%RETRY%GID","subString":"*","classFilterMode":false,"tagsSet":[],"codeSet":[],"subVersion":1795359447380}],"unitMode":false}],"producerDataSet":[{"groupName":"PID"}]}"""  # noqa: E501

# 2.3 the C++ form; the document's placeholders (.., 179…) are filled with values of the same kind.
HEARTBEAT_CPP = b"""{"clientID":"14981-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,"groupName":"GID","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"1795359447379","topic":"TopicTest"}]}],"producerDataSet":[{"groupName":"PID"}]}"""  # noqa: E501


def test_heartbeat_from_ali_ons() -> None:
    hb = HeartbeatData.from_json(HEARTBEAT_ALI_ONS)
    assert hb.clientID == "192.0.2.2@14446"
    assert hb.producerDataSet == [ProducerData(groupName="PID")]
    (consumer,) = hb.consumerDataSet
    assert consumer.groupName == "GID"
    assert consumer.consumeType is ConsumeType.CONSUME_PASSIVELY
    assert consumer.messageModel is MessageModel.CLUSTERING
    assert consumer.consumeFromWhere is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert consumer.unitMode is False
    assert [s.topic for s in consumer.subscriptionDataSet] == ["TopicTest", "%RETRY%GID"]
    sub = consumer.subscriptionDataSet[0]
    assert sub == SubscriptionData(
        topic="TopicTest",
        subString="*",
        classFilterMode=False,
        tagsSet=set(),
        codeSet=set(),
        subVersion=1795359447379,
        expressionType="TAG",
    )
    assert HeartbeatData.from_json(hb.to_json()) == hb


def test_heartbeat_from_cpp_uses_ordinals_and_string_sub_version() -> None:
    hb = HeartbeatData.from_json(HEARTBEAT_CPP)
    (consumer,) = hb.consumerDataSet
    assert consumer.consumeType is ConsumeType.CONSUME_PASSIVELY
    assert consumer.messageModel is MessageModel.CLUSTERING
    assert consumer.consumeFromWhere is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    (sub,) = consumer.subscriptionDataSet
    assert sub.subVersion == 1795359447379 and sub.subString == "*" and sub.topic == "TopicTest"
    assert hb.producerDataSet == [ProducerData(groupName="PID")]
    # enum values we emit are names
    out = fastjson.loads(hb.to_json())
    assert out["consumerDataSet"][0]["consumeType"] == "CONSUME_PASSIVELY"
    assert out["consumerDataSet"][0]["messageModel"] == "CLUSTERING"
    assert out["consumerDataSet"][0]["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"
    assert out["consumerDataSet"][0]["subscriptionDataSet"][0]["subVersion"] == 1795359447379


# 2.1 TopicConfig and RegisterBrokerBody, with n = 7, ms = 1700000000000 and "T":TopicConfig substituted
TOPIC_CONFIG = (
    b'{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"T","topicSysFlag":0,"writeQueueNums":8}'
)
REGISTER_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":7,"stateVersion":0,'
    b'"timestamp":1700000000000},"topicConfigTable":{"T":' + TOPIC_CONFIG + b"}}}"
)


def test_topic_config_example() -> None:
    tc = TopicConfig.from_json(TOPIC_CONFIG)
    assert tc == TopicConfig(
        topicName="T",
        readQueueNums=8,
        writeQueueNums=8,
        perm=6,
        topicFilterType=TopicFilterType.SINGLE_TAG,
        topicSysFlag=0,
        order=False,
    )
    assert tc.to_json() == TOPIC_CONFIG


def test_register_broker_body_example() -> None:
    body = RegisterBrokerBody.decode(REGISTER_BODY, compressed=False)
    wrapper = body.topicConfigSerializeWrapper
    assert wrapper.dataVersion == DataVersion(counter=7, stateVersion=0, timestamp=1700000000000)
    assert wrapper.topicConfigTable == {"T": TopicConfig.from_json(TOPIC_CONFIG)}
    assert body.filterServerList == []
    assert body.to_json() == REGISTER_BODY
    assert body.encode(compressed=False) == REGISTER_BODY


def test_register_broker_body_from_a_5x_broker_keeps_mapping_fields() -> None:
    data = fastjson.loads(REGISTER_BODY)
    data["topicConfigSerializeWrapper"].update(
        {
            "mappingDataVersion": {"counter": 0, "stateVersion": 0, "timestamp": 1},
            "topicQueueMappingDetailMap": {},
            "topicQueueMappingInfoMap": {},
        }
    )
    body = RegisterBrokerBody.from_json(fastjson.dumps(data))
    assert body.topicConfigSerializeWrapper.mappingDataVersion == DataVersion(
        counter=0, stateVersion=0, timestamp=1
    )
    assert fastjson.loads(body.to_json()) == data


def test_kv_table_reply_and_lock_bodies() -> None:
    assert KVTable().to_json() == b'{"table":{}}'
    lock = LockBatchRequestBody.from_json(
        b'{"clientId":"127.0.0.1@1","consumerGroup":"G","mqSet":[{"brokerName":"broker-a","queueId":1,'
        b'"topic":"T"},{"brokerName":"broker-a","queueId":0,"topic":"T"}],"onlyThisBroker":false}'
    )
    assert lock.mqSet == {MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)}
    resp = LockBatchResponseBody(lockOKMQSet=lock.mqSet)
    assert resp.to_json() == (
        b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"},'
        b'{"brokerName":"broker-a","queueId":1,"topic":"T"}]}'
    )
    unlock = UnlockBatchRequestBody.from_json(lock.to_json())
    assert unlock.mqSet == lock.mqSet and unlock.clientId == "127.0.0.1@1"
    assert (
        GetConsumerListByGroupResponseBody(consumerIdList=["a@1", "b@2"]).to_json()
        == b'{"consumerIdList":["a@1","b@2"]}'
    )


def test_cluster_info_and_topic_list() -> None:
    info = ClusterInfo(
        brokerAddrTable={
            "broker-a": BrokerData(brokerName="broker-a", cluster="C", brokerAddrs={0: "h:1", 1: "h:2"})
        },
        clusterAddrTable={"C": {"broker-a"}},
    )
    assert info.to_json(legacy=True) == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"h:1",1:"h:2"},'
        b'"brokerName":"broker-a","cluster":"C","enableActingMaster":false}},'
        b'"clusterAddrTable":{"C":["broker-a"]}}'
    )
    assert ClusterInfo.from_json(info.to_json()) == info
    assert TopicList(topicList={"b", "a"}).to_json() == b'{"topicList":["a","b"]}'


def test_message_queue_is_hashable_and_ordered() -> None:
    mq = MessageQueue.from_json(b'{"brokerName":"b","queueId":3,"topic":"t"}')
    assert mq == MessageQueue(topic="t", brokerName="b", queueId=3)
    assert {mq: 1}[MessageQueue("t", "b", 3)] == 1
    assert sorted([MessageQueue("t", "b", 2), MessageQueue("a", "z", 9), MessageQueue("t", "b", 1)]) == [
        MessageQueue("a", "z", 9),
        MessageQueue("t", "b", 1),
        MessageQueue("t", "b", 2),
    ]


def test_enums_by_name_ordinal_or_ordinal_string() -> None:
    for value in ("CONSUME_ACTIVELY", 0, "0"):
        cd = ConsumerData.from_obj({"groupName": "g", "consumeType": value})
        assert cd.consumeType is ConsumeType.CONSUME_ACTIVELY
    assert (
        ConsumerData.from_obj({"groupName": "g", "consumeFromWhere": 5}).consumeFromWhere
        is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    )
    assert (
        TopicConfig.from_obj({"topicName": "t", "topicFilterType": 1}).topicFilterType
        is TopicFilterType.MULTI_TAG
    )


def test_lenient_scalars() -> None:
    sub = SubscriptionData.from_obj(
        {"topic": 5, "classFilterMode": "1", "codeSet": [1, "2"], "subVersion": "-3"}
    )
    assert sub.topic == "5" and sub.classFilterMode is True and sub.codeSet == {1, 2} and sub.subVersion == -3
    assert SubscriptionData.from_obj({"topic": "t", "classFilterMode": 0}).classFilterMode is False
    # null means default, as in fastjson
    assert TopicRouteData.from_obj({"queueDatas": None, "filterServerTable": None}) == TopicRouteData()


# --------------------------------------------------------------------------- compressed RegisterBrokerBody


def _java_compressed(
    version_json: bytes, lines: list[bytes], filters: bytes, mappings: list[bytes] | None
) -> bytes:
    """The layout of RegisterBrokerBody.encode(true), built by hand from the docstring's table."""
    out = struct.pack(">i", len(version_json)) + version_json + struct.pack(">i", len(lines))
    for line in lines:
        out += struct.pack(">i", len(line)) + line
    out += struct.pack(">i", len(filters)) + filters
    if mappings is not None:
        out += struct.pack(">i", len(mappings))
        for m in mappings:
            out += struct.pack(">i", len(m)) + m
    return zlib.compress(out, 9)


def test_compressed_layout_as_java_writes_it() -> None:
    data = _java_compressed(
        b'{"counter":7,"stateVersion":0,"timestamp":1700000000000}',
        [b"T 8 8 6 SINGLE_TAG {}", b'U 4 2 4 MULTI_TAG {"+message.type":"FIFO"}', b"V 1 1 6 SINGLE_TAG "],
        b'["10.0.0.1:1"]',
        [b'{"topic":"T","totalQueues":8,"bname":"b","epoch":0,"dirty":false,"currIdMap":{}}'],
    )
    body = RegisterBrokerBody.decode(data, compressed=True)
    wrapper = body.topicConfigSerializeWrapper
    assert wrapper.dataVersion == DataVersion(counter=7, stateVersion=0, timestamp=1700000000000)
    assert wrapper.topicConfigTable == {
        "T": TopicConfig(topicName="T", readQueueNums=8, writeQueueNums=8, perm=6),
        "U": TopicConfig(
            topicName="U",
            readQueueNums=4,
            writeQueueNums=2,
            perm=4,
            topicFilterType=TopicFilterType.MULTI_TAG,
            attributes={"+message.type": "FIFO"},
        ),
        "V": TopicConfig(topicName="V", readQueueNums=1, writeQueueNums=1, perm=6),
    }
    assert body.filterServerList == ["10.0.0.1:1"]
    assert wrapper.topicQueueMappingInfoMap is not None
    assert wrapper.topicQueueMappingInfoMap["T"]["totalQueues"] == 8
    # a 4.x broker writes no mapping section
    old = RegisterBrokerBody.decode(_java_compressed(b"{}", [], b"[]", None), compressed=True)
    assert old.topicConfigSerializeWrapper.topicQueueMappingInfoMap is None


def test_compressed_round_trip_drops_sys_flag_and_order_like_java() -> None:
    table = {
        "T": TopicConfig(
            topicName="T", readQueueNums=8, writeQueueNums=8, attributes={"+message.type": "NORMAL"}
        ),
        "O": TopicConfig(topicName="O", topicSysFlag=1, order=True),
    }
    body = RegisterBrokerBody(
        topicConfigSerializeWrapper=TopicConfigSerializeWrapper(
            topicConfigTable=table, dataVersion=DataVersion(counter=3, timestamp=1)
        ),
        filterServerList=["a:1", "b:2"],
    )
    data = body.encode(compressed=True)
    assert zlib.decompress(data)[:4] == struct.pack(
        ">i", len(body.topicConfigSerializeWrapper.dataVersion.to_json())
    )
    back = RegisterBrokerBody.decode(data, compressed=True)
    assert back.filterServerList == ["a:1", "b:2"]
    assert back.topicConfigSerializeWrapper.dataVersion == DataVersion(counter=3, timestamp=1, stateVersion=0)
    assert back.topicConfigSerializeWrapper.topicConfigTable["T"] == table["T"]
    assert back.topicConfigSerializeWrapper.topicConfigTable["O"] == TopicConfig(topicName="O")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\x00",
        struct.pack(">i", -1),
        struct.pack(">i", 100) + b"{}",
        struct.pack(">i", 2) + b"{}",  # no topic count
        struct.pack(">i", 2) + b"{}" + struct.pack(">i", -1),
        struct.pack(">i", 2) + b"{}" + struct.pack(">i", 2**30),
        struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 3) + b"T 1",
        struct.pack(">i", 2)
        + b"{}"
        + struct.pack(">i", 1)
        + struct.pack(">i", 20)
        + b"T x 1 6 SINGLE_TAG {}",
        struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 17) + b"T 1 1 6 NO_SUCH {}",
        struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 2) + b"\xff\xfe",
        struct.pack(">i", 2) + b"{}" + struct.pack(">i", 0),  # no filter list
        struct.pack(">i", 2)
        + b"{}"
        + struct.pack(">i", 0)
        + struct.pack(">i", 2)
        + b"{}",  # filter not a list
        struct.pack(">i", 2)
        + b"[]"
        + struct.pack(">i", 0)
        + struct.pack(">i", 2)
        + b"[]",  # version not object
        struct.pack(">i", 2)
        + b"{}"
        + struct.pack(">i", 0)
        + struct.pack(">i", 2)
        + b"[]"
        + struct.pack(">i", 5),
        struct.pack(">i", 2)
        + b"{}"
        + struct.pack(">i", 0)
        + struct.pack(">i", 2)
        + b"[]"
        + struct.pack(">i", 1)
        + struct.pack(">i", 3)
        + b"{x}",
    ],
)
def test_malformed_compressed_body(raw: bytes) -> None:
    with pytest.raises(BodyError):
        RegisterBrokerBody.decode(zlib.compress(raw), compressed=True)


def test_compressed_garbage_and_bombs() -> None:
    with pytest.raises(BodyError):
        RegisterBrokerBody.decode(b"not zlib at all", compressed=True)
    with pytest.raises(BodyError, match="inflates beyond"):
        RegisterBrokerBody.decode(
            zlib.compress(b"\x00" * 10_000_000, 9), compressed=True, max_inflated=1_000_000
        )
    with pytest.raises(BodyError):
        RegisterBrokerBody.decode(b"{not json", compressed=False)


# ------------------------------------------------------------------------------------- round trips

names = st.text(alphabet="abcXYZ019_-%", min_size=1, max_size=12)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
opt = st.none

queue_datas = st.builds(
    QueueData, brokerName=names, readQueueNums=i32, writeQueueNums=i32, perm=i32, topicSysFlag=i32
)
broker_datas = st.builds(
    BrokerData,
    brokerName=names,
    cluster=opt() | names,
    brokerAddrs=st.dictionaries(i64, st.text(max_size=20), max_size=3),
    enableActingMaster=st.booleans(),
    zoneName=opt() | st.text(max_size=5),
)
route_datas = st.builds(
    TopicRouteData,
    queueDatas=st.lists(queue_datas, max_size=3),
    brokerDatas=st.lists(broker_datas, max_size=3),
    filterServerTable=st.dictionaries(names, st.lists(names, max_size=2), max_size=2),
    orderTopicConf=opt() | st.text(max_size=10),
    topicQueueMappingByBroker=opt() | st.dictionaries(names, st.integers(), max_size=2),
)
subscriptions = st.builds(
    SubscriptionData,
    topic=names,
    subString=opt() | st.text(max_size=20),
    classFilterMode=st.booleans(),
    tagsSet=st.sets(st.text(max_size=5), max_size=3),
    codeSet=st.sets(i32, max_size=3),
    subVersion=i64,
    expressionType=st.sampled_from(["TAG", "SQL92"]),
    filterClassSource=opt() | st.text(max_size=5),
)
consumers = st.builds(
    ConsumerData,
    groupName=names,
    consumeType=opt() | st.sampled_from(ConsumeType),
    messageModel=opt() | st.sampled_from(MessageModel),
    consumeFromWhere=opt() | st.sampled_from(ConsumeFromWhere),
    subscriptionDataSet=st.lists(subscriptions, max_size=3),
    unitMode=st.booleans(),
)
heartbeats = st.builds(
    HeartbeatData,
    clientID=st.text(max_size=20),
    producerDataSet=st.lists(st.builds(ProducerData, groupName=names), max_size=2),
    consumerDataSet=st.lists(consumers, max_size=2),
    heartbeatFingerprint=i32,
    withoutSub=st.booleans(),
)
topic_configs = st.builds(
    TopicConfig,
    topicName=names,
    readQueueNums=i32,
    writeQueueNums=i32,
    perm=i32,
    topicFilterType=st.sampled_from(TopicFilterType),
    topicSysFlag=i32,
    order=st.booleans(),
    attributes=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
)
versions = st.builds(DataVersion, stateVersion=i64, timestamp=i64, counter=i64)
wrappers = st.builds(
    TopicConfigSerializeWrapper,
    topicConfigTable=st.lists(topic_configs, max_size=4).map(lambda ts: {t.topicName: t for t in ts}),
    dataVersion=versions,
)
register_bodies = st.builds(
    RegisterBrokerBody,
    topicConfigSerializeWrapper=wrappers,
    filterServerList=st.lists(st.text(max_size=10), max_size=3),
)
mqs = st.builds(MessageQueue, topic=names, brokerName=names, queueId=i32)
lock_requests = st.builds(
    LockBatchRequestBody,
    consumerGroup=opt() | names,
    clientId=opt() | names,
    onlyThisBroker=st.booleans(),
    mqSet=st.sets(mqs, max_size=4),
)
all_bodies = st.one_of(
    route_datas,
    heartbeats,
    register_bodies,
    lock_requests,
    st.builds(LockBatchResponseBody, lockOKMQSet=st.sets(mqs, max_size=4)),
    st.builds(
        UnlockBatchRequestBody,
        consumerGroup=opt() | names,
        clientId=opt() | names,
        onlyThisBroker=st.booleans(),
        mqSet=st.sets(mqs, max_size=4),
    ),
    st.builds(
        ClusterInfo,
        brokerAddrTable=st.dictionaries(names, broker_datas, max_size=2),
        clusterAddrTable=st.dictionaries(names, st.sets(names, max_size=3), max_size=2),
    ),
    st.builds(TopicList, topicList=st.sets(st.text(max_size=10), max_size=4), brokerAddr=opt() | names),
    st.builds(KVTable, table=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4)),
    st.builds(GetConsumerListByGroupResponseBody, consumerIdList=st.lists(st.text(max_size=10), max_size=4)),
    mqs,
    topic_configs,
    versions,
)


@given(all_bodies, st.booleans())
def test_round_trip(body: b.JsonBody, legacy: bool) -> None:
    data = body.to_json(legacy=legacy)
    assert type(body).from_json(data) == body


@given(register_bodies)
def test_register_body_compressed_round_trip(body: RegisterBrokerBody) -> None:
    back = RegisterBrokerBody.decode(body.encode(compressed=True), compressed=True)
    assert back.filterServerList == body.filterServerList
    assert back.topicConfigSerializeWrapper.dataVersion == body.topicConfigSerializeWrapper.dataVersion
    expected = {
        name: TopicConfig(
            topicName=name,
            readQueueNums=t.readQueueNums,
            writeQueueNums=t.writeQueueNums,
            perm=t.perm,
            topicFilterType=t.topicFilterType,
            attributes=t.attributes,
        )
        for name, t in body.topicConfigSerializeWrapper.topicConfigTable.items()
    }
    assert back.topicConfigSerializeWrapper.topicConfigTable == expected


# ------------------------------------------------------------------------------------------ malformed

BODY_CLASSES: list[type[b.JsonBody]] = [
    TopicRouteData,
    QueueData,
    BrokerData,
    HeartbeatData,
    ConsumerData,
    SubscriptionData,
    ProducerData,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicConfig,
    DataVersion,
    ClusterInfo,
    TopicList,
    KVTable,
    MessageQueue,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
    GetConsumerListByGroupResponseBody,
]


@pytest.mark.parametrize(
    ("cls", "data", "where"),
    [
        (TopicRouteData, b"[]", "TopicRouteData: expected an object"),
        (TopicRouteData, b'{"queueDatas":{}}', "TopicRouteData.queueDatas"),
        (TopicRouteData, b'{"queueDatas":[{"perm":6}]}', r"queueDatas\[0\].brokerName is missing"),
        (TopicRouteData, b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"x":"h"}}]}', "brokerAddrs key"),
        (TopicRouteData, b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:{}}}]}', "brokerAddrs"),
        (TopicRouteData, b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:[]}}]}', "brokerAddrs"),
        (QueueData, b'{"brokerName":"b","perm":2147483648}', "QueueData.perm"),
        (QueueData, b'{"brokerName":"b","perm":1.5}', "QueueData.perm"),
        (QueueData, b'{"brokerName":"b","perm":true}', "QueueData.perm"),
        (QueueData, b'{"brokerName":{}}', "QueueData.brokerName"),
        (HeartbeatData, b'{"producerDataSet":[]}', "clientID is missing"),
        (
            HeartbeatData,
            b'{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":3}]}',
            "consumeType",
        ),
        (
            HeartbeatData,
            b'{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":"PUSH"}]}',
            "consumeType",
        ),
        (
            HeartbeatData,
            b'{"clientID":"c","consumerDataSet":[{"groupName":"g","messageModel":-1}]}',
            "messageModel",
        ),
        (
            HeartbeatData,
            b'{"clientID":"c","consumerDataSet":[{"groupName":"g","unitMode":"yes"}]}',
            "unitMode",
        ),
        (
            HeartbeatData,
            b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":'
            b'[{"topic":"t","subVersion":"179\xe2\x80\xa6"}]}]}',
            "subVersion",
        ),
        (SubscriptionData, b'{"topic":"t","codeSet":[[1]]}', r"codeSet\[0\]"),
        (SubscriptionData, b'{"topic":"t","tagsSet":"a"}', "tagsSet"),
        (MessageQueue, b'{"topic":"t","brokerName":"b"}', "queueId is missing"),
        (LockBatchRequestBody, b'{"mqSet":[{"topic":"t","brokerName":"b","queueId":"x"}]}', "queueId"),
        (TopicConfig, b'{"topicName":"t","topicFilterType":"NONE"}', "topicFilterType"),
        (TopicConfig, b'{"topicName":"t","attributes":{"a":{}}}', "attributes"),
        (KVTable, b'{"table":[]}', "KVTable.table"),
        (ClusterInfo, b'{"clusterAddrTable":{"c":"b"}}', "clusterAddrTable"),
        (KVTable, b"{", "malformed JSON"),
        (KVTable, b"", "malformed JSON"),
    ],
)
def test_malformed_bodies_name_the_path(cls: type[b.JsonBody], data: bytes, where: str) -> None:
    with pytest.raises(BodyError, match=where):
        cls.from_json(data)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
@given(value=json_values)
def test_random_json_gives_body_or_body_error(cls: type[b.JsonBody], value: Any) -> None:
    with contextlib.suppress(BodyError):
        cls.from_obj(value)


def _replace_somewhere(obj: Any, path: list[int], value: Any) -> Any:
    """A copy of obj with one nested value (chosen by path indexes) replaced."""
    if not path or not isinstance(obj, dict | list) or not obj:
        return value
    if isinstance(obj, dict):
        keys = list(obj)
        k = keys[path[0] % len(keys)]
        return {**obj, k: _replace_somewhere(obj[k], path[1:], value)}
    i = path[0] % len(obj)
    return [*obj[:i], _replace_somewhere(obj[i], path[1:], value), *obj[i + 1 :]]


@given(body=all_bodies, path=st.lists(st.integers(0, 10), min_size=1, max_size=6), value=json_values)
def test_mutated_bodies_give_body_or_body_error(body: b.JsonBody, path: list[int], value: Any) -> None:
    mutated = _replace_somewhere(body.to_obj(), path, value)
    with contextlib.suppress(BodyError):
        type(body).from_json(fastjson.dumps(mutated))
