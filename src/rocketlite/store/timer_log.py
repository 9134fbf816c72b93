"""TimerLog: the ``timerlog/`` directory, an append-only log of 52-byte units, one per message
linked into the timer wheel (layout in ``rocketlite.formats.timer``), as RocketMQ 5.x's
``TimerLog``.

Segments are ``mappedFileSizeTimerLog`` bytes (5.x: 100 MiB), named by the 20-digit position of
their first byte (``MappedFileQueue``). A unit never straddles two segments: when one does not fit
with room left for a BLANK, a BLANK fills the rest and the unit starts the next segment. Units of
one wheel slot form a chain through their ``prevPos``, newest first; the slot holds its head.

Recovery (``recover``) walks the units written since the last checkpoint, hands each valid one to
the wheel to re-link, and cuts the log at the first invalid one (a torn tail after a power loss;
a killed process leaves none, its writes are in the page cache).

Retention (``delete_expired``): a head segment goes once every unit in it was delivered (its
slots are behind the read time) or its messages left the CommitLog (5.x's rule). This process
knows the latest slot each segment it wrote links into; for older segments the bound is the last
unit's write time plus the roll window, since no unit is linked farther ahead than that.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from rocketlite.common.errors import StoreError
from rocketlite.formats.timer import (
    BLANK_MAGIC_CODE,
    MIN_BLANK_LEN,
    TIMER_LOG_BLANK,
    TIMER_LOG_UNIT_SIZE,
    TimerLogUnit,
    decode_unit,
    encode_blank,
)
from rocketlite.store.mapped_file import MappedFile
from rocketlite.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

_UNIT = TIMER_LOG_UNIT_SIZE
_ZERO_RUN_STOP = 1 << 20  # truncation: past this many zero bytes nothing was ever written


class TimerLog:
    def __init__(self, directory: Path, file_size: int) -> None:
        if file_size < _UNIT + MIN_BLANK_LEN:
            raise StoreError(f"mappedFileSizeTimerLog={file_size}: a segment must hold at least "
                             f"one {_UNIT}-byte unit and a {MIN_BLANK_LEN}-byte blank")
        self.directory = Path(directory)
        self.file_size = file_size
        self.files = MappedFileQueue(self.directory, file_size, hold_fd=True)
        self._max_delayed: dict[int, int] = {}  # segment start -> latest slot time linked from it
        self._retired: list[MappedFile] = []
        # Appends (enqueue thread) and retention (flush thread) both replace the segment list.
        self._lock = threading.Lock()

    # -- positions ---------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        """Where the next unit goes (or a BLANK before it)."""
        return self.files.max_offset

    @property
    def units_per_file(self) -> int:
        return (self.file_size - MIN_BLANK_LEN) // _UNIT

    def last_unit_pos(self, file_from_offset: int) -> int:
        """Position of the last unit of a full segment (5.x's ``getOffsetForLastUnit``)."""
        return file_from_offset + (self.units_per_file - 1) * _UNIT

    # -- writing and reading -----------------------------------------------------------------

    def append(self, unit: bytes, delayed_time_ms: int) -> int:
        """Append one unit; returns its position. ``delayed_time_ms`` (the slot it is linked into)
        is remembered per segment for retention."""
        with self._lock:
            mf = self.files.next_file(0)
            if len(unit) + MIN_BLANK_LEN > mf.free:
                mf.append(encode_blank(mf.free))
                mf.wrote = mf.committed = mf.file_size
                mf = self.files.next_file()
            pos = mf.file_from_offset + mf.append(unit)
            key = mf.file_from_offset
            if delayed_time_ms > self._max_delayed.get(key, -1):
                self._max_delayed[key] = delayed_time_ms
            return pos

    def read_unit(self, pos: int) -> TimerLogUnit | None:
        """The unit at ``pos``, or None if that position is not (or no longer) in the log."""
        mf = self.files.find(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel < 0 or rel + _UNIT > mf.wrote:
            return None
        return decode_unit(mf.mm, rel)

    def flush(self) -> int:
        """fdatasync what was appended; returns the position durable up to (a unit boundary or
        a segment end)."""
        self.files.flush()
        return self.files.flushed_offset

    # -- recovery ----------------------------------------------------------------------------

    def load(self) -> None:
        self.files.load()

    def recover(self, start_pos: int, on_unit: Callable[[int, TimerLogUnit], None]) -> int:
        """Restore write positions, replaying every valid unit from ``start_pos`` (a unit boundary
        the caller trusts everything before: the checkpoint's flush position) through
        ``on_unit(pos, unit)``; cut the log at the first invalid unit. Returns the valid end."""
        files = self.files.files
        if not files:
            return 0
        size = self.file_size
        first = files[0].file_from_offset
        idx = min(max(0, (start_pos - first) // size), len(files) - 1)
        rel = max(0, start_pos - files[idx].file_from_offset)
        if rel % _UNIT or rel > size:
            log.warning("timer log checkpoint position %d is not a unit boundary; replaying its "
                        "segment from the start", start_pos)
            rel = 0
        for mf in files[:idx]:
            mf.set_positions(size)
        for j in range(idx, len(files)):
            mf = files[j]
            pos = rel if j == idx else 0
            end = self._replay_segment(mf, pos, on_unit)
            if end is not None:
                cut = mf.file_from_offset + end
                if j < len(files) - 1:
                    log.warning("timer log: invalid unit at %d; dropping what follows", cut)
                self.files.truncate_dirty(cut, _ZERO_RUN_STOP)
                return cut
            mf.set_positions(size)
        return self.files.max_offset

    def _replay_segment(self, mf: MappedFile, pos: int,
                        on_unit: Callable[[int, TimerLogUnit], None]) -> int | None:
        """Replay one segment from ``pos``; None if it ends with its BLANK (full), else the
        position of its first invalid unit."""
        mm, size, base = mf.mm, self.file_size, mf.file_from_offset
        while pos + MIN_BLANK_LEN <= size:
            unit_size, _, magic = TIMER_LOG_BLANK.unpack_from(mm, pos)
            if magic == BLANK_MAGIC_CODE and unit_size == size - pos:
                return None
            if pos + _UNIT > size:
                return pos
            unit = decode_unit(mm, pos)
            if not unit.valid:
                return pos
            on_unit(base + pos, unit)
            pos += _UNIT
        return pos

    def units_from(self, pos: int) -> Iterator[tuple[int, TimerLogUnit]]:
        """Every valid unit from ``pos`` (a unit boundary) to the end, crossing BLANKs; stops at
        an invalid one."""
        while pos < self.max_offset:
            mf = self.files.find(pos)
            if mf is None:
                return
            rel = pos - mf.file_from_offset
            if rel + MIN_BLANK_LEN > mf.wrote:
                pos = mf.file_from_offset + self.file_size
                continue
            _, _, magic = TIMER_LOG_BLANK.unpack_from(mf.mm, rel)
            if magic == BLANK_MAGIC_CODE:
                pos = mf.file_from_offset + self.file_size
                continue
            unit = self.read_unit(pos)
            if unit is None or not unit.valid:
                return
            yield pos, unit
            pos += _UNIT

    # -- retention ---------------------------------------------------------------------------

    def delete_expired(self, read_time_ms: int, commit_log_min: int, roll_window_ms: int) -> int:
        """Delete head segments whose units were all delivered (their slots are before
        ``read_time_ms``) or whose messages left the CommitLog; never the last segment.
        Segments are unlinked now and unmapped on the next call (a reader may hold a view)."""
        for mf in self._retired:
            mf.close()
        self._retired = []
        deleted = 0
        while len(self.files.files) > 1:
            mf = self.files.files[0]
            last = self.read_unit(self.last_unit_pos(mf.file_from_offset))
            if last is None or not last.valid:
                break
            latest = self._max_delayed.get(mf.file_from_offset,
                                           last.write_time_ms + roll_window_ms)
            if latest >= read_time_ms and last.commit_log_offset >= commit_log_min:
                break
            with self._lock:
                retired = self.files.retire_first()
                if retired is None:
                    break
                self._max_delayed.pop(retired.file_from_offset, None)
            self._retired.append(retired)
            deleted += 1
            log.info("timer log: deleted segment %s (delivered or expired)", retired.path.name)
        return deleted

    def close(self, flush: bool = True) -> None:
        if flush:
            self.files.flush()
        for mf in self._retired:
            mf.close()
        self._retired = []
        self.files.close()
