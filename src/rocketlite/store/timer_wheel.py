"""TimerWheel: the ``timerwheel`` file, one 32-byte slot per tick (layout in
``rocketlite.formats.timer``), as RocketMQ 5.x's ``TimerWheel``.

The file holds ``2 * slots_total`` slots: a time ``t`` lives in slot
``t // precision_ms % (2 * slots_total)`` and the slot records ``t // precision_ms`` so that a slot
left from an earlier turn of the wheel reads as empty. Units are only linked up to
``slots_total`` ticks ahead of the write time (farther ones "roll", see ``broker/timer.py``) and
the reader is at most ``slots_total`` ticks behind (recovery clamps it), so the doubled size keeps
two live times from ever sharing a slot.

Slots are read with ``pread`` and written in place with ``pwrite``, into the page cache, so a
killed process loses nothing written, and ``flush`` (fdatasync) makes them durable. Java keeps a
heap copy and writes the differences at each flush; here each write is one ``pwrite``. The file is
created sparse (5.x's default of 604,800 slots is 38.7 MB, mostly never touched) and not mapped: a
write through a mapping to a page without a block is a SIGBUS on a full disk (on tmpfs a read is
too), a ``pwrite`` is a ``DiskFullError`` that the timer's threads retry.

One writer (the enqueue thread) and one reader (the dequeue thread) work on different slots (the
writer only on times at or after the write time, the reader only before it), so slots need no lock.
"""

from __future__ import annotations

import sys
from array import array
from pathlib import Path

from rocketlite.common.errors import StoreError
from rocketlite.formats.timer import EMPTY_SLOT, SLOT, SLOT_SIZE, Slot
from rocketlite.store.fixed_file import FixedFile

BLANK = -1
IGNORE = -2  # ``revise_slot``: leave this field as it is


class TimerWheel:
    def __init__(self, path: Path, slots_total: int, precision_ms: int) -> None:
        if slots_total <= 0 or precision_ms <= 0:
            raise StoreError(f"timer wheel needs positive slots ({slots_total}) and precision "
                             f"({precision_ms} ms)")
        self.path = Path(path)
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self.slot_count = 2 * slots_total
        self.length = self.slot_count * SLOT_SIZE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        size = self.path.stat().st_size if self.path.exists() else 0
        if size not in (0, self.length):
            raise StoreError(
                f"timer wheel {self.path} is {size} bytes, expected {self.length} "
                f"({slots_total} x 2 slots of {SLOT_SIZE} bytes): was it written with another "
                "slot count?")
        self._file = FixedFile(self.path, self.length, sparse=True)  # untouched slots cost no disk
        self._closed = False

    # -- slots -------------------------------------------------------------------------------

    def slot_index(self, time_ms: int) -> int:
        return time_ms // self.precision_ms % self.slot_count

    def _read_slot(self, time_ms: int) -> tuple[int, int, int, int, int]:
        raw = self._file.pread(self.slot_index(time_ms) * SLOT_SIZE, SLOT_SIZE)
        fields: tuple[int, int, int, int, int] = SLOT.unpack(raw.ljust(SLOT_SIZE, b"\0"))
        return fields

    def get_raw_slot(self, time_ms: int) -> Slot:
        units, first, last, num, magic = self._read_slot(time_ms)
        return Slot(units * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot:
        """The slot of ``time_ms``, or ``EMPTY_SLOT`` if it holds another time (or nothing)."""
        units, first, last, num, magic = self._read_slot(time_ms)
        if units != time_ms // self.precision_ms:
            return EMPTY_SLOT
        return Slot(units * self.precision_ms, first, last, num, magic)

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int = 0,
                 magic: int = 0) -> None:
        self._file.pwrite(SLOT.pack(time_ms // self.precision_ms, first_pos, last_pos, num, magic),
                          self.slot_index(time_ms) * SLOT_SIZE)

    def clear_slot(self, time_ms: int) -> None:
        self._file.pwrite(SLOT.pack(0, BLANK, BLANK, 0, 0), self.slot_index(time_ms) * SLOT_SIZE)

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, force: bool) -> None:
        """Set the slot's first/last position (``IGNORE`` keeps one) if it holds ``time_ms``; with
        ``force`` a slot holding another time is taken over. Recovery replays the TimerLog through
        this, in log order, so each slot ends up pointing at its last surviving unit."""
        slot = self.get_raw_slot(time_ms)
        if slot.time_ms // self.precision_ms != time_ms // self.precision_ms:
            if force:
                first = first_pos if first_pos != IGNORE else last_pos
                self.put_slot(time_ms, first, last_pos, 1)
            return
        first = slot.first_pos if first_pos == IGNORE else first_pos
        last = slot.last_pos if last_pos == IGNORE else last_pos
        num = slot.num + 1 if last_pos != IGNORE and last_pos > slot.last_pos else slot.num
        self.put_slot(time_ms, first, last, num, slot.magic)

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> list[Slot]:
        """Live slots (times within ``2 * slots_total`` ticks from ``time_start_ms``) whose last
        position is at or past ``max_offset`` (5.x's ``checkPhyPos``): after a power loss the
        wheel may point at TimerLog bytes that never reached the disk. The scan runs over an array
        copy of the file: C-speed slicing and ``max``, Python only for the suspects."""
        longs = array("q")
        with self._file.read_all() as copy:
            longs.frombytes(copy)
        if sys.byteorder == "little":
            longs.byteswap()
        lasts = longs[2::4]
        if max(lasts, default=-1) < max_offset:
            return []
        start = time_start_ms // self.precision_ms
        out: list[Slot] = []
        for i, last in enumerate(lasts):
            if last >= max_offset:
                units = longs[4 * i]
                if start <= units < start + self.slot_count:
                    out.append(self.get_slot(units * self.precision_ms))
        return out

    # -- lifecycle ---------------------------------------------------------------------------

    def flush(self) -> None:
        """fdatasync: the slots written through the mapping are in the page cache it covers."""
        if self._closed:
            return
        self._file.sync()

    def close(self, flush: bool = True) -> None:
        if self._closed:
            return
        try:
            if flush:
                self.flush()
        finally:
            self._closed = True
            self._file.close()
