"""MappedFileQueue: a directory of equal-size segments named by the 20-digit offset of their first byte.

Used by the CommitLog (1 GiB segments) and every ConsumeQueue (6,000,000-byte segments). Segments are
contiguous: segment k starts at ``first.file_from_offset + k * file_size``, so an offset finds its
segment by arithmetic. Creating the next segment can be handed to an ``Allocator`` that prepares and
warms it ahead of time on its own thread (seed S9).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from rocketlite.common.errors import StoreError
from rocketlite.store.mapped_file import MappedFile, offset_to_file_name

log = logging.getLogger(__name__)
_NAME = re.compile(r"^\d{20}$")


class Allocator:
    """Creates and warms the next segment on a background thread, one request ahead."""

    def __init__(self, warm: bool) -> None:
        self._warm = warm
        self._pending: dict[Path, Future[MappedFile]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _make(self, path: Path, size: int, fut: Future[MappedFile]) -> None:
        try:
            mf = MappedFile(path, size)
            if self._warm:
                mf.warm()
            fut.set_result(mf)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting writer
            fut.set_exception(e)

    def prepare(self, path: Path, size: int) -> None:
        with self._lock:
            if self._closed or path in self._pending or path.exists():
                return
            fut: Future[MappedFile] = Future()
            self._pending[path] = fut
        threading.Thread(
            target=self._make, args=(path, size, fut), name="segment-allocator", daemon=True
        ).start()

    def take(self, path: Path, size: int) -> MappedFile:
        with self._lock:
            fut = self._pending.pop(path, None)
        if fut is None:
            return MappedFile(path, size)
        return fut.result()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pending = list(self._pending.values())
            self._pending.clear()
        for fut in pending:
            try:
                fut.result().close()
            except Exception:
                log.exception("closing a pre-allocated segment failed")


class MappedFileQueue:
    def __init__(
        self,
        directory: Path,
        file_size: int,
        allocator: Allocator | None = None,
        *,
        hold_fd: bool = True,
    ) -> None:
        self.directory = directory
        self.hold_fd = hold_fd
        self.file_size = file_size
        self.allocator = allocator
        self.files: list[MappedFile] = []
        self.on_new_file: Callable[[MappedFile], None] | None = None

    # -- loading -----------------------------------------------------------------------------

    def load(self) -> None:
        """Open every segment in the directory; refuse gaps and foreign sizes with a clear error."""
        if not self.directory.is_dir():
            return
        names = sorted(p.name for p in self.directory.iterdir() if _NAME.match(p.name))
        expected: int | None = None
        for name in names:
            path = self.directory / name
            size = path.stat().st_size
            if size != self.file_size:
                if size < self.file_size and name == names[-1]:
                    log.warning("segment %s is short (%d bytes); extending it", path, size)
                else:
                    raise StoreError(
                        f"segment {path} is {size} bytes but the configured size is "
                        f"{self.file_size}; fix the mapped file size setting"
                    )
            start = int(name)
            if expected is not None and start != expected:
                raise StoreError(f"segment {path} does not follow the previous segment")
            self.files.append(MappedFile(path, self.file_size, create=False, hold_fd=self.hold_fd))
            expected = start + self.file_size

    # -- positions ---------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote

    @property
    def committed_offset(self) -> int:
        """End of the bytes readers may see (below ``max_offset`` only with a write buffer)."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.committed

    def commit(self) -> int:
        """Write buffered appends of every segment that has some; return ``committed_offset``."""
        for mf in self.files[-2:]:
            if mf.committed < mf.wrote:
                mf.commit()
        return self.committed_offset

    @property
    def flushed_offset(self) -> int:
        for mf in reversed(self.files):
            if mf.flushed > 0:
                return mf.file_from_offset + mf.flushed
        return self.min_offset

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def next_file(self, start_offset: int = 0) -> MappedFile:
        """The segment to append to: the last one unless full, else a new one."""
        last = self.last()
        if last is not None and not last.is_full():
            return last
        if last is not None:
            start = last.file_from_offset + self.file_size
        else:
            start = start_offset - start_offset % self.file_size
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / offset_to_file_name(start)
        mf = (
            self.allocator.take(path, self.file_size)
            if self.allocator is not None
            else MappedFile(path, self.file_size, hold_fd=self.hold_fd)
        )
        self.files = [*self.files, mf]
        if self.allocator is not None:
            self.allocator.prepare(
                self.directory / offset_to_file_name(start + self.file_size), self.file_size
            )
        if self.on_new_file is not None:
            self.on_new_file(mf)
        return mf

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding ``offset``, or None if it was deleted or not yet written."""
        files = self.files
        if not files:
            return None
        first = files[0].file_from_offset
        idx = (offset - first) // self.file_size
        if 0 <= idx < len(files):
            return files[idx]
        return None

    def retire_first(self) -> MappedFile | None:
        """Unlink the oldest segment and drop it from the queue, leaving its mapping open for
        readers that still hold it; the caller closes it later (``MappedFile.close``)."""
        files = self.files
        if not files:
            return None
        mf = files[0]
        self.files = files[1:]  # swap, never mutate: readers may be walking the old list
        mf.path.unlink(missing_ok=True)
        return mf

    # -- flush and truncation ----------------------------------------------------------------

    def flush(self, least_bytes: int = 0) -> int:
        """fdatasync every segment with unflushed bytes, unless fewer than ``least_bytes`` wait
        (RocketMQ's flush-least-pages); return the flushed offset."""
        if least_bytes and self.committed_offset - self.flushed_offset < least_bytes:
            return self.flushed_offset
        pending: list[MappedFile] = []
        for mf in reversed(self.files):
            if mf.flushed >= mf.wrote and mf.is_full():  # is_full: its BLANK is written
                break  # flushes run in order, so everything before this is durable too
            pending.append(mf)
        for mf in reversed(pending):
            if mf.wrote > mf.flushed:
                mf.flush()
        return self.flushed_offset

    def truncate_dirty(self, offset: int, zero_run_stop: int | None = None) -> None:
        """Drop everything at and above ``offset``: zero the tail of its segment (see
        ``MappedFile.truncate_to`` for ``zero_run_stop``), delete later ones."""
        keep: list[MappedFile] = []
        for mf in self.files:
            end = mf.file_from_offset + self.file_size
            if end <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                mf.truncate_to(offset - mf.file_from_offset, zero_run_stop)
                keep.append(mf)
            else:
                log.info("deleting segment %s beyond offset %d", mf.path, offset)
                mf.destroy()
        self.files = keep

    def delete_first(self) -> MappedFile | None:
        if not self.files:
            return None
        mf = self.files[0]
        self.files = self.files[1:]
        mf.destroy()
        return mf

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        self.files = []
