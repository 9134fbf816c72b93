from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.common.errors import CorruptRecordError, FormatError
from rocketlite.formats import message_record as rec
from rocketlite.formats.message_id import decode_message_id, encode_message_id
from rocketlite.formats.properties import decode_properties, encode_properties
from strategies import records


@given(records())
def test_record_round_trip(m: rec.MessageRecord) -> None:
    data = m.encode()
    assert len(data) == m.total_size
    assert rec.decode_record(data) == m
    assert rec.decode_record(data, verify_crc=False) == m
    assert rec.decode_record(memoryview(data), 0, len(data)) == m
    assert rec.check_record(data, 0, len(data)) == len(data)
    s = rec.summarize_record(data, 0, len(data))
    assert s is not None and s.topic == m.topic and s.queue_offset == m.queue_offset
    assert rec.read_store_timestamp(data, 0) == m.store_timestamp


def _one() -> bytes:
    return rec.encode_record(
        topic=b"TopicTest", body=b"hello", properties=b"TAGS\x01TagA\x02", queue_id=1, flag=0,
        queue_offset=7, commit_log_offset=0, sys_flag=0, born_timestamp=1, born_host=b"\x7f\0\0\1",
        born_port=1, store_timestamp=2, store_host=b"\x7f\0\0\1", store_port=10911)


def test_v1_for_short_topics_and_v2_for_long() -> None:
    assert rec.decode_record(_one()).magic == rec.MAGIC_V1  # type: ignore[union-attr]
    long = rec.encode_record(
        topic=b"t" * 128, body=b"", properties=b"", queue_id=0, flag=0, queue_offset=0,
        commit_log_offset=0, sys_flag=0, born_timestamp=0, born_host=b"\0" * 4, born_port=0,
        store_timestamp=0, store_host=b"\0" * 4, store_port=0)
    m = rec.decode_record(long)
    assert m is not None and m.magic == rec.MAGIC_V2 and m.topic == "t" * 128


def test_body_crc_is_masked_to_31_bits() -> None:
    assert rec.body_crc(b"hello") == 0x3610A686 & 0x7FFFFFFF


def test_corruptions_are_detected() -> None:
    good = bytearray(_one())
    bad_crc = bytearray(good)
    bad_crc[-30] ^= 0xFF  # inside the body or topic
    with pytest.raises(CorruptRecordError):
        rec.check_record(bytes(bad_crc), 0, len(bad_crc))
    bad_magic = bytearray(good)
    bad_magic[4] ^= 0x01
    with pytest.raises(CorruptRecordError, match="magic"):
        rec.decode_record(bytes(bad_magic))
    with pytest.raises(CorruptRecordError):
        rec.check_record(bytes(good[:50]), 0, 50)  # truncated
    huge = bytearray(good)
    huge[0:4] = (10**6).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="exceeds"):
        rec.check_record(bytes(huge), 0, len(huge))


def test_blank_record() -> None:
    blank = rec.encode_blank(100) + bytes(92)
    assert rec.check_record(blank, 0, 100) == 0
    assert rec.decode_record(blank) is None


def test_properties_round_trip_and_skips_malformed() -> None:
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}
    text = encode_properties(props)
    assert text == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC\x02"
    assert decode_properties(text) == props
    assert decode_properties("a\x02\x01v\x02k\x01\x02ok\x01yes\x02") == {"ok": "yes"}


def test_message_id_round_trip() -> None:
    mid = encode_message_id(b"\x7f\x00\x00\x01", 10911, 131)
    assert mid == "7F00000100002A9F0000000000000083"
    assert decode_message_id(mid) == (b"\x7f\x00\x00\x01", 10911, 131)
    v6 = encode_message_id(bytes(16), 1, 2)
    assert len(v6) == 56 and decode_message_id(v6) == (bytes(16), 1, 2)
    with pytest.raises(FormatError):
        decode_message_id("zz")
    with pytest.raises(FormatError):
        decode_message_id("00" * 5)


@given(records(), st.data())
def test_check_record_fast_and_full_paths_agree_on_damage(m: rec.MessageRecord,
                                                          data: st.DataObject) -> None:
    """Damage to the body is caught (CRC), on the one-unpack path recovery uses for IPv4/V1
    records as on the full walk; a NUL written into the topic or properties is not damage to the
    frame: both paths keep the record and decode it byte for byte."""
    raw = bytearray(m.encode())
    assert rec.check_record(bytes(raw), 0, len(raw)) == len(raw)
    assert rec.check_record(memoryview(raw), 0, len(raw)) == len(raw)  # the full walk
    topic_prefix = 2 if m.magic == rec.MAGIC_V2 else 1
    body_at = (len(raw) - len(m.properties_text.encode()) - 2 - len(m.topic.encode())
               - topic_prefix - len(m.body))
    assert raw[body_at : body_at + len(m.body)] == m.body
    if m.body:
        i = data.draw(st.integers(0, len(m.body) - 1))
        raw[body_at + i] ^= 0x5A
        with pytest.raises(CorruptRecordError):
            rec.check_record(bytes(raw), 0, len(raw))
        with pytest.raises(CorruptRecordError, match="CRC"):
            rec.decode_record(bytes(raw), 0, len(raw))
        raw[body_at + i] ^= 0x5A
    tail = len(m.topic.encode()) + 2 + len(m.properties_text.encode())
    j = data.draw(st.integers(len(raw) - tail, len(raw) - 1))
    props_len_at = len(raw) - len(m.properties_text.encode()) - 2
    if j not in (props_len_at, props_len_at + 1):  # the length itself is checked differently
        raw[j] = 0
        assert rec.check_record(bytes(raw), 0, len(raw)) == len(raw)
        assert rec.check_record(memoryview(raw), 0, len(raw)) == len(raw)
        odd = rec.decode_record(bytes(raw), 0, len(raw))
        assert odd is not None and odd.encode() == bytes(raw)


def _placed(m: rec.MessageRecord, pos: int) -> tuple[bytearray, int, int]:
    """The record at ``pos`` of a zeroed buffer with room after it; (buffer, size, where its
    topic and properties begin)."""
    raw = m.encode()
    buf = bytearray(pos + len(raw) + rec.TEAR_UNIT)
    buf[pos : pos + len(raw)] = raw
    content_at = pos + len(raw) - len(m.properties_text.encode()) - 2 - len(m.topic.encode())
    return buf, len(raw), content_at


@given(records(), st.integers(0, 3 * rec.TEAR_UNIT))
def test_a_whole_record_is_never_a_torn_tail(m: rec.MessageRecord, pos: int) -> None:
    """What the store writes (no NUL in its topic or properties) never looks torn, wherever it
    lies against the tear blocks."""
    buf, size, _ = _placed(m, pos)
    assert not rec.torn_tail(buf, pos, size)


@given(records(), st.integers(0, 3 * rec.TEAR_UNIT), st.data())
def test_zeroed_tail_blocks_over_the_topic_or_properties_are_a_torn_tail(
        m: rec.MessageRecord, pos: int, data: st.DataObject) -> None:
    """A write cut at a tear boundary inside the topic or the properties leaves a frame that
    checks (sizes, body CRC) with zeros from that boundary on: ``torn_tail`` says so, unless the
    zeros hold no topic or property byte (an empty properties' length only)."""
    buf, size, content_at = _placed(m, pos)
    end = pos + size
    props_len = len(m.properties_text.encode())
    last_content = end - 1 if props_len else end - 3
    first = -(-content_at // rec.TEAR_UNIT) * rec.TEAR_UNIT
    boundaries = range(max(first, pos + 1), end, rec.TEAR_UNIT)
    if not boundaries:
        return  # no boundary inside this record's topic or properties
    cut = data.draw(st.sampled_from(boundaries))
    buf[cut:end] = bytes(end - cut)
    try:
        rec.check_record(bytes(buf), pos, len(buf))
    except CorruptRecordError:
        return  # a zeroed length field: the frame check already refuses it
    assert rec.torn_tail(buf, pos, size) == (cut <= last_content)
