"""IndexFile: one memory-mapped hash index of ``topic#key`` -> CommitLog offsets (RocketMQ's
``store/index/IndexFile.java`` and ``IndexHeader.java``).

The byte layout is owned by ``rocketlite.formats.index_layout``: a 40-byte header, ``hash_slot_num``
slots and ``index_num`` entries of 20 bytes. A slot holds the number of the newest entry whose key
hashes to it; every entry links to the previous entry of its slot, so a lookup walks newest to
oldest. Entry 0 is never used (``indexCount`` starts at 1), which lets 0 mean "empty" in a slot and
"end of chain" in ``prevIndex``.

What this module owns: creating a file (full size), reopening and validating one, adding entries
(``put``), walking chains (``select``), flushing and closing.

Entries are written through the mapping, so every page gets its disk block before it can be
touched (a page first written on a full disk is a SIGBUS): the header and the slot table (written
at random places) when the file is created, entries (written in order) ``ENTRY_AHEAD`` bytes ahead
of use. A full disk is a ``DiskFullError`` from the constructor or ``put`` (nothing written);
``short`` tells that the blocks ahead could not be had, so the store refuses new messages while
the file still has room for the ones already stored. With the default geometry a new file takes
21 MB of disk (20 MB of slots), not 420 MB, until its entries fill it. It does not own the
directory, rolling, naming or locking: ``IndexService`` does, and it serialises every call into an
IndexFile except ``flush``, which may run beside ``put`` (``put`` only writes the mapping).

Only key *hashes* are stored. ``select`` therefore returns every offset whose entry's hash equals
the key's hash: offsets of other keys that collide are included, and **the caller must read each
message and check that it really carries the key**.

Times are stored as whole seconds since the file's ``beginTimestamp`` (truncated), so an entry is
matched against a time range by ``beginTimestamp + timeDiff * 1000``, up to 999 ms earlier than
its real store time, exactly as RocketMQ does.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from pathlib import Path

from rocketlite.common.errors import DiskFullError, FlushError, StoreError
from rocketlite.formats.index_entries import put_entries
from rocketlite.formats.index_layout import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_SLOT,
    entry_position,
    index_file_size,
    slot_position,
)
from rocketlite.formats.javahash import index_key_hash
from rocketlite.store import disk

_MAX_TIME_DIFF = 0x7FFFFFFF
ENTRY_AHEAD = 1 << 20  # entry blocks allocated ahead of use (52,428 entries)


class IndexFile:
    """One index file. Not thread-safe for ``put``/``select``; ``flush`` and ``close`` are."""

    __slots__ = ("_allocated", "_closed", "_entries_at", "_fd", "_lock", "begin_phy_offset",
                 "begin_timestamp", "end_phy_offset", "end_timestamp", "hash_slot_count",
                 "hash_slot_num", "index_count", "index_num", "mm", "path", "short", "size")

    def __init__(self, path: Path, hash_slot_num: int, index_num: int, *, create: bool = False) -> None:
        """Create a new, empty file at ``path`` (``create=True``; it must not exist) or open an
        existing one. Raises StoreError if an existing file has the wrong size or a bad header,
        ``DiskFullError`` if a new file cannot have its blocks (it is removed again)."""
        if hash_slot_num <= 0 or index_num < 2:
            raise ValueError(f"bad index geometry: {hash_slot_num} slots, {index_num} entries")
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.size = index_file_size(hash_slot_num, index_num)
        self._entries_at = entry_position(0, hash_slot_num)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self._fd = os.open(path, flags, 0o644)
        self._allocated = 0  # bytes from the start with disk blocks
        self.short: DiskFullError | None = None  # why the blocks ahead are missing
        try:
            if create:
                os.ftruncate(self._fd, self.size)
                self._allocate(self._entries_at + INDEX_ENTRY_SIZE)
            else:
                actual = os.fstat(self._fd).st_size
                if actual != self.size:
                    raise StoreError(
                        f"index file {path} is {actual} bytes, expected {self.size} "
                        f"({hash_slot_num} slots, {index_num} entries): truncated or foreign"
                    )
            self.mm = mmap.mmap(self._fd, self.size)
        except BaseException:
            os.close(self._fd)
            if create:
                path.unlink(missing_ok=True)
            raise
        self._lock = threading.Lock()
        self._closed = False
        header: tuple[int, int, int, int, int, int] = INDEX_HEADER.unpack_from(self.mm, 0)
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = header
        try:
            self._check_header()
        except StoreError:
            self.close(flush=False)
            raise
        if not create and not self.is_full():
            # A file written by an older version (or Java) is sparse: allocate before writing.
            # On a full disk ``put`` tries again before it writes, and refuses.
            with contextlib.suppress(DiskFullError):
                self._allocate(self._entry_end(self.index_count))

    def _entry_end(self, n: int) -> int:
        return self._entries_at + (n + 1) * INDEX_ENTRY_SIZE

    def _allocate(self, end: int) -> None:
        """Give ``[0, end)`` its blocks (``DiskFullError`` if it cannot), then keep about
        ``ENTRY_AHEAD`` more (``short`` when that fails)."""
        if end > self._allocated:
            self._allocate_to(end)
        if end + ENTRY_AHEAD // 2 > self._allocated and self._allocated < self.size:
            try:
                self._allocate_to(min(self.size, end + ENTRY_AHEAD))
            except DiskFullError as e:
                self.short = e
                return
        self.short = None

    def _allocate_to(self, target: int) -> None:
        disk.allocate(self._fd, self._allocated, target - self._allocated, self.path,
                      "allocate index blocks:")
        self._allocated = target

    def reserve(self, count: int) -> None:
        """Blocks for the next ``count`` entries (those that fit), before a message's keys are
        written: ``DiskFullError`` now, so that none of them is written, rather than on the
        second key after the first moved ``end_phy_offset``."""
        count = min(count, self.entries_left)
        if count > 1 and self._entry_end(self.index_count + count - 1) > self._allocated:
            self._allocate_to(self._entry_end(self.index_count + count - 1))

    def reserve_ahead(self) -> DiskFullError | None:
        """Try again to allocate the blocks ahead of the next entry; the error if it fails."""
        if not self.is_full():
            self._allocate(self._entry_end(self.index_count))
        else:
            self.short = None
        return self.short

    def _check_header(self) -> None:
        if self.index_count == 0 and self.hash_slot_count == 0:
            self.index_count = 1  # never written (new, or crashed before its first put)
        if not 1 <= self.index_count <= self.index_num:
            raise StoreError(f"index file {self.path}: indexCount {self.index_count} "
                             f"is outside [1, {self.index_num}]")
        if not 0 <= self.hash_slot_count <= min(self.hash_slot_num, self.index_count - 1):
            raise StoreError(f"index file {self.path}: hashSlotCount {self.hash_slot_count} "
                             f"is impossible with indexCount {self.index_count}")
        if self.index_count > 1 and not 0 <= self.begin_phy_offset <= self.end_phy_offset:
            raise StoreError(f"index file {self.path}: phy offsets [{self.begin_phy_offset}, "
                             f"{self.end_phy_offset}] are not ordered")

    # -- state -------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        """Entries written (``indexCount - 1``)."""
        return self.index_count - 1

    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def entries_left(self) -> int:
        return self.index_num - self.index_count

    @property
    def closed(self) -> bool:
        return self._closed

    # -- writing -----------------------------------------------------------------------------

    def put(self, key: str, phy_offset: int, store_timestamp_ms: int) -> bool:
        """Index ``key`` -> ``phy_offset``; False (nothing written) when the file is full."""
        n = self.index_count
        if n >= self.index_num:
            return False
        end = self._entries_at + (n + 1) * INDEX_ENTRY_SIZE  # _entry_end(n), inline
        if end + ENTRY_AHEAD // 2 > self._allocated and self._allocated < self.size:
            self._allocate(end)  # DiskFullError: nothing written
        key_hash = index_key_hash(key)
        slot_at = slot_position(key_hash, self.hash_slot_num)
        mm = self.mm
        prev: int = INDEX_SLOT.unpack_from(mm, slot_at)[0]
        if prev < 0 or prev >= n:
            prev = 0  # a garbage slot (torn write): start a fresh chain
        if n == 1:
            self.begin_timestamp = store_timestamp_ms
            self.begin_phy_offset = phy_offset
        if prev == 0:
            self.hash_slot_count += 1
        if self.begin_timestamp <= 0:
            diff = 0
        else:
            diff = min(max((store_timestamp_ms - self.begin_timestamp) // 1000, 0), _MAX_TIME_DIFF)
        INDEX_ENTRY.pack_into(mm, self._entries_at + n * INDEX_ENTRY_SIZE, key_hash, phy_offset,
                              diff, prev)
        INDEX_SLOT.pack_into(mm, slot_at, n)
        self.index_count = n + 1
        self.end_timestamp = store_timestamp_ms
        self.end_phy_offset = phy_offset
        self._write_header()
        return True

    def put_many(self, key_hashes: list[int], phy_offsets: list[int],
                 timestamps: list[int]) -> int:
        """``put`` for a run of keys at once, given by their ``index_key_hash``
        (``index_entries.put_entries``: the slots and entries in one call, the header once): the
        same bytes as one ``put`` per key. Returns how many were written, in order (fewer than
        asked when the file fills up)."""
        n = self.index_count
        k = min(len(key_hashes), self.index_num - n)
        if k <= 0:
            return 0
        if k < len(key_hashes):
            key_hashes, phy_offsets, timestamps = key_hashes[:k], phy_offsets[:k], timestamps[:k]
        end = self._entry_end(n + k - 1)
        if end + ENTRY_AHEAD // 2 > self._allocated and self._allocated < self.size:
            self._allocate(end)  # DiskFullError: nothing written
        if n == 1:
            self.begin_timestamp = timestamps[0]
            self.begin_phy_offset = phy_offsets[0]
        self.index_count, self.hash_slot_count = put_entries(
            self.mm, self.hash_slot_num, n, self.hash_slot_count, self.begin_timestamp,
            key_hashes, phy_offsets, timestamps,
        )
        self.end_timestamp = timestamps[-1]
        self.end_phy_offset = phy_offsets[-1]
        self._write_header()
        return k

    def _write_header(self) -> None:
        INDEX_HEADER.pack_into(self.mm, 0, self.begin_timestamp, self.end_timestamp,
                               self.begin_phy_offset, self.end_phy_offset,
                               self.hash_slot_count, self.index_count)

    # -- reading -----------------------------------------------------------------------------

    def time_overlaps(self, begin_ms: int, end_ms: int) -> bool:
        """True if the file has entries and [begin, end] timestamps overlap [begin_ms, end_ms]."""
        return (self.index_count > 1 and self.begin_timestamp <= end_ms
                and self.end_timestamp >= begin_ms)

    def select(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets of entries whose hash equals ``key``'s and whose time lies in
        [begin_ms, end_ms], newest first, at most ``max_num``. Hash collisions are included: the
        caller verifies each message's keys."""
        out: list[int] = []
        if max_num <= 0:
            return out
        key_hash = index_key_hash(key)
        mm = self.mm
        n: int = INDEX_SLOT.unpack_from(mm, slot_position(key_hash, self.hash_slot_num))[0]
        limit = self.index_count
        begin_ts = self.begin_timestamp
        entries_at = self._entries_at
        unpack = INDEX_ENTRY.unpack_from
        # The whole chain is walked: entry times are only nearly monotone (clock steps), so an
        # early stop on time could miss entries. Chains are short (entries / slots on average);
        # prev < n makes every walk finish within indexCount steps even on a corrupt file.
        while 0 < n < limit:
            h, phy, diff, prev = unpack(mm, entries_at + n * INDEX_ENTRY_SIZE)
            if h == key_hash and begin_ms <= begin_ts + diff * 1000 <= end_ms:
                out.append(phy)
                if len(out) >= max_num:
                    break
            if prev >= n:
                break  # chains only point backwards; anything else is corruption
            n = prev
        return out

    # -- lifecycle ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Make everything put so far durable (``fdatasync``); raises FlushError."""
        with self._lock:
            if self._closed:
                return
            try:
                os.fdatasync(self._fd)
            except OSError as e:
                raise FlushError(f"fdatasync of index file {self.path} failed: {e}") from e

    def close(self, *, flush: bool = True) -> None:
        """Optionally flush, then unmap (the header is already in the mapping). Idempotent."""
        if flush:
            self.flush()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(BufferError):
                self.mm.close()
            os.close(self._fd)

    def destroy(self) -> None:
        """Close without flushing and delete the file."""
        self.close(flush=False)
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return (f"IndexFile({self.path.name}, entries={self.entries}, "
                f"phy=[{self.begin_phy_offset}, {self.end_phy_offset}], "
                f"ts=[{self.begin_timestamp}, {self.end_timestamp}])")
