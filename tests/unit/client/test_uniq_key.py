"""UNIQ_KEY ids as ``MessageClientIDSetter`` makes them, including the wrap of its time field."""

from __future__ import annotations

import datetime as dt
import struct

import pytest

from rocketlite.client import message
from rocketlite.client.message import UniqKeyGenerator


def _java_int(value: int) -> int:
    """Java's ``(int)`` cast of a long: the low 32 bits, read as signed."""
    return (value + 2**31) % 2**32 - 2**31


@pytest.mark.parametrize("days", [0.0, 3.5, 24.8, 24.9, 30.9])
def test_the_time_field_is_the_low_32_bits_of_ms_since_the_month_start(
    monkeypatch: pytest.MonkeyPatch, days: float
) -> None:
    start = dt.datetime(2026, 12, 1)  # local time, as the generator reads it
    since_ms = int(days * 86_400_000)
    now = start.timestamp() + since_ms / 1000
    monkeypatch.setattr(message.time, "time", lambda: now)
    key = UniqKeyGenerator(b"\x0a\x00\x00\x07").next()
    assert len(key) == 32 and key.startswith("0A000007")
    field = struct.unpack(">i", bytes.fromhex(key[20:28]))[0]
    assert field == _java_int(since_ms)  # negative past 2^31 ms (day 24.86), never an error


def test_keys_of_one_generator_differ_and_count_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(message.time, "time", lambda: dt.datetime(2026, 11, 25, 21).timestamp())
    gen = UniqKeyGenerator()
    keys = gen.many(3)
    assert len(set(keys)) == 3
    counters = [int(k[28:], 16) for k in keys]
    assert [(c - counters[0]) & 0xFFFF for c in counters] == [0, 1, 2]
