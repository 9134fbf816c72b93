"""Typed custom headers: ext fields <-> frozen dataclasses, strict where it matters, lenient where
real clients differ (C++ booleans, ali-ons numbers, unknown keys)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.common.errors import FormatError, HeaderError
from rocketlite.protocol import headers as h
from rocketlite.protocol.headers import Header, IntRange

ALL_HEADERS: list[type[Header]] = sorted(
    (c for c in vars(h).values() if isinstance(c, type) and issubclass(c, Header) and c is not Header),
    key=lambda c: c.__name__,
)

# The headers the broker and the NameServer need (the brief's list), by Java class name.
EXPECTED = {
    "PopMessageRequestHeader", "PopMessageResponseHeader", "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader", "ChangeInvisibleTimeResponseHeader",
    "RecallMessageRequestHeader", "RecallMessageResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageResponseHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "UpdateConsumerOffsetRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "ViewMessageRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "UnregisterClientRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "EndTransactionRequestHeader",
    "CheckTransactionStateRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteTopicRequestHeader",
    "GetRouteInfoRequestHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnRegisterBrokerRequestHeader",
    "BrokerHeartbeatRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "PutKVConfigRequestHeader",
    "DeleteKVConfigRequestHeader",
    "GetKVListByNamespaceRequestHeader",
}


def test_every_header_is_there_frozen_and_slotted() -> None:
    assert {c.__name__ for c in ALL_HEADERS} == EXPECTED
    for cls in ALL_HEADERS:
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen, cls
        assert "__slots__" in cls.__dict__ and cls.__dictoffset__ == 0, cls  # no per-instance dict


def _field_strategy(tp: Any) -> st.SearchStrategy[Any]:
    if typing.get_origin(tp) in (typing.Union, type(int | None)):
        (inner,) = (a for a in typing.get_args(tp) if a is not type(None))
        return st.one_of(st.none(), _field_strategy(inner))
    if typing.get_origin(tp) is typing.Annotated:
        rng = next(m for m in tp.__metadata__ if isinstance(m, IntRange))
        return st.integers(rng.lo, rng.hi)
    if tp is bool:
        return st.booleans()
    if tp is str:
        return st.text(max_size=30)
    raise AssertionError(tp)


def _strategy(cls: type[Header]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return st.builds(cls, **{f.name: _field_strategy(hints[f.name]) for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@given(data=st.data())
def test_round_trip(cls: type[Header], data: st.DataObject) -> None:
    header = data.draw(_strategy(cls))
    ext = header.to_ext()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in ext.items())
    assert set(ext) <= set(cls.wire_keys())
    assert cls.from_ext(ext) == header
    # unknown keys (RpcRequestHeader's ns/nsd/oway/lo, C++'s AccessKey/Signature) are ignored
    assert cls.from_ext({**ext, "ns": "x", "oway": "maybe", "AccessKey": "", "zz": "1"}) == header


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_required_fields_missing(cls: type[Header]) -> None:
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    full = dict.fromkeys(cls.wire_keys(), "1")
    for name in required:
        ext = {k: v for k, v in full.items() if k != name}
        with pytest.raises(HeaderError, match=repr(name)) as err:
            cls.from_ext(ext)
        assert err.value.field == name and err.value.value is None
        assert isinstance(err.value, FormatError)


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@given(
    ext=st.dictionaries(
        st.text(alphabet="abcdefghiklmnopqrstuvwxyzIDO_", max_size=12), st.text(max_size=12), max_size=8
    ),
    data=st.data(),
)
def test_random_ext_parses_or_raises_header_error(
    cls: type[Header], ext: dict[str, str], data: st.DataObject
) -> None:
    keys = cls.wire_keys()
    values = st.one_of(
        st.text(max_size=12), st.sampled_from(["", "-1", "1", "0", "TRUE", "99999999999999999999"])
    )
    ext = {**ext, **data.draw(st.dictionaries(st.sampled_from(keys), values))}
    try:
        header = cls.from_ext(ext)
    except HeaderError as e:
        assert e.field in keys
        return
    assert cls.from_ext(header.to_ext()) == header


# --------------------------------------------------------------------------------- observed clients

SEND_V1 = {
    "producerGroup": "PID",
    "topic": "TopicTest",
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": "4",
    "queueId": "2",
    "sysFlag": "0",
    "bornTimestamp": "1700000000123",
    "flag": "0",
    "properties": "TAGS\x01TagA\x02KEYS\x01key0\x02",
    "reconsumeTimes": "0",
    "unitMode": "false",
    "batch": "false",
    "maxReconsumeTimes": "16",
}


def test_send_v1_and_v2_forms() -> None:
    v1 = h.SendMessageRequestHeader.from_ext(SEND_V1)
    assert v1 == h.SendMessageRequestHeader(
        producerGroup="PID",
        topic="TopicTest",
        defaultTopic="TBW102",
        defaultTopicQueueNums=4,
        queueId=2,
        sysFlag=0,
        bornTimestamp=1700000000123,
        flag=0,
        properties="TAGS\x01TagA\x02KEYS\x01key0\x02",
        reconsumeTimes=0,
        unitMode=False,
        batch=False,
        maxReconsumeTimes=16,
    )
    v2 = v1.to_v2_ext()
    assert v2 == {
        "a": "PID",
        "b": "TopicTest",
        "c": "TBW102",
        "d": "4",
        "e": "2",
        "f": "0",
        "g": "1700000000123",
        "h": "0",
        "i": "TAGS\x01TagA\x02KEYS\x01key0\x02",
        "j": "0",
        "k": "false",
        "l": "16",
        "m": "false",
    }
    assert h.SendMessageRequestHeader.from_v2_ext(v2) == v1
    with_broker = dataclasses.replace(v1, bname="broker-a")
    assert with_broker.to_v2_ext()["n"] == "broker-a"
    assert with_broker.to_ext()["bname"] == "broker-a"
    assert h.SendMessageRequestHeader.from_v2_ext(with_broker.to_v2_ext()) == with_broker


@given(st.data())
def test_v2_round_trip(data: st.DataObject) -> None:
    header = data.draw(_strategy(h.SendMessageRequestHeader))
    ext = header.to_v2_ext()
    assert set(ext) <= set("abcdefghijklmn")
    assert h.SendMessageRequestHeader.from_v2_ext(ext) == header


def test_v2_missing_field_names_the_one_letter_key() -> None:
    ext = h.SendMessageRequestHeader.from_ext(SEND_V1).to_v2_ext()
    del ext["e"]
    with pytest.raises(HeaderError, match="'e'") as err:
        h.SendMessageRequestHeader.from_v2_ext(ext)
    assert err.value.field == "e"


def test_cpp_batch_flags_and_mixed_values() -> None:
    # C++ sends booleans as "0"/"1" and some numbers as strings ("commitOffset":"-1")
    cpp = {
        **SEND_V1,
        "unitMode": "0",
        "batch": "1",
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "x",
    }
    header = h.SendMessageRequestHeader.from_ext(cpp)
    assert header.batch is True and header.unitMode is False
    v2 = h.SendMessageRequestHeader.from_v2_ext({**header.to_v2_ext(), "m": "1", "k": "0"})
    assert v2.batch is True and v2.unitMode is False


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("1", True),
        ("false", False),
        ("FALSE", False),
        ("fAlSe", False),
        ("0", False),
    ],
)
def test_booleans(text: str, value: bool) -> None:
    assert (
        h.GetMaxOffsetRequestHeader.from_ext({"topic": "t", "queueId": "0", "committed": text}).committed
        is value
    )


def test_pull_request_as_ali_ons_sends_it() -> None:
    ext = {
        "consumerGroup": "GID",
        "topic": "TopicTest",
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": "6",
        "commitOffset": "-1",
        "suspendTimeoutMillis": "15000",
        "subscription": "*",
        "subVersion": "1795359447379",
    }
    pull = h.PullMessageRequestHeader.from_ext(ext)
    assert pull.commitOffset == -1 and pull.sysFlag == 6 and pull.subVersion == 1795359447379
    assert pull.expressionType is None and pull.maxMsgBytes is None
    assert pull.to_ext() == ext


def test_pull_response_keys() -> None:
    resp = h.PullMessageResponseHeader(
        suggestWhichBrokerId=0, nextBeginOffset=5, minOffset=0, maxOffset=9, topicSysFlag=0, groupSysFlag=0
    )
    assert resp.to_ext() == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "5",
        "minOffset": "0",
        "maxOffset": "9",
        "topicSysFlag": "0",
        "groupSysFlag": "0",
    }


def test_send_response_keys() -> None:
    resp = h.SendMessageResponseHeader(msgId="7F00000100002A9F0000000000000083", queueId=1, queueOffset=7)
    assert resp.to_ext() == {"msgId": "7F00000100002A9F0000000000000083", "queueId": "1", "queueOffset": "7"}


def test_defaults_and_special_keys() -> None:
    assert h.GetMaxOffsetRequestHeader.from_ext({"topic": "t", "queueId": "1"}).committed is True
    back = h.ConsumerSendMsgBackRequestHeader.from_ext({"offset": "131", "group": "G", "delayLevel": "0"})
    assert back.unitMode is False and back.maxReconsumeTimes is None and back.originMsgId is None
    q = h.QueryMessageRequestHeader.from_ext(
        {
            "topic": "t",
            "key": "k",
            "maxNum": "32",
            "beginTimestamp": "0",
            "endTimestamp": "9",
            "_UNIQUE_KEY_QUERY": "true",
        }
    )
    assert q.uniqueKeyQuery is True and q.to_ext()["_UNIQUE_KEY_QUERY"] == "true"
    reg = h.RegisterBrokerRequestHeader.from_ext(
        {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "haServerAddr": "a:2", "brokerId": "0"}
    )
    assert reg.compressed is False and reg.bodyCrc32 == 0 and reg.enableActingMaster is None
    assert h.SearchOffsetRequestHeader(topic="t", queueId=0, timestamp=1, boundaryType="UPPER").upper_boundary
    assert not h.SearchOffsetRequestHeader(
        topic="t", queueId=0, timestamp=1, boundaryType="lower"
    ).upper_boundary
    assert not h.SearchOffsetRequestHeader(topic="t", queueId=0, timestamp=1).upper_boundary
    assert h.UnregisterClientRequestHeader.from_ext(
        {"clientID": "c", "producerGroup": "", "consumerGroup": "G"}
    ) == h.UnregisterClientRequestHeader(clientID="c", producerGroup="", consumerGroup="G")


def test_to_ext_omits_none() -> None:
    assert h.GetRouteInfoRequestHeader(topic="T").to_ext() == {"topic": "T"}
    assert h.GetRouteInfoRequestHeader(topic="T", acceptStandardJsonOnly=True).to_ext() == {
        "topic": "T",
        "acceptStandardJsonOnly": "true",
    }
    assert h.GetKVConfigResponseHeader().to_ext() == {}


def test_integers() -> None:
    def queue_id(text: str) -> int:
        return h.GetMinOffsetRequestHeader.from_ext({"topic": "t", "queueId": text}).queueId

    assert queue_id("-1") == -1
    assert queue_id("+7") == 7
    assert queue_id("007") == 7
    assert queue_id(str(2**31 - 1)) == 2**31 - 1
    assert queue_id(str(-(2**31))) == -(2**31)
    offset = h.GetMinOffsetResponseHeader.from_ext({"offset": str(2**63 - 1)}).offset
    assert offset == 2**63 - 1
    assert h.GetMinOffsetResponseHeader.from_ext({"offset": str(-(2**63))}).offset == -(2**63)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 1",
        "1 ",
        "1_000",
        "0x10",
        "1.0",
        "abc",
        "٣",
        "²",
        str(2**31),
        str(-(2**31) - 1),
        "-",
        "+",
        "1" * 50,
    ],
)
def test_bad_int32_names_field_and_value(text: str) -> None:
    with pytest.raises(HeaderError) as err:
        h.GetMinOffsetRequestHeader.from_ext({"topic": "t", "queueId": text})
    assert err.value.field == "queueId" and err.value.value == text
    assert "queueId" in str(err.value)


@pytest.mark.parametrize("text", [str(2**63), str(-(2**63) - 1), "9" * 30, "1e3"])
def test_bad_int64(text: str) -> None:
    with pytest.raises(HeaderError, match="offset"):
        h.GetMinOffsetResponseHeader.from_ext({"offset": text})


@pytest.mark.parametrize("text", ["yes", "no", "t", "2", "-1", " true", "truee"])
def test_bad_boolean(text: str) -> None:
    with pytest.raises(HeaderError) as err:
        h.GetMaxOffsetRequestHeader.from_ext({"topic": "t", "queueId": "0", "committed": text})
    assert err.value.field == "committed" and err.value.value == text


def test_empty_string_for_optional_non_string_is_absent() -> None:
    got = h.PullMessageRequestHeader.from_ext(
        {
            "consumerGroup": "g",
            "topic": "t",
            "queueId": "0",
            "queueOffset": "0",
            "maxMsgNums": "32",
            "sysFlag": "6",
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subVersion": "0",
            "maxMsgBytes": "",
            "requestSource": "",
        }
    )
    assert got.maxMsgBytes is None and got.requestSource is None
    assert (
        h.GetMaxOffsetRequestHeader.from_ext({"topic": "t", "queueId": "0", "committed": ""}).committed
        is True
    )
    with pytest.raises(HeaderError, match="queueId"):
        h.GetMinOffsetRequestHeader.from_ext({"topic": "t", "queueId": ""})


def test_non_string_values_are_coerced() -> None:
    # ext should hold strings, but a JSON header from ali-ons carries raw numbers and booleans
    ext: dict[str, Any] = {"consumerGroup": "g", "topic": "t", "queueId": 0, "commitOffset": -1}
    got = h.UpdateConsumerOffsetRequestHeader.from_ext(ext)
    assert got.queueId == 0 and got.commitOffset == -1
    got2 = h.QueryConsumerOffsetRequestHeader.from_ext(
        {"consumerGroup": "g", "topic": 5, "queueId": "1", "setZeroIfNotFound": False}
    )
    assert got2.topic == "5" and got2.setZeroIfNotFound is False
