"""The compiled single-message encoder against the pure one in ``formats/record_encode``:
``check_singles`` stops at the same message with the same total on runs of good and bad messages
(unknown topics, NUL in properties, long bodies, IPv6 hosts, fields out of range, wrong types),
and ``encode_singles`` writes the same bytes, takes the same queue offsets and gives back the same
results for any messages the checks accept, any room left in the segment."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.formats import message_record as rec
from rocketlite.formats import record_encode as ref
from rocketlite.formats.properties import encode_properties
from rocketlite.store.message import MessageToStore
from strategies import i32, i64

C = twin("rocketlite.formats._encode_c")
TOPICS = {"TopicA": b"TopicA", "t" * 128: b"t" * 128, "x" * 127: b"x" * 127}
V4, V6 = b"\x0a\0\0\x01", bytes(range(16))


@st.composite
def messages(draw: st.DrawFn, good: bool) -> MessageToStore:
    props: dict[str, str] = {}
    if draw(st.booleans()):
        props["TAGS"] = draw(st.sampled_from(["TagA", "", "\u00e9t\u00e9"]))
    if draw(st.booleans()):
        props["KEYS"] = "k1 k2"
    text = encode_properties(props)
    m = MessageToStore(
        topic=draw(st.sampled_from(sorted(TOPICS))), body=draw(st.binary(max_size=64)),
        queue_id=draw(st.integers(0, 3)), flag=draw(i32), properties=text,
        sys_flag=draw(st.sampled_from([0, 0, 0x4, 0x8, 0xC, 0x2, 0x10, 0x20])),
        born_timestamp=draw(i64), born_host=draw(st.sampled_from([V4, V4, V6])),
        born_port=draw(i32), reconsume_times=draw(i32), prepared_transaction_offset=draw(i64),
    )
    if not good and draw(st.integers(0, 2)) == 0:
        setattr(m, *draw(st.sampled_from(NOT_PLAIN)))
    return m


# What check_singles leaves to the caller's full check: each stops the walk on both paths.
NOT_PLAIN = [
    ("topic", "Unknown"), ("topic", b"TopicA"), ("properties", "a\x01\x00\x02"),
    ("properties", "P" * 40000), ("properties", b"TAGS\x01a"), ("body", b"b" * 300),
    ("body", bytearray(b"ab")), ("queue_id", 65536), ("queue_id", -1), ("queue_id", True),
    ("flag", 2**31), ("born_port", -(2**31) - 1), ("reconsume_times", 2**40),
    ("born_timestamp", 2**63), ("sys_flag", 2**31), ("prepared_transaction_offset", -(2**63) - 1),
    ("born_host", b"\1\2\3"), ("born_host", V6), ("born_host", "10.0.0.1"),
]


@pytest.mark.parametrize(("field", "value"), NOT_PLAIN)
def test_check_singles_stops_at_what_is_not_plain(field: str, value: object) -> None:
    msgs = [MessageToStore("TopicA", b"body", properties="TAGS\x01a\x02") for _ in range(4)]
    setattr(msgs[2], field, value)
    size = rec.record_size(4, 6, 7)
    for f in (C.check_singles, ref._check_singles_py):
        assert f(msgs, 0, dict(TOPICS), 200, 1 << 20, 0) == (2, 2 * size)
        assert f(msgs, 3, dict(TOPICS), 200, 1 << 20, 0) == (4, size)


def outcome(f: Any, *args: Any) -> object:
    try:
        return f(*args)
    except Exception as e:  # noqa: BLE001 - the twins must fail alike
        return type(e)


@given(st.lists(messages(False), max_size=8), st.data(), st.sampled_from([0, 0x20]))
def test_check_singles(msgs: list[MessageToStore], d: st.DataObject, host_flag: int) -> None:
    start = d.draw(st.integers(0, len(msgs)))
    max_body = d.draw(st.sampled_from([200, 64]))
    max_record = d.draw(st.sampled_from([1 << 20, 400]))
    args = (msgs, start, dict(TOPICS), max_body, max_record, host_flag)
    assert outcome(C.check_singles, *args) == outcome(ref._check_singles_py, *args)


@given(st.lists(messages(True), max_size=8), st.data(), st.sampled_from([0, 0x20]),
       st.sampled_from([V4, V6]))
def test_encode_singles(msgs: list[MessageToStore], d: st.DataObject, host_flag: int,
                        store_host: bytes) -> None:
    lo = d.draw(st.integers(0, len(msgs)))
    table = {("TopicA", q): d.draw(st.integers(0, 2**40)) for q in range(d.draw(st.integers(0, 3)))}
    free = d.draw(st.integers(0, 2000))
    args = (lo, d.draw(st.integers(0, 2**50)), free, d.draw(i64), store_host, d.draw(i32),
            host_flag, ref.AppendResult)
    t_c, t_py = dict(table), dict(table)
    got = C.encode_singles(msgs, lo, t_c, *args[1:])
    want = ref._encode_singles_py(msgs, lo, t_py, *args[1:])
    assert got == want and t_c == t_py
    assert all(type(r) is ref.AppendResult for r in got[2])
    assert len(got[0]) == sum(r.size for r in got[2]) <= free


def test_encoded_records_read_back() -> None:
    """Records decode to what was sent, with queue offsets from the table and a V2 topic, an IPv6
    born host and a transactional half (no queue offset) among them."""
    msgs = [
        MessageToStore("TopicA", b"one", 1, 7, "TAGS\x01a\x02", born_host=V4, born_port=9),
        MessageToStore("t" * 128, b"two", 0, 0, "", born_host=V6),
        MessageToStore("TopicA", b"three", 1, sys_flag=0x4),
        MessageToStore("TopicA", b"four", 1),
    ]
    for f in (C.encode_singles, ref._encode_singles_py):
        table = {("TopicA", 1): 5}
        data, hi, res = f(msgs, 0, table, 1000, 1 << 20, 42, V4, 10911, 0, ref.AppendResult)
        assert hi == 4 and table == {("TopicA", 1): 7, ("t" * 128, 0): 1}
        assert [r.queue_offset for r in res] == [5, 0, 0, 6]
        pos = 0
        for m, r in zip(msgs, res, strict=True):
            got = rec.decode_record(data, pos, len(data), verify_crc=True)
            assert (got.topic, got.body, got.queue_offset, got.commit_log_offset) == \
                (m.topic, m.body, r.queue_offset, 1000 + pos)
            assert (got.store_timestamp, got.born_host, got.properties_text) == \
                (42, m.born_host, m.properties)
            pos += r.size
        # A run stops at the first record that does not fit, taking no queue offset for it.
        two = res[0].size + res[1].size
        table = {}
        data, hi, res = f(msgs, 0, table, 0, two + res[2].size - 1, 42, V4, 1, 0,
                          ref.AppendResult)
        assert (hi, len(data), table) == (2, two, {("TopicA", 1): 1, ("t" * 128, 0): 1})
