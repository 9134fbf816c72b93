"""The timer wheel's byte layouts (TimerLog unit, slot, timercheck) match their tables and 5.x."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.formats import timer as tf

I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
POS = st.integers(-1, (1 << 62))


def test_sizes_match_the_tables() -> None:
    assert tf.TIMER_LOG_UNIT.size == tf.TIMER_LOG_UNIT_SIZE == 4 + 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8
    assert tf.UNIT_PRE_SIZE_FOR_MSG == 4 + 8 + 4 + 8 + 4  # where commitLogOffset starts
    assert tf.TIMER_LOG_BLANK.size == tf.MIN_BLANK_LEN == 4 + 8 + 4
    assert tf.SLOT.size == tf.SLOT_SIZE == 8 + 8 + 8 + 4 + 4
    assert tf.TIMER_CHECKPOINT.size == tf.TIMER_CHECKPOINT_USED_SIZE == 7 * 8
    assert tf.TIMER_CHECKPOINT_FILE_SIZE == 4096


def test_blank_magic_is_javas_expression() -> None:
    # Java: 0xBBCCDDEE ^ 1880681586 + 8 ('+' binds tighter), as a signed int.
    value = (0xBBCCDDEE ^ (1880681586 + 8)) & 0xFFFFFFFF
    assert struct.unpack(">i", struct.pack(">I", value))[0] == tf.BLANK_MAGIC_CODE
    assert tf.BLANK_MAGIC_CODE & 0xFFFFFFFF == 0xCBD43194


def test_magic_flags() -> None:
    assert (tf.MAGIC_DEFAULT, tf.MAGIC_ROLL, tf.MAGIC_DELETE) == (1, 2, 4)
    assert all(tf.is_magic_ok(m) for m in range(16))
    assert not tf.is_magic_ok(16) and not tf.is_magic_ok(-1)


def test_unit_field_offsets() -> None:
    raw = tf.encode_unit(prev_pos=7, magic=3, write_time_ms=1000, delayed_time_ms=4000,
                         commit_log_offset=0x0102030405060708, size_py=99, topic_hash=-5)
    assert struct.unpack_from(">q", raw, tf.UNIT_PRE_SIZE_FOR_MSG)[0] == 0x0102030405060708
    assert struct.unpack_from(">i", raw, 24)[0] == 3000  # the delay as a delta
    assert raw[:4] == b"\x00\x00\x00\x34"


@given(POS, st.integers(0, 15), st.integers(0, 1 << 50), st.integers(0, (1 << 31) - 1), I64,
       I32, I32)
def test_unit_round_trip(prev: int, magic: int, write: int, delta: int, offset: int, size: int,
                         topic_hash: int) -> None:
    raw = tf.encode_unit(prev, magic, write, write + delta, offset, size, topic_hash)
    unit = tf.decode_unit(b"xx" + raw, 2)
    assert unit == tf.TimerLogUnit(52, prev, magic, write, delta, offset, size, topic_hash, 0)
    assert unit.delayed_time_ms == write + delta and unit.valid


def test_blank() -> None:
    raw = tf.encode_blank(123)
    assert len(raw) == tf.MIN_BLANK_LEN
    assert tf.TIMER_LOG_BLANK.unpack(raw) == (123, 0, tf.BLANK_MAGIC_CODE)


@given(st.sampled_from([100, 200, 500, 1000]), st.integers(0, 1 << 40), POS, POS, I32, I32)
def test_slot_round_trip(precision: int, units: int, first: int, last: int, num: int,
                         magic: int) -> None:
    slot = tf.Slot(units * precision, first, last, num, magic)
    raw = tf.encode_slot(slot, precision)
    assert struct.unpack_from(">q", raw)[0] == units  # stored in ticks (seconds at 1000 ms)
    assert tf.decode_slot(raw, 0, precision) == slot


def test_empty_slot() -> None:
    assert tf.EMPTY_SLOT.empty
    assert tf.Slot(-1, -1, -1, 0, 0) == tf.EMPTY_SLOT


@given(st.tuples(I64, I64, I64, I64, I64, I64, I64))
def test_checkpoint_round_trip(values: tuple[int, ...]) -> None:
    cp = tf.TimerCheckpointData(*values)
    raw = tf.encode_checkpoint(cp)
    assert len(raw) == 56
    assert tf.decode_checkpoint(raw) == cp
