"""The admin commands' timestamps (``-s``/``-e``): milliseconds, or mqadmin's
``yyyy-MM-dd#HH:mm:ss:SSS`` read in the local time zone as Java's ``SimpleDateFormat`` reads it."""

from __future__ import annotations

import calendar
import contextlib
import os
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.admin import AdminError, format_timestamp, parse_timestamp


@pytest.fixture
def tz(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's time zone set by TZ for the test, restored after."""
    yield
    monkeypatch.undo()
    time.tzset()


def set_tz(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("TZ", name)
    time.tzset()


def test_milliseconds_pass_through() -> None:
    assert parse_timestamp("0") == 0
    assert parse_timestamp("1795780800123") == 1795780800123
    assert parse_timestamp(" 42 ") == 42


def test_now_is_the_current_time() -> None:
    before = int(time.time() * 1000)
    got = parse_timestamp(" NOW ")
    assert before <= got <= int(time.time() * 1000)


def test_the_date_form_is_local_time(monkeypatch: pytest.MonkeyPatch, tz: None) -> None:
    utc = calendar.timegm((2026, 11, 27, 12, 0, 0)) * 1000 + 123
    set_tz(monkeypatch, "UTC")
    assert parse_timestamp("2026-11-27#12:00:00:123") == utc
    set_tz(monkeypatch, "Etc/GMT-8")  # UTC+8 (POSIX sign), no daylight saving
    assert parse_timestamp("2026-11-27#12:00:00:123") == utc - 8 * 3600 * 1000
    assert format_timestamp(utc) == "2026-11-27#20:00:00:123"


@pytest.mark.parametrize("bad", [
    "", "yesterday", "2026-11-27", "2026-11-27 12:00:00", "2026-11-27#12:00:00",
    "2026-11-27#12:00:00.123", "2026-13-01#00:00:00:000", "2026-02-30#00:00:00:000",
    "2026-11-27#25:00:00:000", "-5", "1e9", "1" * 16,
])
def test_other_forms_are_refused_with_the_accepted_ones(bad: str) -> None:
    with pytest.raises(AdminError, match=r"yyyy-MM-dd#HH:mm:ss:SSS|not a valid date"):
        parse_timestamp(bad)


@contextlib.contextmanager
def zone(name: str) -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


@given(st.integers(min_value=0, max_value=4_102_444_800_000))  # 1970 to 2100
def test_format_and_parse_round_trip(ms: int) -> None:
    with zone("Etc/GMT-8"):  # UTC+8 at all times: no local time is ambiguous
        assert parse_timestamp(format_timestamp(ms)) == ms
