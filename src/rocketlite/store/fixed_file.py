"""FixedFile: a small file of fixed length, mapped whole (the store checkpoint, the timer
checkpoint, the timer wheel). Opening creates it, or extends a short one with zeros (sparse);
``sync`` is an fdatasync that fails as ``FlushError``; ``close`` unmaps and closes. What the bytes
mean, locking and the closed state are the owner's."""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path

from rocketlite.common.errors import FlushError

_fdatasync = getattr(os, "fdatasync", os.fsync)


class FixedFile:
    def __init__(self, path: Path, length: int) -> None:
        self.path = Path(path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self.size_at_open = os.fstat(fd).st_size  # 0: just created
            if self.size_at_open < length:
                os.ftruncate(fd, length)
            self.mm = mmap.mmap(fd, length)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def sync(self) -> None:
        try:
            _fdatasync(self._fd)
        except OSError as e:
            raise FlushError(f"fdatasync of {self.path} failed: {e}") from e

    def close(self) -> None:
        with contextlib.suppress(BufferError):  # a view still exported: the GC unmaps it later
            self.mm.close()
        os.close(self._fd)
