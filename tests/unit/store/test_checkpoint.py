"""StoreCheckpoint: the 4 KiB checkpoint file, its five longs, reopen, repair of a short file."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from rocketlite.formats.checkpoint_layout import CHECKPOINT, CHECKPOINT_FILE_SIZE, CHECKPOINT_USED_SIZE
from rocketlite.store.checkpoint import RECOVERY_SLACK_MS, StoreCheckpoint

VALUES = (1_700_000_000_123, 1_700_000_000_456, 1_700_000_000_789, 11, 123_456_789)
NAMES = ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
         "master_flushed_offset", "confirm_phy_offset")


def set_all(cp: StoreCheckpoint, values: tuple[int, ...]) -> None:
    for name, v in zip(NAMES, values, strict=True):
        setattr(cp, name, v)


def get_all(cp: StoreCheckpoint) -> tuple[int, ...]:
    return tuple(getattr(cp, name) for name in NAMES)


def test_layout_sizes(tmp_path: Path) -> None:
    assert CHECKPOINT.size == CHECKPOINT_USED_SIZE == 40
    assert CHECKPOINT_FILE_SIZE == 4096
    path = tmp_path / "checkpoint"
    with StoreCheckpoint(path) as cp:
        assert get_all(cp) == (0, 0, 0, 0, 0)
    assert path.stat().st_size == 4096


def test_values_survive_reopen_big_endian(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    cp = StoreCheckpoint(path)
    set_all(cp, VALUES)
    cp.flush()
    raw = path.read_bytes()
    assert raw[:40] == struct.pack(">qqqqq", *VALUES)
    assert raw[40:] == b"\0" * (4096 - 40)
    cp.close()
    cp.close()  # a second close does nothing
    assert cp.closed
    with StoreCheckpoint(path) as again:
        assert get_all(again) == VALUES
        assert "physic_msg_timestamp=1700000000123" in repr(again)


def test_close_flushes(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    with StoreCheckpoint(path) as cp:
        cp.logics_msg_timestamp = 42
    with StoreCheckpoint(path) as cp:
        assert cp.logics_msg_timestamp == 42


def test_flush_after_close_is_refused(tmp_path: Path) -> None:
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    cp.close()
    with pytest.raises(ValueError, match="closed"):
        cp.flush()


def test_min_timestamp_as_rocketmq(tmp_path: Path) -> None:
    assert RECOVERY_SLACK_MS == 3000
    with StoreCheckpoint(tmp_path / "checkpoint") as cp:
        cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 100_000, 90_000, 95_000
        # getMinTimestamp: min(physic, logics) - 3000
        assert cp.min_timestamp(index_enabled=False) == 87_000
        # getMinTimestampIndex: min(getMinTimestamp(), index) -- the index is not moved back
        assert cp.min_timestamp(index_enabled=True) == 87_000
        cp.index_msg_timestamp = 50_000
        assert cp.min_timestamp(index_enabled=True) == 50_000
        assert cp.min_timestamp(index_enabled=False) == 87_000
        cp.physic_msg_timestamp = 2_000  # floor 0
        assert cp.min_timestamp(index_enabled=False) == 0
        assert cp.min_timestamp(index_enabled=True) == 0


@pytest.mark.parametrize(("size", "expected"), [
    (1, (0, 0, 0, 0, 0)),
    (8, (*VALUES[:1], 0, 0, 0, 0)),
    (20, (*VALUES[:2], 0, 0, 0)),  # the third field is cut in half: read as 0
    (24, (*VALUES[:3], 0, 0)),
    (40, VALUES),
    (1000, VALUES),
])
def test_short_file_is_extended_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                               size: int, expected: tuple[int, ...]) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes((struct.pack(">qqqqq", *VALUES) + b"\0" * 4096)[:size])
    with caplog.at_level(logging.WARNING, logger="rocketlite.store.checkpoint"):
        cp = StoreCheckpoint(path)
    assert any("checkpoint" in r.getMessage() and str(size) in r.getMessage() for r in caplog.records)
    assert path.stat().st_size == 4096
    assert get_all(cp) == expected
    cp.close()
    # the repaired file holds what was read: no half field left behind
    assert path.read_bytes()[:40] == struct.pack(">qqqqq", *expected)
    with StoreCheckpoint(path) as again:
        assert get_all(again) == expected


def test_new_file_logs_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rocketlite.store.checkpoint"):
        StoreCheckpoint(tmp_path / "checkpoint").close()
    assert not caplog.records


def test_negative_and_large_values(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    values = (-1, (1 << 63) - 1, -(1 << 63), 0, 1)
    with StoreCheckpoint(path) as cp:
        set_all(cp, values)
    with StoreCheckpoint(path) as cp:
        assert get_all(cp) == values
