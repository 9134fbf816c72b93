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
from rocketlite.store import disk
from rocketlite.store.mapped_file import MappedFile, offset_to_file_name

log = logging.getLogger(__name__)
_NAME = re.compile(r"^\d{20}$")


class Allocator:
    """Creates (and warms) the next segment on a background thread, one request ahead, so that a
    full disk is known before the current segment is: ``on_failure(path, size, error)`` hears of
    a failed preparation at once (the store refuses writes and retries with ``prepare_now``)."""

    def __init__(
        self, warm: bool, on_failure: Callable[[Path, int, StoreError], None] | None = None
    ) -> None:
        self._warm = warm
        self._pending: dict[Path, Future[MappedFile]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.on_failure = on_failure

    def _create(self, path: Path, size: int) -> MappedFile:
        mf = MappedFile(path, size)
        if self._warm:
            try:
                mf.warm()
            except OSError as e:
                mf.close()  # its blocks are allocated: the next take reuses the file
                raise disk.write_error(path, "warm the segment", e) from e
        return mf

    def _make(self, path: Path, size: int, fut: Future[MappedFile]) -> None:
        try:
            fut.set_result(self._create(path, size))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting writer
            fut.set_exception(e)
            if isinstance(e, StoreError) and self.on_failure is not None:
                self.on_failure(path, size, e)

    def prepare(self, path: Path, size: int) -> None:
        with self._lock:
            if self._closed or path in self._pending or path.exists():
                return
            fut: Future[MappedFile] = Future()
            self._pending[path] = fut
        threading.Thread(
            target=self._make, args=(path, size, fut), name="segment-allocator", daemon=True
        ).start()

    def prepare_now(self, path: Path, size: int) -> None:
        """Prepare on this thread (a retry after a failure); raises ``DiskFullError`` again if
        there is still no room. A segment that is already prepared or in use is left alone."""
        with self._lock:
            fut = self._pending.get(path)
            if self._closed or (fut is not None and (not fut.done() or fut.exception() is None)):
                return
            if fut is None and path.exists():
                return
        mf = self._create(path, size)
        done: Future[MappedFile] = Future()
        done.set_result(mf)
        with self._lock:
            current = self._pending.get(path)
            if not self._closed and (current is None or current is fut):
                self._pending[path] = done
                return
        mf.close()  # closed meanwhile, or prepared by another thread

    def take(self, path: Path, size: int) -> MappedFile:
        """The prepared segment, or one created now (also when its preparation failed: space may
        have returned since). ``DiskFullError`` if the disk is still full."""
        with self._lock:
            fut = self._pending.pop(path, None)
        if fut is not None:
            try:
                return fut.result()
            except StoreError:
                pass
        return self._create(path, size)

    def discard(self, directory: Path) -> None:
        """Delete the segments prepared in ``directory`` (a truncated log: they would leave a
        gap); waits for one being created."""
        with self._lock:
            paths = [p for p in self._pending if p.parent == directory]
            futs = [self._pending.pop(p) for p in paths]
        for path, fut in zip(paths, futs, strict=True):
            try:
                fut.result().destroy()
            except StoreError:
                path.unlink(missing_ok=True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pending = list(self._pending.values())
            self._pending.clear()
        for fut in pending:
            try:
                fut.result().close()
            except StoreError:
                pass  # its preparation failed: nothing to close
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
        # Segments created ahead of ``files`` so that an append knows it has room before it
        # writes anything (``reserve``); ``next_file`` takes them first.
        self._spare: list[MappedFile] = []
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
        if self.files and self.hold_fd:
            self.files[-1].try_allocate()  # the one that is written to next (earlier: full)

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
        """The segment to append to: the last one unless full, else a new one (``DiskFullError``
        when it cannot be created)."""
        last = self.last()
        if last is not None and not last.is_full():
            return last
        mf = self._spare.pop(0) if self._spare else self._create(self._path_after(last, start_offset))
        self.files = [*self.files, mf]
        self.prepare_next()
        if self.on_new_file is not None:
            self.on_new_file(mf)
        return mf

    def _path_after(self, last: MappedFile | None, start_offset: int = 0) -> Path:
        if last is not None:
            start = last.file_from_offset + self.file_size
        else:
            start = start_offset - start_offset % self.file_size
        return self.directory / offset_to_file_name(start)

    def _create(self, path: Path) -> MappedFile:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise disk.write_error(self.directory, "create", e) from e
        if self.allocator is not None:
            return self.allocator.take(path, self.file_size)
        return MappedFile(path, self.file_size, hold_fd=self.hold_fd)

    def prepare_next(self) -> None:
        """Have the allocator create the segment after the last one (and the spares) ahead."""
        if self.allocator is not None and self.files:
            last = self._spare[-1] if self._spare else self.files[-1]
            self.allocator.prepare(self._path_after(last), self.file_size)

    def reserve(self, count: int) -> None:
        """Make sure ``count`` segments after the last one exist (created now if the allocator
        has not prepared them), so that an append rolling into them cannot fail halfway.
        ``DiskFullError`` if one cannot be created; nothing is written then."""
        while len(self._spare) < count:
            last = self._spare[-1] if self._spare else self.last()
            self._spare.append(self._create(self._path_after(last)))
        self.prepare_next()

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
                if mf.pread(0, 8) == bytes(8):  # created ahead of need: nothing is lost
                    log.info("removing the preallocated empty segment %s", mf.path)
                else:
                    log.info("deleting segment %s beyond offset %d", mf.path, offset)
                mf.destroy()
        self.files = keep

    def drop_ahead(self) -> None:
        """Delete the segments created ahead of need (spares and the allocator's) and prepare
        the one after the last again: after ``truncate_dirty`` they would leave a gap."""
        for mf in self._spare:
            mf.destroy()
        self._spare = []
        if self.allocator is not None:
            self.allocator.discard(self.directory)
        self.prepare_next()

    def delete_first(self) -> MappedFile | None:
        if not self.files:
            return None
        mf = self.files[0]
        self.files = self.files[1:]
        mf.destroy()
        return mf

    def close(self) -> None:
        for mf in [*self.files, *self._spare]:
            mf.close()
        self.files = []
        self._spare = []
