"""FixedFile: a small file of fixed length, mapped whole (the store checkpoint, the timer
checkpoint, the timer wheel). Opening creates it, or extends a short one with zeros. Its blocks are
allocated before it is mapped, so writes through the mapping never fault on a full disk
(``DiskFullError`` at open instead), unless ``sparse``: then it is not mapped at all and its owner
reads and writes with ``pread``/``pwrite`` (the timer wheel: 38.7 MB by default, mostly never
touched; on tmpfs even a read through a mapping allocates a page for a hole). ``sync`` is an
fdatasync that fails as ``FlushError``; ``close`` unmaps and closes. What the bytes mean, locking
and the closed state are the owner's."""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path

from rocketlite.common.errors import FlushError
from rocketlite.store import disk


class FixedFile:
    def __init__(self, path: Path, length: int, *, sparse: bool = False) -> None:
        self.path = Path(path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self.size_at_open = os.fstat(fd).st_size  # 0: just created
            if self.size_at_open < length:
                os.ftruncate(fd, length)
            self.length = length
            self.mm: mmap.mmap | None = None
            if not sparse:
                disk.allocate(fd, 0, length, self.path)
                self.mm = mmap.mmap(fd, length)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    @property
    def mapping(self) -> mmap.mmap:
        assert self.mm is not None, f"{self.path} is sparse: use pread/pwrite"
        return self.mm

    def pread(self, pos: int, size: int) -> bytes:
        return os.pread(self._fd, size, pos)

    def read_all(self) -> mmap.mmap:
        """The whole file, holes read as zeros without touching them (``disk.read_sparse``)."""
        return disk.read_sparse(self._fd, self.length)

    def pwrite(self, data: bytes, pos: int) -> None:
        """Write at ``pos`` (``DiskFullError`` on a full disk; nothing written then)."""
        disk.pwrite_all(self._fd, data, pos, self.path)

    def sync(self) -> None:
        try:
            disk.LAYER.sync(self._fd)
        except OSError as e:
            raise FlushError(f"fdatasync of {self.path} failed: {e}") from e

    def close(self) -> None:
        if self.mm is not None:
            with contextlib.suppress(BufferError):  # a view still exported: the GC unmaps it later
                self.mm.close()
        os.close(self._fd)
