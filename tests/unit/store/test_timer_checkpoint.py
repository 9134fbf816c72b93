"""TimerCheckpoint: the config/timercheck file round trip, a fresh file, the data version."""

from __future__ import annotations

import struct
from pathlib import Path

from rocketlite.formats.timer import TimerCheckpointData
from rocketlite.store.timer_checkpoint import TimerCheckpoint


def test_fresh_checkpoint_is_zero(tmp_path: Path) -> None:
    cp = TimerCheckpoint(tmp_path / "config" / "timercheck")
    assert not cp.existed and cp.data() == TimerCheckpointData()
    cp.close()
    assert (tmp_path / "config" / "timercheck").stat().st_size == 4096


def test_round_trip_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "timercheck"
    cp = TimerCheckpoint(path)
    cp.update(read_time_ms=1_700_000_000_000, log_flush_pos=5200, queue_offset=77)
    cp.flush()
    cp.close()
    raw = path.read_bytes()
    assert struct.unpack_from(">qqqq", raw) == (1_700_000_000_000, 5200, 77, 77)
    again = TimerCheckpoint(path)
    assert again.existed
    assert (again.last_read_time_ms, again.last_timer_log_flush_pos, again.last_timer_queue_offset,
            again.master_timer_queue_offset) == (1_700_000_000_000, 5200, 77, 77)
    assert again.counter == 1 and again.timestamp > 0
    again.close()


def test_data_version_moves_only_with_progress(tmp_path: Path) -> None:
    cp = TimerCheckpoint(tmp_path / "timercheck")
    cp.update(1000, 0, 1)
    cp.update(1000, 52, 1)  # only the log moved
    assert cp.counter == 1
    cp.update(2000, 52, 1)
    assert cp.counter == 2
    cp.close()


def test_close_without_flush_keeps_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "timercheck"
    cp = TimerCheckpoint(path)
    cp.update(1000, 52, 3)
    cp.flush()
    cp.update(9000, 104, 9)
    cp.close(flush=False)  # a crash
    again = TimerCheckpoint(path)
    assert (again.last_read_time_ms, again.last_timer_queue_offset) == (1000, 3)
    again.close()


def test_a_short_file_reads_what_it_has(tmp_path: Path) -> None:
    path = tmp_path / "timercheck"
    path.write_bytes(struct.pack(">qq", 1234, 52))
    cp = TimerCheckpoint(path)
    assert (cp.last_read_time_ms, cp.last_timer_log_flush_pos, cp.last_timer_queue_offset) == (
        1234, 52, 0)
    cp.close()
    assert path.stat().st_size == 4096
