"""The POP records: CK/ack JSON in RocketMQ's short keys, the receipt handle (extraInfo) codec,
the offset-info strings, and the refusals of malformed input."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.broker.pop.errors import InvalidReceiptHandle
from rocketlite.broker.pop.records import (
    AckMsg,
    PopCheckPoint,
    ReceiptHandle,
    RecordError,
    msg_offset_info,
    order_count_info,
    parse_batch_ack_body,
    pop_retry_topic,
    revive_topic,
    start_offset_info,
)


def ck() -> PopCheckPoint:
    return PopCheckPoint(start_offset=10, pop_time=1700000000000, invisible_time=30000, num=3,
                         queue_id=2, topic="T", cid="G", broker_name="broker-a",
                         queue_offset_diff=[0, 2, 5], revive_offset=7)


def test_ck_json_uses_rocketmq_short_keys_and_round_trips() -> None:
    c = ck()
    obj = json.loads(c.to_json())
    assert obj == {"so": 10, "pt": 1700000000000, "it": 30000, "bm": 0, "n": 3, "q": 2, "t": "T",
                   "c": "G", "ro": 7, "d": [0, 2, 5], "bn": "broker-a", "rp": 0}
    assert PopCheckPoint.from_json(c.to_json()) == c
    assert c.offsets == [10, 12, 15]
    assert c.revive_time == 1700000030000
    assert c.unique_id() == "T@2@10@G@1700000000000@broker-a@ck"


def test_ck_bits_and_contiguous_form() -> None:
    c = ck()
    assert c.index_of(12) == 1 and c.index_of(11) == -1
    c.set_acked(0)
    c.set_acked(2)
    assert c.acked(0) and not c.acked(1) and not c.all_acked
    c.set_acked(1)
    assert c.all_acked
    plain = PopCheckPoint.from_json(b'{"so":5,"pt":1,"it":2,"n":2,"q":0,"t":"T","c":"G"}')
    assert plain.offsets == [5, 6] and plain.index_of(6) == 1 and plain.index_of(7) == -1


def test_ack_json_single_and_batch() -> None:
    a = AckMsg(ack_offset=12, start_offset=10, cid="G", topic="T", queue_id=2, pop_time=99,
               broker_name="b")
    assert json.loads(a.to_json()) == {"ao": 12, "so": 10, "c": "G", "t": "T", "q": 2, "pt": 99,
                                       "bn": "b"}
    assert AckMsg.from_json(a.to_json()) == a
    assert a.unique_id() == "T@2@12@G@99@b@ack" and a.tag == "ack"
    assert a.key == (*ck().key[:3], 10, 99, "b")
    b = AckMsg(ack_offset=10, start_offset=10, cid="G", topic="T", queue_id=2, pop_time=99,
               broker_name="b", ack_offsets=(10, 15))
    assert json.loads(b.to_json())["aol"] == [10, 15] and b.tag == "bAck"
    assert AckMsg.from_json(b.to_json()).offsets == (10, 15)


@pytest.mark.parametrize("data, why", [
    (b"not json", "not JSON"),
    (b"[1]", "not a JSON object"),
    (b'{"so":1,"pt":1,"it":1,"n":1,"q":0,"t":"T"}', "lacks 'c'"),
    (b'{"so":"1","pt":1,"it":1,"n":1,"q":0,"t":"T","c":"G"}', "'so' is not an integer"),
    (b'{"so":1,"pt":1,"it":1,"n":40,"q":0,"t":"T","c":"G"}', "must be 1..32"),
    (b'{"so":1,"pt":1,"it":1,"n":2,"q":0,"t":"T","c":"G","d":[0]}', "n=2 but 1 offsets"),
    (b'{"so":1,"pt":1,"it":1,"n":1,"q":0,"t":"T","c":"G","d":"x"}', "not a list"),
    (b"{" + b" " * 20000 + b"}", "more than"),
])
def test_bad_ck_records_are_refused_with_a_reason(data: bytes, why: str) -> None:
    with pytest.raises(RecordError, match=why):
        PopCheckPoint.from_json(data)


def test_handle_round_trip_and_topic() -> None:
    h = ReceiptHandle(10, 1700000000000, 30000, 3, 1, "broker-a", 0, 12)
    text = h.encode()
    assert text == "10 1700000000000 30000 3 1 broker-a 0 12"
    assert ReceiptHandle.parse(text) == h
    assert h.real_topic("T", "G") == "%RETRY%G_T" == pop_retry_topic("T", "G")
    assert h.real_topic("%RETRY%G_T", "G") == "%RETRY%G_T"  # a Remoting ack names it already
    assert ReceiptHandle.parse("1 2 3 4 2 b 0").real_topic("T", "G") == "%RETRY%G+T"
    assert ReceiptHandle.parse("10 1 2 999 0 b 4").is_order
    assert ReceiptHandle.parse("10 1 2 3 0 b 4").msg_queue_offset is None
    assert revive_topic("C") == "rmq_sys_REVIVE_LOG_C"


@pytest.mark.parametrize("text, why", [
    ("", "empty"),
    ("1 2 3", "3 space-separated fields"),
    ("1 x 3 4 0 b 5 6", "popTime is not a number"),
    ("1 2 3 4 7 b 5 6", "retryFlag is 7"),
    ("1 2 3 4 0 b -5 6", "negative"),
    ("1 " * 300, "more than 512"),
    ("1 2 3 4 0 b 5 99999999999999999999999", "msgQueueOffset is not a number"),
])
def test_bad_handles_are_refused(text: str, why: str) -> None:
    with pytest.raises(InvalidReceiptHandle, match=why):
        ReceiptHandle.parse(text)


def test_offset_info_strings() -> None:
    assert start_offset_info([(False, 0, 5), (True, 0, 7)]) == "0 0 5;1 0 7"
    assert msg_offset_info([(False, 1, [5, 6])]) == "0 1 5,6"
    assert order_count_info([(False, 1, 5, 2)]) == "0 qo1%5 2"


def test_batch_ack_body() -> None:
    bits = base64.b64encode(bytes([0b101, 0b1])).decode()  # bits 0, 2 and 8
    body = json.dumps({"brokerName": "b", "acks": [{"c": "G", "t": "T", "r": "1", "so": 10,
                                                    "q": 1, "rq": 3, "pt": 5, "it": 6,
                                                    "b": bits}]}).encode()
    broker, [a] = parse_batch_ack_body(body)
    assert broker == "b" and a.offsets == [10, 12, 18]
    assert a.handles("b")[0] == "10 5 6 3 1 b 1 10"
    assert parse_batch_ack_body(body.replace(f'"{bits}"'.encode(), b"[5, 1]"))[1][0].offsets == \
        [10, 12, 18]


@pytest.mark.parametrize("body, why", [
    (b"x", "not JSON"),
    (b"{}", "lacks its 'acks'"),
    (b'{"acks":[{"c":"G","t":"T","r":"9"}]}', "'r' is '9'"),
    (b'{"acks":[{"c":"G","t":"T","so":1,"q":0,"rq":0,"pt":1,"it":1,"b":"!!"}]}', "not base64"),
    (b'{"acks":[{"c":"G","t":"T","so":1,"q":0,"rq":0,"pt":1,"it":1,"b":{}}]}', "not a BitSet"),
])
def test_bad_batch_ack_bodies(body: bytes, why: str) -> None:
    with pytest.raises(RecordError, match=why):
        parse_batch_ack_body(body)


def test_batch_ack_bodies_are_bounded() -> None:
    entry = {"c": "G", "t": "T", "so": 1, "q": 0, "rq": 0, "pt": 1, "it": 1}
    wide = base64.b64encode(b"\xff" * 129).decode()
    with pytest.raises(RecordError, match="BitSet of 129 bytes"):
        parse_batch_ack_body(json.dumps({"acks": [dict(entry, b=wide)]}).encode())
    full = base64.b64encode(b"\xff" * 128).decode()  # 1024 offsets an entry
    many = json.dumps({"acks": [dict(entry, b=full)] * 33}).encode()
    with pytest.raises(RecordError, match="acks 33792 offsets"):
        parse_batch_ack_body(many)


@given(st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**40), st.integers(0, 999),
       st.sampled_from([0, 1, 2]), st.from_regex(r"[A-Za-z0-9_-]{1,30}", fullmatch=True),
       st.integers(0, 2**31 - 1), st.one_of(st.none(), st.integers(0, 2**62)))
def test_fast_and_slow_handle_parsing_agree(ck: int, pt: int, it: int, rq: int, retry: int,
                                            bn: str, q: int, mo: int | None) -> None:
    h = ReceiptHandle(ck, pt, it, rq, retry, bn, q, mo)
    text = h.encode()
    assert ReceiptHandle.parse(text) == ReceiptHandle._parse_slowly(text) == h
