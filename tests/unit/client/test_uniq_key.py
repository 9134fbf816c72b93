"""UNIQ_KEY ids as ``MessageClientIDSetter`` makes them, including the wrap of its time field."""

from __future__ import annotations

import datetime as dt
import struct

import pytest

from rocketlite.client.message import UniqKeyGenerator, month_bounds


def _java_int(value: int) -> int:
    """Java's ``(int)`` cast of a long: the low 32 bits, read as signed."""
    return (value + 2**31) % 2**32 - 2**31


@pytest.mark.parametrize("days", [0.0, 3.5, 24.8, 24.9, 30.9])
def test_the_time_field_is_the_low_32_bits_of_ms_since_the_month_start(days: float) -> None:
    start = dt.datetime(2026, 12, 1)  # local time, as the generator reads it
    since_ms = int(days * 86_400_000)
    now = start.timestamp() + since_ms / 1000
    key = UniqKeyGenerator(b"\x0a\x00\x00\x07").at(now * 1000)
    assert len(key) == 32 and key.startswith("0A000007")
    field = struct.unpack(">i", bytes.fromhex(key[20:28]))[0]
    assert field == _java_int(since_ms)  # negative past 2^31 ms (day 24.86), never an error


def test_keys_of_one_generator_differ_and_count_up() -> None:
    gen = UniqKeyGenerator()
    now_ms = dt.datetime(2026, 11, 25, 21).timestamp() * 1000
    keys = [gen.at(now_ms) for _ in range(3)] + gen.many(2)
    counters = [int(k[28:], 16) for k in keys]
    assert [(c - counters[0]) & 0xFFFF for c in counters] == [0, 1, 2, 3, 4]
    assert len(set(keys)) == 5


def test_the_clock_and_the_month_roll() -> None:
    gen = UniqKeyGenerator()
    start, nxt = month_bounds(dt.datetime.now().timestamp() * 1000)
    before = dt.datetime.now().timestamp() * 1000
    key = gen.next()
    after = dt.datetime.now().timestamp() * 1000
    field = int(key[20:28], 16)
    assert int(before - start) - 1 <= field <= int(after - start) + 1  # ms since this month began
    # the next month: the time field starts again from its first day
    later = gen.at(nxt + 5)
    assert int(later[20:28], 16) == 5
    assert month_bounds(nxt + 5)[0] == nxt
