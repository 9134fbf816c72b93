"""ConsumeQueue: the per-(topic, queue) index of 20-byte units pointing into the CommitLog (seed S5).

Lives in ``consumequeue/{topic}/{queueId}/`` as 6,000,000-byte segments (300,000 units). The unit
layout is owned by ``rocketlite.formats.consume_queue_unit``. A unit is written at byte
``queue_offset * 20``, taken from the record itself, so re-dispatching a record after a crash rewrites
the same bytes (idempotent) and fills any hole a torn write left.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

from rocketlite.common.errors import DiskFullError
from rocketlite.formats.consume_queue_unit import CQ_UNIT, CQ_UNIT_SIZE, is_valid_unit, units_struct
from rocketlite.formats.message_record import FIXED_SIZE_V4
from rocketlite.store.mapped_file import MappedFile
from rocketlite.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

Unit = tuple[int, int, int]  # (commit_log_offset, size, tags_code)


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size - file_size % CQ_UNIT_SIZE
        self.files = MappedFileQueue(directory, self.file_size, hold_fd=False)
        self.min_logic_offset = 0  # bytes; units below it were deleted with their CommitLog files
        self.max_physic_end = 0  # commit_log_offset + size of the highest unit written
        # A run of consecutive units waits here until ``commit`` (the dispatcher commits every
        # queue it touched at the end of each round): one write per round instead of a page
        # fault in one of thousands of mappings per unit.
        self._tail = bytearray()
        self._tail_mf: MappedFile | None = None
        self._tail_start = -1  # queue byte position of the tail's first unit
        self._tail_end = -1
        self._tail_limit = -1  # end of the tail's segment

    # -- offsets (in units) ------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """The next queue offset to be written (RocketMQ's ``getMaxOffsetInQueue``)."""
        return self.files.max_offset // CQ_UNIT_SIZE

    # -- writing -----------------------------------------------------------------------------

    def _file_for(self, pos: int) -> MappedFile:
        mf = self.files.find(pos)
        if mf is not None:
            return mf
        if not self.files.files:
            mf = self.files.next_file(pos)
            # The queue starts mid-file (its head was deleted, or the queue was rebuilt): the units
            # before ``pos`` stay zero and are below the minimum offset.
            mf.set_positions(pos - mf.file_from_offset)
            self.min_logic_offset = pos
            return mf
        while True:
            mf = self.files.next_file()
            if mf.file_from_offset <= pos < mf.file_from_offset + self.file_size:
                return mf
            mf.set_positions(self.file_size)  # a gap of whole files: leave them empty

    def put(self, commit_log_offset: int, size: int, tags_code: int, queue_offset: int) -> None:
        """Write one unit at ``queue_offset``. Consecutive units gather in a run buffer (the tail)
        until ``commit``, whether they extend the segment or rewrite it in place."""
        pos = queue_offset * CQ_UNIT_SIZE
        unit = CQ_UNIT.pack(commit_log_offset, size, tags_code)
        if pos == self._tail_end and pos < self._tail_limit:  # the common case, inline
            self._tail += unit
            self._tail_end = pos + CQ_UNIT_SIZE
        else:
            self._append(pos, unit, queue_offset)
        end = commit_log_offset + size
        if end > self.max_physic_end:
            self.max_physic_end = end

    def put_batch(
        self, offsets: Sequence[int], sizes: Sequence[int], tags_codes: Sequence[int],
        queue_offset: int,
    ) -> None:
        """Write consecutive units from ``queue_offset`` (one pack), buffered like ``put``."""
        data = units_struct(len(offsets)).pack(
            *chain.from_iterable(zip(offsets, sizes, tags_codes, strict=True))
        )
        self._append(queue_offset * CQ_UNIT_SIZE, data, queue_offset)
        end = offsets[-1] + sizes[-1]
        if end > self.max_physic_end:
            self.max_physic_end = end

    def put_units(self, queue_offset: int, units: bytes | bytearray, max_end: int) -> None:
        """Write units already packed back to back from ``queue_offset`` (a run of
        ``record_scan.dispatch_plan``; ``max_end``: the largest CommitLog offset + size among
        them), buffered like ``put``."""
        self._append(queue_offset * CQ_UNIT_SIZE, units, queue_offset)
        if max_end > self.max_physic_end:
            self.max_physic_end = max_end

    def _append(self, pos: int, data: bytes | bytearray, queue_offset: int) -> None:
        """Add consecutive units at ``pos`` to the run, starting new runs where they leave it
        (a segment end, a rewrite in place, a gap)."""
        while data:
            if pos == self._tail_end and pos < self._tail_limit:
                take = min(len(data), self._tail_limit - pos)
                self._tail += data[:take]
                self._tail_end = pos + take
            else:
                take = CQ_UNIT_SIZE
                self._put_slow(pos, data[:take], queue_offset)
            data = data[take:]
            pos += take
            queue_offset += take // CQ_UNIT_SIZE

    def _put_slow(self, pos: int, unit: bytes | bytearray, queue_offset: int) -> None:
        """Commit the current run and start a new one at ``pos`` (the end of the newest segment,
        a unit rewritten in place by re-dispatch after a crash, or past a gap)."""
        self.commit()
        if pos < self.min_logic_offset:
            return  # below the head that retention already removed
        phys = int.from_bytes(unit[:8], "big", signed=True)
        if queue_offset * FIXED_SIZE_V4 > phys:
            # The queue's earlier records all precede this one in the CommitLog, each at least
            # FIXED_SIZE_V4 bytes: this queue offset is a damaged record's (a flipped bit the
            # body CRC does not cover), and following it would create every segment up to it.
            log.error("consume queue %s-%d: the record at CommitLog offset %d claims queue offset "
                      "%d, more records than the CommitLog can hold before it: damaged, not "
                      "indexed", self.topic, self.queue_id, phys, queue_offset)
            return
        mf = self._file_for(pos)
        rel = pos - mf.file_from_offset
        if rel > mf.wrote:
            log.warning(
                "consume queue %s-%d: gap before offset %d (expected %d)",
                self.topic, self.queue_id, queue_offset,
                (mf.file_from_offset + mf.wrote) // CQ_UNIT_SIZE,
            )
        self._tail_mf = mf
        self._tail_start = pos
        self._tail_end = pos + CQ_UNIT_SIZE
        self._tail_limit = mf.file_from_offset + self.file_size
        self._tail = bytearray(unit)

    def commit(self) -> DiskFullError | None:
        """Write the tail buffer to its segment (one ``pwrite``) and make it readable. The blocks
        are allocated first, with some ahead (``MappedFile.reserve``): ``DiskFullError`` raised
        when the units cannot be written (the dispatcher retries the round), returned when they
        were but the blocks ahead could not be had (the store then refuses new messages)."""
        mf = self._tail_mf
        if mf is None:
            return None
        tail, start = self._tail, self._tail_start
        self._drop_tail()
        rel = start - mf.file_from_offset
        ahead = mf.reserve(rel + len(tail))
        mf.write_at(rel, tail)
        return ahead

    def reserve_ahead(self) -> DiskFullError | None:
        """Retry allocating the blocks ahead of the newest unit; the error if it fails again."""
        last = self.files.last()
        return None if last is None else last.reserve(last.wrote)

    def _drop_tail(self) -> None:
        self._tail_mf = None
        self._tail = bytearray()
        self._tail_start = self._tail_end = self._tail_limit = -1

    # -- reading -----------------------------------------------------------------------------

    def get_unit(self, queue_offset: int) -> Unit | None:
        units = self.get_units(queue_offset, 1)
        return units[0] if units else None

    def get_units(self, queue_offset: int, max_count: int) -> list[Unit]:
        """Up to ``max_count`` units from ``queue_offset``, within one segment."""
        pos = queue_offset * CQ_UNIT_SIZE
        if pos < self.min_logic_offset or queue_offset >= self.max_offset:
            return []
        mf = self.files.find(pos)
        if mf is None:
            return []
        rel = pos - mf.file_from_offset
        end = min(mf.wrote, rel + max_count * CQ_UNIT_SIZE)
        if end <= rel:
            return []
        return list(CQ_UNIT.iter_unpack(mf.mm[rel:end]))

    def last_unit(self) -> Unit | None:
        return self.get_unit(self.max_offset - 1) if self.max_offset > self.min_offset else None

    # -- recovery and retention -------------------------------------------------------------

    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Find the last valid unit (scanning from the third-last segment) and drop what follows."""
        files = self.files.files
        if not files:
            return
        start = max(0, len(files) - 3)
        end_abs = files[start].file_from_offset
        for mf in files[:start]:
            mf.set_positions(self.file_size)
        for mf in files[start:]:
            data = mf.read_all()  # not through the mapping: the file may have holes
            n = 0
            for off, size, _tag in CQ_UNIT.iter_unpack(data):
                if not is_valid_unit(off, size):
                    break
                n += 1
                self.max_physic_end = max(self.max_physic_end, off + size)
            mf.set_positions(n * CQ_UNIT_SIZE)
            end_abs = mf.file_from_offset + n * CQ_UNIT_SIZE
            if n * CQ_UNIT_SIZE < self.file_size:
                break
        self._drop_tail()
        self.files.truncate_dirty(end_abs)
        self.min_logic_offset = max(self.min_logic_offset, self.files.min_offset)
        self._skip_leading_blanks()

    def _skip_leading_blanks(self) -> None:
        first = self.files.files[0] if self.files.files else None
        if first is None:
            return
        pos = max(self.min_logic_offset - first.file_from_offset, 0)
        while pos < first.wrote:  # a queue that starts mid-file has holes before its first unit
            chunk = first.pread(pos, min(first.wrote - pos, 4096 * CQ_UNIT_SIZE))
            for off, size, _ in CQ_UNIT.iter_unpack(chunk[: len(chunk) - len(chunk) % CQ_UNIT_SIZE]):
                if is_valid_unit(off, size):
                    self.min_logic_offset = first.file_from_offset + pos
                    return
                pos += CQ_UNIT_SIZE
            if len(chunk) < CQ_UNIT_SIZE:
                break
        self.min_logic_offset = first.file_from_offset + min(pos, first.wrote)

    def truncate_dirty(self, commit_log_offset: int) -> None:
        """Drop units pointing at or beyond ``commit_log_offset`` (CommitLog tail was truncated)."""
        while self.max_offset > self.min_offset:
            unit = self.last_unit()
            if unit is None or unit[0] + unit[1] <= commit_log_offset:
                break
            lo, hi = self.min_offset, self.max_offset - 1
            while lo < hi:  # first unit whose record ends beyond the cut
                mid = (lo + hi) // 2
                u = self.get_unit(mid)
                if u is not None and u[0] + u[1] <= commit_log_offset:
                    lo = mid + 1
                else:
                    hi = mid
            self._drop_tail()
            self.files.truncate_dirty(lo * CQ_UNIT_SIZE)
            break
        last = self.last_unit()
        self.max_physic_end = last[0] + last[1] if last else 0

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Move the minimum offset past units whose CommitLog files are gone."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            u = self.get_unit(mid)
            if u is not None and u[0] >= commit_log_min_offset:
                hi = mid
            else:
                lo = mid + 1
        self.min_logic_offset = max(self.min_logic_offset, lo * CQ_UNIT_SIZE)

    def delete_expired(self, commit_log_min_offset: int) -> list[MappedFile]:
        """Unlink whole segments whose units all point below ``commit_log_min_offset``; return
        them for the caller to close once no reader can hold them."""
        retired: list[MappedFile] = []
        while len(self.files.files) > 1:
            first = self.files.files[0]
            off, size, _ = CQ_UNIT.unpack(first.pread(self.file_size - CQ_UNIT_SIZE, CQ_UNIT_SIZE))
            if not is_valid_unit(off, size) or off + size > commit_log_min_offset:
                break
            mf = self.files.retire_first()
            if mf is not None:
                retired.append(mf)
        self.correct_min_offset(commit_log_min_offset)
        return retired

    def flush(self, least_bytes: int = 0) -> bool:
        """Flush if at least ``least_bytes`` wait; True when nothing is left unflushed."""
        self.files.flush(least_bytes)
        return self.files.flushed_offset >= self.files.committed_offset

    def close(self) -> None:
        self.commit()
        self.files.close()
