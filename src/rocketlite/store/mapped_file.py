"""MappedFile: one fixed-size, memory-mapped segment file. It knows bytes, never messages.

Reads always go through the mapping. Writes go through ``pwrite`` into the same page cache, like
RocketMQ's FileChannel path: CommitLog segments hold a descriptor; ConsumeQueue segments (thousands
of them) write through ``WRITE_FDS``, a bounded cache of descriptors (least recently used closed
first), so 10,000 queues neither need 10,000 descriptors nor pay open + close per write.

A segment carries three positions, as RocketMQ's ``DefaultMappedFile`` does:

* ``wrote``: bytes appended (visible to readers of the mapping),
* ``flushed``: bytes known durable (``fdatasync`` returned),
* the file name: the 20-digit offset of its first byte in its queue.

Files are created at full size. A segment that holds a descriptor (CommitLog, TimerLog) gets all
its disk blocks when it is created (``disk.allocate``): a full disk is a ``DiskFullError`` then, never
a SIGBUS later. ConsumeQueue segments stay sparse and get their blocks ahead of the units written
(``reserve``), so 10,000 queues do not each take 6 MB. Nothing is written through a mapping except
small appends (``SMALL_APPEND`` bytes at most) into blocks a segment already has and recovery's
zeroing of bytes that hold data (their blocks exist). ``warm`` writes zeros through the
page cache with ``pwrite`` (which releases the GIL) and advises the kernel, so the first write to
each page on the hot path does not fault a fresh page.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from rocketlite.common.errors import DiskFullError, FlushError, StoreError
from rocketlite.store import disk

log = logging.getLogger(__name__)

OS_PAGE_SIZE = disk.PAGE
SMALL_APPEND = 4096  # appends up to this size are copied through the mapping (blocks allocated)
RESERVE_AHEAD_MAX = 1 << 20  # ConsumeQueue blocks allocated ahead of the units: at most 1 MiB
_WARM_CHUNK = disk.ZERO_CHUNK
_ZEROS = disk.ZEROS  # one shared buffer of zeros for the store


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


def _page_up(n: int) -> int:
    return -(-n // OS_PAGE_SIZE) * OS_PAGE_SIZE


class FdCache:
    """Write descriptors for segments that do not hold one (ConsumeQueues), at most ``capacity``
    open; the least recently used is closed first. A write runs under the cache's lock, so no
    descriptor is closed (and its number reused) while another thread writes through it."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._fds: OrderedDict[Path, int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._fds)

    def _fd(self, path: Path) -> int:
        """The cached descriptor of ``path`` (call holding the lock)."""
        fd = self._fds.get(path)
        if fd is None:
            try:
                fd = os.open(path, os.O_WRONLY)
            except OSError as e:
                raise FlushError(f"cannot open {path} for writing: {e}") from e
            self._fds[path] = fd
            while len(self._fds) > self.capacity:
                os.close(self._fds.popitem(last=False)[1])
        else:
            self._fds.move_to_end(path)
        return fd

    def pwrite(self, path: Path, data: bytes | bytearray | memoryview, pos: int) -> None:
        """Write all of ``data`` or nothing; ``DiskFullError``/``FlushError`` on failure."""
        with self._lock:
            disk.pwrite_all(self._fd(path), data, pos, path)

    def allocate(self, path: Path, offset: int, length: int) -> None:
        """Give a range of the file its disk blocks; ``DiskFullError`` when the disk is full."""
        with self._lock:
            disk.allocate(self._fd(path), offset, length, path)

    def forget(self, path: Path) -> None:
        """Close the descriptor of a segment being closed or deleted."""
        with self._lock:
            fd = self._fds.pop(path, None)
            if fd is not None:
                os.close(fd)

    def clear(self) -> None:
        with self._lock:
            fds, self._fds = self._fds, OrderedDict()
            for fd in fds.values():
                os.close(fd)


WRITE_FDS = FdCache()


class MappedFile:
    __slots__ = ("_closed", "_fd", "_lock", "_pending", "allocated", "committed",
                 "file_from_offset", "file_size", "flushed", "mm", "path", "write_buffered", "wrote")

    def __init__(
        self, path: Path, file_size: int, *, create: bool = True, hold_fd: bool = True
    ) -> None:
        """Open (or create) and map a segment. ``hold_fd=False`` closes the descriptor once mapped
        (the mapping keeps its own) and flushes with msync: for the many small ConsumeQueue files,
        so that 10,000 queues do not need 20,000 descriptors.

        A new (or short) segment with ``hold_fd`` gets all its blocks before it is mapped; one
        without stays sparse (``reserve`` allocates ahead of writes). ``DiskFullError`` when the
        disk is full: a segment this call created is removed again."""
        self.path = path
        self.file_size = file_size
        try:
            self.file_from_offset = int(path.name)
        except ValueError as e:
            raise StoreError(f"segment file name {path.name!r} is not a 20-digit offset") from e
        created = False
        try:
            if create:
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                    created = True
                except FileExistsError:
                    fd = os.open(path, os.O_RDWR)
            else:
                fd = os.open(path, os.O_RDWR)
        except OSError as e:  # ENOSPC for a new directory entry or inode, EMFILE, ...
            raise disk.write_error(path, "open", e) from e
        self._fd: int | None = fd
        self.allocated = 0  # bytes from the start known to have disk blocks
        try:
            actual = os.fstat(fd).st_size
            if actual > file_size:
                raise StoreError(
                    f"segment {path} is {actual} bytes, larger than the configured {file_size}"
                )
            if hold_fd and actual < file_size:
                disk.allocate(fd, 0, file_size, path, "allocate a segment:")
                self.allocated = file_size
            elif actual < file_size:
                os.ftruncate(fd, file_size)
            self.mm = mmap.mmap(fd, file_size)
        except BaseException:
            os.close(fd)
            if created:
                path.unlink(missing_ok=True)
            raise
        if not hold_fd:
            os.close(fd)
            self._fd = None
        self.wrote = 0
        self.committed = 0  # bytes in the file (readable); below ``wrote`` only when buffered
        self.flushed = 0
        # transientStorePoolEnable: appends wait in memory until ``commit`` writes them.
        self.write_buffered = False
        self._pending: list[bytes | bytearray | memoryview] = []
        self._closed = False
        self._lock = threading.Lock()

    # -- writing -----------------------------------------------------------------------------

    @property
    def free(self) -> int:
        return self.file_size - self.wrote

    def is_full(self) -> bool:
        return self.wrote >= self.file_size

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at ``wrote``; return the position it was written at."""
        pos = self.wrote
        end = pos + len(data)
        if end > self.file_size:
            raise StoreError(f"append of {len(data)} bytes overruns segment {self.path.name}")
        if self.write_buffered:
            self._pending.append(data)
            self.wrote = end
            return pos
        if end <= self.allocated and len(data) <= SMALL_APPEND and self._fd is not None:
            # A small append into blocks that exist: a copy through the mapping (~0.4 us for a
            # 220-byte record here) instead of a pwrite system call (~1.6 us); no SIGBUS can
            # come of it, the blocks are there.
            self.mm[pos:end] = data
        else:
            # pwrite into the page cache: no page fault per fresh page (mmap writes to a new file
            # run at ~0.3-2 GB/s here, pwrite at 4-6 GB/s), the GIL is released for the copy, and
            # a full disk is an error, not a SIGBUS. Readers see the bytes through the shared
            # mapping at once.
            self._pwrite(data, pos)
        self.wrote = self.committed = end
        return pos

    def commit(self) -> int:
        """Write buffered appends to the file (transient store pool); return ``committed``."""
        with self._lock:
            pending, self._pending = self._pending, []
            target = self.wrote
            if pending and not self._closed:
                data = pending[0] if len(pending) == 1 else b"".join(pending)
                try:
                    self._pwrite(data, self.committed)
                except StoreError as e:
                    self._pending = [*pending, *self._pending]
                    raise FlushError(str(e)) from e
            self.committed = target
            return target

    def _pwrite(self, data: bytes | bytearray | memoryview, pos: int) -> None:
        """All of ``data`` at ``pos`` or nothing (``disk.pwrite_all``)."""
        if self._fd is not None:
            disk.pwrite_all(self._fd, data, pos, self.path)
        else:
            WRITE_FDS.pwrite(self.path, data, pos)

    def try_allocate(self) -> None:
        """Give the whole segment its blocks (a segment opened from disk, which may be sparse:
        an older store or a Java broker's); logged, not raised, when the disk is full."""
        if self.allocated >= self.file_size or self._fd is None:
            return
        try:
            disk.allocate(self._fd, 0, self.file_size, self.path, "allocate a segment:")
        except StoreError as e:
            log.warning("segment %s stays sparse: %s", self.path, e)
            return
        self.allocated = self.file_size

    def reserve(self, end: int) -> DiskFullError | None:
        """Make sure ``[0, end)`` has disk blocks before it is written (``DiskFullError`` if not:
        then nothing is written), and keep some blocks beyond it (a quarter of ``end``, one page
        to 1 MiB). Returns the error when only that headroom could not be allocated: the write
        may go on, but the disk is about to be full."""
        if end + RESERVE_AHEAD_MAX // 2 <= self.allocated:
            return None  # the common case: more than enough ahead
        size = self.file_size
        ahead = min(max(OS_PAGE_SIZE, end // 4), RESERVE_AHEAD_MAX)
        if end > self.allocated:
            self._allocate_to(min(size, _page_up(end)))
        if end + ahead // 2 <= self.allocated or self.allocated >= size:
            return None
        try:
            self._allocate_to(min(size, _page_up(end + ahead)))
        except DiskFullError as e:
            return e
        return None

    def _allocate_to(self, target: int) -> None:
        start = self.allocated
        if target <= start:
            return
        if self._fd is not None:
            disk.allocate(self._fd, start, target - start, self.path)
        else:
            WRITE_FDS.allocate(self.path, start, target - start)
        self.allocated = max(self.allocated, target)

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write at a position with ``pwrite`` (ConsumeQueue units, rewritten in place on
        re-dispatch). Never through the mapping: with thousands of ConsumeQueue mappings a write
        fault costs ~1.8 ms per page here, against ~12 us for open + pwrite + close (less with the
        descriptor cached), and the fault holds the GIL."""
        end = pos + len(data)
        if end > self.file_size:
            raise StoreError(f"write of {len(data)} bytes at {pos} overruns segment {self.path.name}")
        self._pwrite(data, pos)
        self.wrote = self.committed = max(self.wrote, end)

    def warm(self) -> None:
        """Pre-write zeros beyond ``wrote`` through the page cache (runs off the write path)."""
        fd = self._fd
        if fd is None:
            return
        start = (self.wrote // _WARM_CHUNK + 1) * _WARM_CHUNK
        for pos in range(start, self.file_size, _WARM_CHUNK):
            if self._closed:
                return
            n = min(_WARM_CHUNK, self.file_size - pos)
            os.pwrite(fd, _ZEROS[:n], pos)
        if hasattr(self.mm, "madvise") and hasattr(mmap, "MADV_WILLNEED"):
            self.mm.madvise(mmap.MADV_WILLNEED)

    def flush(self) -> int:
        """Make everything written durable; return the flushed position. Raises FlushError."""
        with self._lock:
            target = self.committed
            if target <= self.flushed or self._closed:
                return self.flushed
            try:
                if self._fd is None:
                    # msync (mmap.flush) holds the GIL for the whole sync; fdatasync on a
                    # short-lived descriptor releases it, and covers the same page cache.
                    fd = os.open(self.path, os.O_RDWR)
                    try:
                        disk.LAYER.sync(fd)
                    finally:
                        os.close(fd)
                else:
                    disk.LAYER.sync(self._fd)
            except OSError as e:
                raise FlushError(f"fdatasync of {self.path} failed: {e}") from e
            self.flushed = target
            return target

    # -- reading -----------------------------------------------------------------------------

    def view(self, pos: int, size: int) -> memoryview:
        return memoryview(self.mm)[pos : pos + size]

    def read(self, pos: int, size: int) -> bytes:
        return self.mm[pos : pos + size]

    def pread(self, pos: int, size: int) -> bytes:
        """Read with ``pread``, not through the mapping: for ranges that may be holes (on tmpfs a
        read fault on a hole allocates a page: a SIGBUS on a full disk)."""
        with self._read_fd() as fd:
            return os.pread(fd, size, pos)

    def read_all(self) -> bytes | mmap.mmap:
        """The whole segment, its holes read as zeros without touching them (``pread``)."""
        if self.allocated >= self.file_size:
            return self.mm[: self.file_size]
        with self._read_fd() as fd:
            return disk.read_sparse(fd, self.file_size)

    @contextlib.contextmanager
    def _read_fd(self) -> Iterator[int]:
        if self._fd is not None:
            yield self._fd
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            yield fd
        finally:
            os.close(fd)

    # -- lifecycle ---------------------------------------------------------------------------

    def truncate_to(self, pos: int, zero_run_stop: int | None = None) -> None:
        """Zero everything from ``pos`` on and set the positions there (recovery of a torn tail).
        Bytes are compared and zeroed with ``pread``/``pwrite``, never through the mapping (the
        rest may be holes); only chunks that hold data are written, and their blocks exist.

        With ``zero_run_stop``, stop after that many bytes of zeros in a row: a segment is written
        front to back into a pre-allocated (zero) file, so past the longest zero run a record can
        hold, nothing was ever written. That spares reading the rest of a 1 GiB segment."""
        end = self.file_size
        zeros_seen = 0
        with self._read_fd() as fd:
            for p in range(pos, end, _WARM_CHUNK):
                n = min(_WARM_CHUNK, end - p)
                if os.pread(fd, n, p) != _ZEROS[:n]:
                    self._pwrite(_ZEROS[:n], p)
                    zeros_seen = 0
                else:
                    zeros_seen += n
                    if zero_run_stop is not None and zeros_seen > zero_run_stop:
                        break
        self.wrote = self.committed = pos
        self.flushed = min(self.flushed, pos)
        self._pending = []

    def set_positions(self, pos: int) -> None:
        self.wrote = self.committed = self.flushed = pos

    def mtime(self) -> float:
        return os.stat(self.path).st_mtime

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # A reader may still hold a memoryview; then the mapping dies with it.
            with contextlib.suppress(BufferError):
                self.mm.close()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            else:
                WRITE_FDS.forget(self.path)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
