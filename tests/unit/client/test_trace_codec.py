"""Trace records in Java's ``TraceDataEncoder`` layout: hand-written byte strings of each record
type (fields joined by \\x01, each record ended by \\x02, a missing value written ``null``), the
older Pub forms Java still reads, skipped garbage, and a round trip of any record."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.client.trace_codec import (
    ConsumeReturnType,
    MessageType,
    TraceRecord,
    TraceType,
    decode,
    encode,
    encode_record,
    record_keys,
)

PUB = TraceRecord(TraceType.Pub, 1700000000000, "DefaultRegion", "PG", topic="TopicA",
                  msg_id="7F0000010001", tags="tagA", keys="k1 k2", store_host="127.0.0.1:10911",
                  body_length=5, cost_time=3, msg_type=MessageType.Normal_Msg,
                  offset_msg_id="7F00000100002A9F0000000000000000", success=True)
PUB_TEXT = ("Pub\x011700000000000\x01DefaultRegion\x01PG\x01TopicA\x017F0000010001\x01tagA\x01k1 k2"
            "\x01127.0.0.1:10911\x015\x013\x010\x017F00000100002A9F0000000000000000\x01true\x02")
SUB_BEFORE = TraceRecord(TraceType.SubBefore, 1700000000100, "DefaultRegion", "CG", "REQ1",
                         msg_id="7F0000010001", retry_times=2, keys=None)
SUB_BEFORE_TEXT = "SubBefore\x011700000000100\x01DefaultRegion\x01CG\x01REQ1\x017F0000010001\x012\x01null\x02"
SUB_AFTER = TraceRecord(TraceType.SubAfter, 1700000000107, request_id="REQ1", msg_id="7F0000010001",
                        cost_time=7, success=False, keys="k1", context_code=ConsumeReturnType.FAILED)
SUB_AFTER_TEXT = "SubAfter\x01REQ1\x017F0000010001\x017\x01false\x01k1\x014\x011700000000107\x02"
END_TX = TraceRecord(TraceType.EndTransaction, 1700000000200, "DefaultRegion", "TG", topic="TopicT",
                     msg_id="ID2", tags=None, keys="k", store_host="127.0.0.1:10911",
                     msg_type=MessageType.Trans_Msg_Half, transaction_id="TX1",
                     transaction_state="COMMIT_MESSAGE", from_transaction_check=True)
END_TX_TEXT = ("EndTransaction\x011700000000200\x01DefaultRegion\x01TG\x01TopicT\x01ID2\x01null\x01k"
               "\x01127.0.0.1:10911\x011\x01TX1\x01COMMIT_MESSAGE\x01true\x02")
CASES = [(PUB, PUB_TEXT), (SUB_BEFORE, SUB_BEFORE_TEXT), (SUB_AFTER, SUB_AFTER_TEXT),
         (END_TX, END_TX_TEXT)]


def test_each_record_type_encodes_as_java_does() -> None:
    for record, text in CASES:
        assert encode_record(record) == text


def test_a_body_of_several_records_decodes_to_them() -> None:
    body = "".join(text for _, text in CASES)
    assert encode([r for r, _ in CASES]) == body
    assert decode(body) == [r for r, _ in CASES]


def test_the_older_pub_forms_java_reads() -> None:
    # 13 fields (before offsetMsgId) and 15 (with the client host) are read as Java reads them.
    thirteen = "Pub\x011\x01R\x01PG\x01T\x01ID\x01null\x01null\x01h:1\x010\x012\x013\x01false\x02"
    [r] = decode(thirteen)
    assert (r.offset_msg_id, r.success, r.msg_type, r.tags) == (None, False, MessageType.Delay_Msg, None)
    fifteen = PUB_TEXT[:-1] + "\x0110.0.0.9\x02"
    [r] = decode(fifteen)
    assert r.client_host == "10.0.0.9" and r.offset_msg_id == PUB.offset_msg_id and r.success


def test_unknown_short_and_malformed_records_are_skipped() -> None:
    body = ("PullAfter\x011\x012\x02" + "Pub\x011\x02" + "SubBefore\x01x\x01R\x01G\x01Q\x01I\x010\x01k\x02"
            + "\x02" + SUB_AFTER_TEXT)
    assert decode(body) == [SUB_AFTER]
    assert decode("") == []


def test_keys_are_the_msg_id_and_the_keys_string() -> None:
    assert record_keys(PUB) == ["7F0000010001", "k1 k2"]
    assert record_keys(SUB_BEFORE) == ["7F0000010001"]


_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                max_size=12).filter(lambda s: s != "null")
_opt = st.none() | _text.filter(bool)
_int = st.integers(0, 2**40)
_small = st.integers(0, 3)


@st.composite
def records(draw: st.DrawFn) -> TraceRecord:
    kind = draw(st.sampled_from(list(TraceType)))
    if kind is TraceType.Pub:
        return TraceRecord(kind, draw(_int), draw(_opt), draw(_opt), topic=draw(_opt),
                           msg_id=draw(_opt), tags=draw(_opt), keys=draw(_opt),
                           store_host=draw(_opt), body_length=draw(_int), cost_time=draw(_int),
                           msg_type=draw(_small), offset_msg_id=draw(_opt), success=draw(st.booleans()))
    if kind is TraceType.SubBefore:
        return TraceRecord(kind, draw(_int), draw(_opt), draw(_opt), draw(_opt), msg_id=draw(_opt),
                           retry_times=draw(_int), keys=draw(_opt))
    if kind is TraceType.SubAfter:
        return TraceRecord(kind, draw(_int), request_id=draw(_opt), msg_id=draw(_opt),
                           cost_time=draw(_int), success=draw(st.booleans()), keys=draw(_opt),
                           context_code=draw(st.integers(0, 4)))
    return TraceRecord(kind, draw(_int), draw(_opt), draw(_opt), topic=draw(_opt), msg_id=draw(_opt),
                       tags=draw(_opt), keys=draw(_opt), store_host=draw(_opt), msg_type=draw(_small),
                       transaction_id=draw(_opt), transaction_state=draw(_opt),
                       from_transaction_check=draw(st.booleans()))


@given(st.lists(records(), max_size=5))
def test_any_records_round_trip(rs: list[TraceRecord]) -> None:
    body = encode(rs)
    assert decode(body) == rs
    assert body.count("\x02") == len(rs)


def test_the_pub_of_javas_encoder_test() -> None:
    # TraceDataEncoderTest's Pub (apache/rocketmq client tests), field by field, at a fixed time.
    java = "\x01".join(["Pub", "1700000000000", "DefaultRegion", "PID-test", "topic-test",
                        "AC1415116D1418B4AAC217FE1B4E0000", "Tags", "Keys", "127.0.0.1:10911", "26",
                        "245", "0", "0A9A002600002A9F0000000000002329", "true"]) + "\x02"
    r = TraceRecord(TraceType.Pub, 1700000000000, "DefaultRegion", "PID-test", topic="topic-test",
                    msg_id="AC1415116D1418B4AAC217FE1B4E0000", tags="Tags", keys="Keys",
                    store_host="127.0.0.1:10911", body_length=26, cost_time=245,
                    offset_msg_id="0A9A002600002A9F0000000000002329", success=True)
    assert encode_record(r) == java and decode(java) == [r]
    assert len(record_keys(r)) == 2  # transKey: the msgId and the keys


def test_a_seven_field_sub_after_of_older_clients() -> None:
    # Before the trailing timestamp, a SubAfter had 7 fields (the context code last).
    [r] = decode("SubAfter\x013455848576927\x01AC1415116D1418B4AAC217FE1B4E0000\x0120\x01true\x01keys"
                 "\x0198623046\x02")
    assert (r.request_id, r.cost_time, r.success, r.keys, r.context_code, r.timestamp) == \
        ("3455848576927", 20, True, "keys", 98623046, 0)


def test_the_records_of_the_cpp_client() -> None:
    # rocketmq-client-cpp 2.x's TraceUtil: empty text where Java writes null, keys "dKey" when a
    # consumed message has none, and a 6-field SubAfter (no context code, no time).
    body = ("Pub\x011700000000000\x01DefaultRegion\x01PG\x01T\x01ID1\x01\x01\x01127.0.0.1:10911\x013"
            "\x012\x010\x01OFF1\x01true\x02"
            "SubBefore\x011700000000005\x01DefaultRegion\x01CG\x01REQ\x01ID1\x010\x01dKey\x02"
            "SubAfter\x01REQ\x01ID1\x011\x01true\x01dKey\x02")
    pub, before, after = decode(body)
    assert (pub.tags, pub.keys, pub.offset_msg_id, pub.success) == ("", "", "OFF1", True)
    assert (before.group, before.request_id, before.keys) == ("CG", "REQ", "dKey")
    assert (after.request_id, after.cost_time, after.success, after.context_code, after.timestamp) == \
        ("REQ", 1, True, 0, 0)
