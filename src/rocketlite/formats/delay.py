"""Delay levels (seed S19, RocketMQ's ``messageDelayLevel``): parsing the level table and the
deliver-time math shared by the store (the ConsumeQueue tag code of a ``SCHEDULE_TOPIC_XXXX``
record is its deliver time, so the schedule service scans a level's queue without reading the
CommitLog) and the broker's schedule service.

The table is a space-separated list of ``<number><unit>``, unit ``s``, ``m``, ``h`` or ``d``:
level 1 is the first entry. RocketMQ's default::

    1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h

Pure: no I/O, so the store (L1) and the broker (L3) compute exactly the same deliver times.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
SCHEDULE_TOPIC_BYTES = SCHEDULE_TOPIC.encode()
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
MAX_LEVELS = 1024  # one ConsumeQueue per level: a bound, not a RocketMQ rule
UNKNOWN_LEVEL_DELAY_MS = 1000  # Java's computeDeliverTimestamp for a level not in the table

UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_ENTRY = re.compile(r"([0-9]{1,12})([smhd])", re.ASCII)


class DelayLevelError(ValueError):
    """A ``messageDelayLevel`` string that cannot be parsed; the message names the entry."""


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """The delay of each level in ms (index 0 is level 1). Raises ``DelayLevelError`` for an
    empty table, an entry that is not ``<digits><s|m|h|d>``, or more than ``MAX_LEVELS``.

    Stricter than Java's ``parseDelayLevel`` (which logs and keeps a partial table): a typo in a
    config file should stop the broker, not silently shift every level after it."""
    entries = text.split()
    if not entries:
        raise DelayLevelError("messageDelayLevel is empty: at least one level like '1s' is needed")
    if len(entries) > MAX_LEVELS:
        raise DelayLevelError(f"messageDelayLevel has {len(entries)} levels, at most {MAX_LEVELS}")
    out: list[int] = []
    for i, entry in enumerate(entries, 1):
        m = _ENTRY.fullmatch(entry)
        if m is None:
            raise DelayLevelError(f"messageDelayLevel entry {i} {entry[:40]!r}: expected a number "
                                  "followed by s, m, h or d, like '5s' or '2h'")
        out.append(int(m.group(1)) * UNIT_MS[m.group(2)])
    return tuple(out)


def format_delay_levels(levels_ms: Sequence[int]) -> str:
    """The inverse of ``parse_delay_levels`` (largest unit that divides each delay)."""
    parts = []
    for ms in levels_ms:
        for unit in ("d", "h", "m", "s"):
            if ms % UNIT_MS[unit] == 0:
                parts.append(f"{ms // UNIT_MS[unit]}{unit}")
                break
        else:
            raise DelayLevelError(f"a delay of {ms} ms is not a whole number of seconds")
    return " ".join(parts)


def clamp_level(level: int, levels_ms: Sequence[int]) -> int:
    """A requested level as stored: above the table's maximum → the maximum (Java clamps too);
    0 or below → 0 (not delayed)."""
    if level <= 0:
        return 0
    return min(level, len(levels_ms))


def parse_level(value: str | bytes | None) -> int:
    """The DELAY property as an int; 0 when absent or not a number (Java's parseInt would throw,
    and the record is then treated as undelayed)."""
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def deliver_time_ms(level: int, store_timestamp: int, levels_ms: Sequence[int]) -> int:
    """Java's ``computeDeliverTimestamp``: store time + the level's delay (1 s for a level
    outside the table)."""
    if 1 <= level <= len(levels_ms):
        return store_timestamp + levels_ms[level - 1]
    return store_timestamp + UNKNOWN_LEVEL_DELAY_MS


def schedule_tags_code(delay_value: str | bytes | None, store_timestamp: int,
                       levels_ms: Sequence[int]) -> int | None:
    """The ConsumeQueue tag code of a ``SCHEDULE_TOPIC_XXXX`` record (Java's
    ``checkMessageAndReturnSize``): its deliver time, or None when the record has no positive
    DELAY (then the ordinary TAGS hash applies)."""
    level = clamp_level(parse_level(delay_value), levels_ms)
    if level <= 0:
        return None
    return deliver_time_ms(level, store_timestamp, levels_ms)
