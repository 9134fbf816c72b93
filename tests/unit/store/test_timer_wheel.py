"""TimerWheel: slots by time, turns of the wheel, revision during recovery, the size check and
the scan for slots pointing past the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketlite.common.errors import StoreError
from rocketlite.formats.timer import EMPTY_SLOT, SLOT_SIZE, Slot
from rocketlite.store.timer_wheel import IGNORE, TimerWheel

SLOTS = 100
P = 1000
T0 = 1_700_000_000_000


def wheel(tmp_path: Path, slots: int = SLOTS, precision: int = P) -> TimerWheel:
    return TimerWheel(tmp_path / "timerwheel", slots, precision)


def test_put_and_get_by_time(tmp_path: Path) -> None:
    w = wheel(tmp_path)
    assert (tmp_path / "timerwheel").stat().st_size == 2 * SLOTS * SLOT_SIZE
    assert w.get_slot(T0) is EMPTY_SLOT
    w.put_slot(T0, 10, 20, 2, 0)
    assert w.get_slot(T0) == Slot(T0, 10, 20, 2, 0)
    assert w.get_slot(T0 + 999) == Slot(T0, 10, 20, 2, 0)  # same tick
    assert w.get_slot(T0 + P).empty
    # One turn later (2 x slots ticks) the same slot holds another time: empty for T0's reader.
    later = T0 + 2 * SLOTS * P
    assert w.slot_index(later) == w.slot_index(T0)
    assert w.get_slot(later).empty
    w.put_slot(later, 5, 6, 1)
    assert w.get_slot(T0).empty and w.get_slot(later).last_pos == 6
    w.clear_slot(later)
    assert w.get_slot(later).empty
    w.close()


def test_slots_survive_reopen(tmp_path: Path) -> None:
    w = wheel(tmp_path)
    for i in range(5):
        w.put_slot(T0 + i * P, i, i + 100, i)
    w.close()
    again = wheel(tmp_path)
    assert [again.get_slot(T0 + i * P).last_pos for i in range(5)] == [100, 101, 102, 103, 104]
    again.close()


def test_a_wheel_of_another_size_is_refused(tmp_path: Path) -> None:
    wheel(tmp_path).close()
    with pytest.raises(StoreError, match="expected"):
        wheel(tmp_path, slots=SLOTS + 1)


def test_precision_below_a_second(tmp_path: Path) -> None:
    w = wheel(tmp_path, precision=100)
    w.put_slot(T0 + 100, 1, 2)
    assert w.get_slot(T0 + 150).last_pos == 2
    assert w.get_slot(T0).empty and w.get_slot(T0 + 200).empty
    w.close()


def test_revise_slot(tmp_path: Path) -> None:
    w = wheel(tmp_path)
    w.revise_slot(T0, IGNORE, 52, force=False)
    assert w.get_slot(T0).empty  # not forced: an empty slot stays empty
    w.revise_slot(T0, IGNORE, 52, force=True)
    assert w.get_slot(T0) == Slot(T0, 52, 52, 1)
    w.revise_slot(T0, IGNORE, 104, force=True)
    assert w.get_slot(T0) == Slot(T0, 52, 104, 2)
    w.revise_slot(T0, IGNORE, 104, force=True)  # replayed again: no double count
    assert w.get_slot(T0).num == 2
    w.close()


def test_check_phy_pos_finds_live_slots_past_the_log_end(tmp_path: Path) -> None:
    w = wheel(tmp_path)
    w.put_slot(T0, 0, 52)
    w.put_slot(T0 + P, 104, 500)  # past the end
    w.put_slot(T0 - 5 * P, 0, 900)  # before the start: not live
    assert w.check_phy_pos(T0, 1000) == []
    assert w.check_phy_pos(T0, 400) == [Slot(T0 + P, 104, 500)]
    w.close()
