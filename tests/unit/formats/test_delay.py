"""messageDelayLevel parsing and the deliver-time math (formats/delay.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.formats.delay import (
    DEFAULT_DELAY_LEVELS,
    DelayLevelError,
    clamp_level,
    deliver_time_ms,
    format_delay_levels,
    parse_delay_levels,
    parse_level,
    schedule_tags_code,
)


def test_default_table_is_rocketmqs() -> None:
    levels = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    assert len(levels) == 18
    assert levels[0] == 1000 and levels[4] == 60_000 and levels[-1] == 7_200_000


def test_units_and_whitespace() -> None:
    assert parse_delay_levels("  1s\t2m 3h  1d ") == (1000, 120_000, 10_800_000, 86_400_000)


@pytest.mark.parametrize("text", ["", "   ", "1x", "s", "1.5s", "-1s", "1S", "1s 2", "10ms"])
def test_bad_tables_are_refused_naming_the_entry(text: str) -> None:
    with pytest.raises(DelayLevelError):
        parse_delay_levels(text)


def test_error_names_the_entry() -> None:
    with pytest.raises(DelayLevelError, match="entry 2 '5x'"):
        parse_delay_levels("1s 5x")


@given(st.lists(st.tuples(st.integers(1, 10**6), st.sampled_from("smhd")), min_size=1,
                max_size=40))
def test_format_parse_round_trip(entries: list[tuple[int, str]]) -> None:
    text = " ".join(f"{n}{u}" for n, u in entries)
    levels = parse_delay_levels(text)
    assert len(levels) == len(entries)
    assert parse_delay_levels(format_delay_levels(levels)) == levels


@given(st.integers(-5, 100), st.integers(0, 2**41))
def test_deliver_time_is_store_time_plus_clamped_delay(level: int, store_ts: int) -> None:
    levels = parse_delay_levels("1s 2s 3s")
    code = schedule_tags_code(str(level), store_ts, levels)
    if level <= 0:
        assert code is None
    else:
        assert code == store_ts + levels[min(level, 3) - 1]
        assert code == deliver_time_ms(clamp_level(level, levels), store_ts, levels)


def test_level_helpers() -> None:
    levels = (1000, 2000)
    assert clamp_level(5, levels) == 2 and clamp_level(0, levels) == 0
    assert parse_level(b"3") == 3 and parse_level("x") == 0 and parse_level(None) == 0
    assert deliver_time_ms(9, 100, levels) == 1100  # outside the table: Java's 1 s
    assert schedule_tags_code(None, 5, levels) is None
