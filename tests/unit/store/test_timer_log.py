"""TimerLog: appends across segments with BLANKs, reads, recovery of positions and torn tails,
and retention."""

from __future__ import annotations

from pathlib import Path

from rocketlite.formats.timer import (
    BLANK_MAGIC_CODE,
    MIN_BLANK_LEN,
    TIMER_LOG_BLANK,
    TIMER_LOG_UNIT_SIZE,
    TimerLogUnit,
    encode_unit,
)
from rocketlite.store.timer_log import TimerLog

UNITS_PER_FILE = 4
FILE_SIZE = UNITS_PER_FILE * TIMER_LOG_UNIT_SIZE + MIN_BLANK_LEN + 10  # 4 units, then a blank


def unit(i: int, prev: int = -1, delayed: int = 5000, write: int = 1000) -> bytes:
    return encode_unit(prev, 1, write, delayed, 1000 + i, 100 + i, 0)


def fill(tlog: TimerLog, n: int, delayed: int = 5000) -> list[int]:
    return [tlog.append(unit(i, delayed=delayed), delayed) for i in range(n)]


def test_append_rolls_segments_with_a_blank(tmp_path: Path) -> None:
    tlog = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    positions = fill(tlog, 10)
    assert tlog.units_per_file == UNITS_PER_FILE
    assert positions[:5] == [0, 52, 104, 156, FILE_SIZE]
    assert len(tlog.files.files) == 3
    first = tlog.files.files[0]
    assert TIMER_LOG_BLANK.unpack_from(first.mm, 4 * 52) == (FILE_SIZE - 4 * 52, 0, BLANK_MAGIC_CODE)
    for i, pos in enumerate(positions):
        u = tlog.read_unit(pos)
        assert u is not None and u.commit_log_offset == 1000 + i and u.size_py == 100 + i
    assert tlog.read_unit(tlog.max_offset) is None
    assert tlog.last_unit_pos(0) == 3 * 52
    assert [p for p, _ in tlog.units_from(0)] == positions
    tlog.close()


def test_reopen_recovers_positions_and_replays_from_the_start_given(tmp_path: Path) -> None:
    tlog = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    positions = fill(tlog, 7)
    end = tlog.max_offset
    tlog.close()
    again = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    again.load()
    seen: list[tuple[int, TimerLogUnit]] = []
    assert again.recover(positions[5], lambda p, u: seen.append((p, u))) == end
    assert [p for p, _ in seen] == positions[5:]
    assert again.append(unit(99), 1) == end  # appends continue where the log ended
    again.close()


def test_recover_cuts_a_torn_tail(tmp_path: Path) -> None:
    tlog = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    positions = fill(tlog, 7)
    mf = tlog.files.files[1]
    mf.mm[52 + 12: 52 + 16] = b"\xff\xff\xff\xff"  # unit 6 gets a bad magic: torn
    tlog.close()
    again = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    again.load()
    seen: list[int] = []
    assert again.recover(0, lambda p, u: seen.append(p)) == positions[5]
    assert seen == positions[:5]
    assert again.read_unit(positions[5]) is None
    assert again.append(unit(50), 1) == positions[5]
    again.close()


def test_recover_an_empty_log(tmp_path: Path) -> None:
    tlog = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    tlog.load()
    assert tlog.recover(12345, lambda p, u: None) == 0
    assert tlog.append(unit(0), 1) == 0
    tlog.close()


def test_recover_from_a_position_inside_a_unit_replays_its_segment(tmp_path: Path) -> None:
    tlog = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    positions = fill(tlog, 6)
    tlog.close()
    again = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    again.load()
    seen: list[int] = []
    again.recover(FILE_SIZE + 7, lambda p, u: seen.append(p))
    assert seen == positions[4:]
    again.close()


def test_flush_reports_the_durable_position(tmp_path: Path) -> None:
    tlog = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    fill(tlog, 6)
    assert tlog.flush() == tlog.max_offset == FILE_SIZE + 2 * 52
    tlog.close()


def test_delete_expired_keeps_undelivered_and_the_last_segment(tmp_path: Path) -> None:
    tlog = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    for i in range(4):
        tlog.append(unit(i, delayed=5000 + i * 1000), 5000 + i * 1000)  # segment 0: up to 8000
    for i in range(4):
        tlog.append(unit(i, delayed=20_000), 20_000)  # segment 1
    tlog.append(unit(0, delayed=1000), 1000)  # segment 2 (the last)
    assert tlog.delete_expired(8000, 0, 10_000) == 0  # slot 8000 not delivered yet
    assert tlog.delete_expired(8001, 0, 10_000) == 1
    assert tlog.min_offset == FILE_SIZE
    assert tlog.delete_expired(10**9, 0, 10_000) == 1  # never the last one
    assert len(tlog.files.files) == 1
    assert not (tmp_path / "timerlog" / f"{0:020d}").exists()
    tlog.close()


def test_delete_expired_bounds_loaded_segments_by_write_time_and_commitlog(tmp_path: Path) -> None:
    tlog = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    for i in range(5):
        tlog.append(unit(i, delayed=3000, write=1000), 3000)
    tlog.close()
    again = TimerLog(tmp_path / "timerlog", FILE_SIZE)
    again.load()
    again.recover(0, lambda p, u: None)
    # Unknown slots: bounded by the last unit's write time + the roll window (1000 + 5000).
    assert again.delete_expired(5000, 0, 5000) == 0
    # ... unless its messages left the CommitLog (5.x's rule): offsets 1000..1003 < 2000.
    assert again.delete_expired(5000, 2000, 5000) == 1
    again.close()
