"""protocol/pop_info: the receipt handle (extraInfo), the POP reply's offset-info strings and the
BATCH_ACK_MESSAGE body round-trip, follow RocketMQ's ExtraInfoUtil/BatchAck facts, and refuse
malformed input with a reason; the encoder refuses every body the broker's parser would."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.protocol.pop_info import (
    MAX_BATCH_ACK_BODY_BYTES,
    MAX_BITSET_BYTES,
    ORDER_REVIVE_QUEUE,
    BatchAck,
    InvalidReceiptHandle,
    PopInfoError,
    PopReplyInfo,
    ReceiptHandle,
    batch_acks,
    encode_batch_ack_body,
    msg_offset_info,
    order_count_info,
    parse_batch_ack_body,
    parse_msg_offset_info,
    parse_order_count_info,
    parse_start_offset_info,
    pop_retry_topic,
    pop_retry_topic_v2,
    retry_flag,
    start_offset_info,
)

offsets = st.integers(0, 2**62)
small = st.integers(0, 2**31 - 1)
names = st.text(st.characters(codec="utf-8", exclude_characters=" "), min_size=1, max_size=40)
handles = st.builds(ReceiptHandle, offsets, offsets, offsets, small, st.sampled_from([0, 1, 2]),
                    names, small, st.none() | offsets)
flags = st.booleans()


@given(handles)
def test_handle_round_trips_and_the_fast_and_slow_parses_agree(h: ReceiptHandle) -> None:
    text = h.encode()
    assert ReceiptHandle.parse(text) == ReceiptHandle._parse_slowly(text) == h


def test_handle_fields_follow_extra_info_util() -> None:
    h = ReceiptHandle.parse("10 1700000000000 30000 3 1 broker-a 2 12")
    assert (h.ck_queue_offset, h.pop_time, h.invisible_time, h.revive_qid, h.retry,
            h.broker_name, h.queue_id, h.msg_queue_offset) == (10, 1700000000000, 30000, 3, 1,
                                                               "broker-a", 2, 12)
    assert h.revive_time == 1700000030000 and not h.is_order
    assert h.real_topic("T", "G") == "%RETRY%G_T"
    assert h.real_topic("%RETRY%G_T", "G") == "%RETRY%G_T"  # already the real topic
    v2 = ReceiptHandle.parse("10 1 2 999 2 b 0")
    assert v2.is_order and v2.msg_queue_offset is None
    assert v2.real_topic("T", "G") == "%RETRY%G+T" == pop_retry_topic_v2("T", "G")
    assert ReceiptHandle.parse("1 2 3 4 0 b 5").real_topic("T", "G") == "T"
    assert ORDER_REVIVE_QUEUE == 999


@pytest.mark.parametrize(("text", "why"), [
    ("", "empty"),
    ("1 2 3", "3 space-separated fields"),
    ("1 2 3 4 0 b", "6 space-separated"),
    ("1 2 3 4 0 b 5 6 7", "9 space-separated"),
    ("x 2 3 4 0 b 5 6", "ckQueueOffset is not a number"),
    ("1 x 3 4 0 b 5 6", "popTime is not a number"),
    ("1 2 3 4 0 b 5 --6", "msgQueueOffset is not a number"),
    ("1 2 3 4 0 b 5 ６", "msgQueueOffset is not a number"),
    ("1 2 3 4 7 b 5 6", "retryFlag is 7"),
    ("1 -2 3 4 0 b 5 6", "negative"),
    ("1 2 3 4 0 b -5 6", "negative"),
    ("1 2 3 4 0 b 5 99999999999999999999999", "msgQueueOffset is not a number"),
    ("1 " * 300, "more than 512"),
    ("1 2 3 4 0 b 5 " + "9" * 21, "not a number"),
    ("1 2 3 4 0 " + "b" * 600 + " 5", "more than 512"),
])
def test_bad_handles_are_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(InvalidReceiptHandle, match=why):
        ReceiptHandle.parse(text)


def test_retry_flag_and_topics() -> None:
    assert pop_retry_topic("T", "G") == "%RETRY%G_T"
    assert retry_flag("T") == 0
    assert retry_flag("%RETRY%G_T") == 1
    assert retry_flag("%RETRY%G") == 1  # a 4.x retry topic counts as retry too (Java's getRetry)
    assert retry_flag("%RETRY%G+T") == 2


starts = st.dictionaries(st.tuples(st.sampled_from([0, 1]), small), offsets, max_size=8)
msg_offs = st.dictionaries(st.tuples(st.sampled_from([0, 1]), small),
                           st.lists(offsets, min_size=1, max_size=32), max_size=8)
counts = st.dictionaries(st.tuples(st.sampled_from([0, 1]), small, offsets), small, max_size=32)


@given(starts, msg_offs, counts)
def test_offset_infos_round_trip(
        s: dict[tuple[int, int], int], m: dict[tuple[int, int], list[int]],
        c: dict[tuple[int, int, int], int]) -> None:
    s_entries = [(bool(r), q, o) for (r, q), o in s.items()]
    m_entries = [(bool(r), q, o) for (r, q), o in m.items()]
    c_entries = [(bool(r), q, o, n) for (r, q, o), n in c.items()]
    s_text, m_text, c_text = (start_offset_info(s_entries), msg_offset_info(m_entries),
                              order_count_info(c_entries))
    assert parse_start_offset_info(s_text) == s
    assert parse_msg_offset_info(m_text) == m
    assert parse_order_count_info(c_text) == c


def test_offset_info_formats_are_java_s() -> None:
    assert start_offset_info([(False, 0, 5), (True, 0, 7)]) == "0 0 5;1 0 7"
    assert msg_offset_info([(False, 1, [5, 6, 9])]) == "0 1 5,6,9"
    assert order_count_info([(False, 2, 40, 3)]) == "0 qo2%40 3"
    assert parse_order_count_info("0 2 4;1 qo0%7 1") == {(0, 2, None): 4, (1, 0, 7): 1}
    assert parse_start_offset_info(None) == parse_start_offset_info("") == {}


@pytest.mark.parametrize(("fn", "text", "why"), [
    (parse_start_offset_info, "0 1", "2 fields"),
    (parse_start_offset_info, "0 1 5;0 1 6", "duplicate"),
    (parse_start_offset_info, "3 1 5", "retry flag is 3"),
    (parse_start_offset_info, "0 q 5", "queueId is not a number"),
    (parse_msg_offset_info, "0 1 5,,6", "offset is not a number"),
    (parse_msg_offset_info, ";".join(f"0 {i} 1" for i in range(1025)), "more than 1024"),
    (parse_order_count_info, "0 qo1 5", "qo<queueId>%<offset>"),
    (parse_order_count_info, "0 qo1%2 x", "count is not a number"),
    (parse_start_offset_info, "0 1 " + "1" * 70_000, "more than"),
])
def test_bad_offset_infos_are_refused(fn: object, text: str, why: str) -> None:
    with pytest.raises(PopInfoError, match=why):
        fn(text)  # type: ignore[operator]


def test_reply_info_builds_each_message_s_handle_as_process_pop_response() -> None:
    info = PopReplyInfo.parse(1000, 30000, 3, "0 0 5;0 1 9;1 0 2", "0 0 5,7;0 1 9;1 0 4",
                              "0 qo0%5 0;0 qo0%7 2;1 0 1")
    h = info.handle("T", 0, 7, "broker-a")
    assert h.encode() == "5 1000 30000 3 0 broker-a 0 7"
    assert info.handle("%RETRY%G_T", 0, 4, "broker-a").encode() == "2 1000 30000 3 1 broker-a 0 4"
    assert info.order_count("T", 0, 7) == 2 and info.order_count("T", 0, 5) == 0
    assert info.order_count("%RETRY%G_T", 0, 4) == 1  # the per-queue entry
    assert info.order_count("T", 1, 9) == 0
    with pytest.raises(PopInfoError, match="no entry for retry 0 queue 3"):
        info.handle("T", 3, 1, "broker-a")
    with pytest.raises(PopInfoError, match="does not list offset 6"):
        info.handle("T", 0, 6, "broker-a")
    old = PopReplyInfo.parse(1000, 30000, 3, None, None)  # an old broker: the first offset
    assert old.handle("T", 2, 8, "b", first_offset=6).encode() == "6 1000 30000 3 0 b 2 8"


def test_batch_acks_group_per_ck_with_java_s_bitset() -> None:
    hs = [ReceiptHandle(10, 1, 30000, 3, 0, "b", 0, o) for o in (10, 12, 19)]
    hs.append(ReceiptHandle(4, 1, 30000, 5, 1, "b", 0, 4))
    acks = batch_acks("G", "T", hs)
    assert [a.offsets for a in acks] == [[10, 12, 19], [4]]
    body = encode_batch_ack_body("b", acks)
    obj = json.loads(body)
    assert obj["brokerName"] == "b"
    first = obj["acks"][0]
    # BitSet {0, 2, 9}.toByteArray() == [0x05, 0x02], base64 by fastjson
    assert first == {"c": "G", "t": "T", "r": "0", "so": 10, "q": 0, "rq": 3, "pt": 1,
                     "it": 30000, "b": base64.b64encode(b"\x05\x02").decode()}
    assert obj["acks"][1]["r"] == "1"
    assert parse_batch_ack_body(body) == ("b", acks)
    assert acks[0].handles("b")[1] == "10 1 30000 3 0 b 0 12"


def test_batch_ack_body_as_java_writes_it() -> None:
    bits = base64.b64encode(bytes([0b101, 0b1])).decode()  # bits 0, 2 and 8
    body = json.dumps({"brokerName": "b", "acks": [{"c": "G", "t": "T", "r": "1", "so": 10,
                                                    "q": 1, "rq": 3, "pt": 5, "it": 6,
                                                    "b": bits}]}).encode()
    broker, [a] = parse_batch_ack_body(body)
    assert broker == "b" and a.offsets == [10, 12, 18]
    assert a.handles("b")[0] == "10 5 6 3 1 b 1 10"
    as_bytes = body.replace(f'"{bits}"'.encode(), b"[5, 1]")  # BitSet as a byte array
    assert parse_batch_ack_body(as_bytes)[1][0].offsets == [10, 12, 18]


@given(st.lists(st.tuples(st.sampled_from([0, 1]), st.integers(0, 3), st.integers(0, 100),
                          st.integers(0, 8 * MAX_BITSET_BYTES - 1)), max_size=40))
def test_batch_ack_body_round_trips(entries: list[tuple[int, int, int, int]]) -> None:
    hs = [ReceiptHandle(so, 7, 100, 1, r, "b", q, so + bit) for r, q, so, bit in entries]
    acks = batch_acks("G", "T", hs)
    assert parse_batch_ack_body(encode_batch_ack_body("b", acks)) == ("b", acks)
    want = {(h.retry, h.queue_id, h.ck_queue_offset, h.msg_queue_offset) for h in hs}
    got = [(a.retry, a.queue_id, a.start_offset, o) for a in acks for o in a.offsets]
    assert sorted(got) == sorted(want)


def test_batch_ack_refusals() -> None:
    with pytest.raises(InvalidReceiptHandle, match="no message offset"):
        batch_acks("G", "T", [ReceiptHandle(1, 2, 3, 4, 0, "b", 0)])
    with pytest.raises(InvalidReceiptHandle, match="from its CK's start"):
        batch_acks("G", "T", [ReceiptHandle(10, 2, 3, 4, 0, "b", 0, 9)])
    for body, why in [(b"[", "not JSON"), (b"{}", "lacks its 'acks'"),
                      (b'{"acks":[{"r":"5"}]}', "'r' is '5'"),
                      (b'{"acks":[{"c":"G","t":"T","so":1,"q":0,"rq":0,"pt":1,"it":1,"b":"%"}]}',
                       "not base64"),
                      (b'{"acks":[{"c":"G","t":"T","so":1,"q":0,"rq":0,"pt":1,"it":1,"b":{}}]}',
                       "not a BitSet"),
                      (b'{"acks":[{"c":"G","t":"T","q":0,"rq":0,"pt":1,"it":1}]}', "lacks 'so'"),
                      (b'{"acks":[{"c":"G","t":"T","so":"1","q":0,"rq":0,"pt":1,"it":1}]}',
                       "'so' is not an integer"),
                      (b'{"acks":[{"c":1}]}', "'c' is not a string")]:
        with pytest.raises(PopInfoError, match=why):
            parse_batch_ack_body(body)
    with pytest.raises(PopInfoError, match="more than 1024"):
        encode_batch_ack_body("b", [BatchAck("G", "T", 0, 0, 0, 0, 0, 0, 1)] * 1025)


def test_the_body_bounds_hold_for_the_encoder_and_the_parser_alike() -> None:
    entry = {"c": "G", "t": "T", "so": 1, "q": 0, "rq": 0, "pt": 1, "it": 1}
    wide = base64.b64encode(b"\xff" * (MAX_BITSET_BYTES + 1)).decode()
    with pytest.raises(PopInfoError, match=f"BitSet of {MAX_BITSET_BYTES + 1} bytes"):
        parse_batch_ack_body(json.dumps({"acks": [dict(entry, b=wide)]}).encode())
    with pytest.raises(PopInfoError, match=f"BitSet of {MAX_BITSET_BYTES + 1} bytes"):
        encode_batch_ack_body("b", [BatchAck("G", "T", 0, 0, 0, 0, 0, 0,
                                             1 << 8 * MAX_BITSET_BYTES)])
    full = base64.b64encode(b"\xff" * MAX_BITSET_BYTES).decode()  # 1024 offsets an entry
    with pytest.raises(PopInfoError, match="acks 33792 offsets"):
        parse_batch_ack_body(json.dumps({"acks": [dict(entry, b=full)] * 33}).encode())
    dense = BatchAck("G", "T", 0, 0, 0, 0, 0, 0, (1 << 8 * MAX_BITSET_BYTES) - 1)
    with pytest.raises(PopInfoError, match="acks 33792 offsets"):
        encode_batch_ack_body("b", [dense] * 33)
    with pytest.raises(PopInfoError, match="more than 1048576"):
        parse_batch_ack_body(b" " * (MAX_BATCH_ACK_BODY_BYTES + 1))
    long_names = BatchAck("G" * 600, "T" * 600, 0, 0, 0, 0, 0, 0, 1)
    with pytest.raises(PopInfoError, match="more than 1048576"):
        encode_batch_ack_body("b", [long_names] * 1000)
    # the longest names RocketMQ allows (group 255, topic 127) fit a full body
    most = BatchAck("G" * 255, "T" * 127, 2, 2**62, 2**31 - 1, 2**31 - 1, 2**62, 2**62,
                    (1 << 8 * MAX_BITSET_BYTES) - 1)
    one = BatchAck("G" * 255, "T" * 127, 2, 2**62, 0, 0, 2**62, 2**62, 1)
    body = encode_batch_ack_body("b", [most] * 31 + [one] * 993)
    assert parse_batch_ack_body(body)[1][0] == most
