"""IndexFile: one hash index file of ``topic#key`` -> CommitLog offsets (seed S6).

Layout is owned by ``rocketlite.formats.index_layout``. A slot holds the number of the newest entry
whose key hashes there; each entry links to the previous one, so a lookup walks newest to oldest.
Only hashes are stored: the caller must verify each offset's message really carries the key.
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

from rocketlite.common.errors import StoreError
from rocketlite.formats.index_layout import (
    INDEX_ENTRY,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_SLOT,
    INDEX_SLOT_SIZE,
    index_file_size,
)
from rocketlite.formats.javahash import index_key_hash

log = logging.getLogger(__name__)


class IndexFile:
    def __init__(self, path: Path, hash_slot_num: int, index_num: int) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.size = index_file_size(hash_slot_num, index_num)
        self._entries_at = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            actual = os.fstat(fd).st_size
            if actual == 0:
                os.ftruncate(fd, self.size)
            elif actual != self.size:
                raise StoreError(
                    f"index file {path} is {actual} bytes, expected {self.size} for "
                    f"{hash_slot_num} slots and {index_num} entries"
                )
            self.mm = mmap.mmap(fd, self.size)
        finally:
            os.close(fd)
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = INDEX_HEADER.unpack_from(self.mm, 0)
        if self.index_count <= 0:
            self.index_count = 1  # entry 0 is never used: a slot value of 0 means empty
        if self.index_count > index_num:
            raise StoreError(f"index file {path}: indexCount {self.index_count} > {index_num}")

    def is_full(self) -> bool:
        return bool(self.index_count >= self.index_num)

    @property
    def entries(self) -> int:
        return int(self.index_count) - 1

    def put(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add an entry; False when the file is full."""
        if self.index_count >= self.index_num:
            return False
        key_hash = index_key_hash(key)
        slot_at = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * INDEX_SLOT_SIZE
        mm = self.mm
        (prev,) = INDEX_SLOT.unpack_from(mm, slot_at)
        if prev < 0 or prev >= self.index_count:
            prev = 0
        if self.index_count == 1:
            self.begin_timestamp = store_timestamp
            self.begin_phy_offset = phy_offset
        if prev == 0:
            self.hash_slot_count += 1
        diff = max(0, (store_timestamp - self.begin_timestamp) // 1000)
        diff = min(diff, 0x7FFFFFFF)
        n = self.index_count
        INDEX_ENTRY.pack_into(mm, self._entries_at + n * 20, key_hash, phy_offset, diff, prev)
        INDEX_SLOT.pack_into(mm, slot_at, n)
        self.index_count = n + 1
        self.end_timestamp = store_timestamp
        self.end_phy_offset = phy_offset
        self._write_header()
        return True

    def _write_header(self) -> None:
        INDEX_HEADER.pack_into(self.mm, 0, self.begin_timestamp, self.end_timestamp,
                               self.begin_phy_offset, self.end_phy_offset,
                               self.hash_slot_count, self.index_count)

    def select(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Offsets of entries whose hash matches ``key`` in the time range, newest first."""
        key_hash = index_key_hash(key)
        slot_at = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * INDEX_SLOT_SIZE
        (n,) = INDEX_SLOT.unpack_from(self.mm, slot_at)
        out: list[int] = []
        steps = 0
        limit = self.index_count
        while 0 < n < limit and len(out) < max_num and steps < limit:
            h, phy, diff, prev = INDEX_ENTRY.unpack_from(self.mm, self._entries_at + n * 20)
            ts = self.begin_timestamp + diff * 1000
            if h == key_hash and begin_ms <= ts <= end_ms:
                out.append(phy)
            if prev >= n:
                break  # chains only go back in time; anything else is corruption
            n = prev
            steps += 1
        return out

    def flush(self) -> None:
        self.mm.flush()

    def close(self) -> None:
        if not self.mm.closed:
            self._write_header()
            self.mm.close()

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
