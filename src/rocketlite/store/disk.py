"""Disk blocks before writes: the one place the store allocates space and writes with ``pwrite``.

A page of a memory-mapped file that has no disk block behind it is allocated when it is first
written through the mapping; on a full disk the kernel has nothing to give and kills the process
with SIGBUS (no exception, no log line). So every region the store writes through a mapping gets
its blocks first, with ``allocate`` (``posix_fallocate``, or zeros written where the filesystem
cannot fallocate), and everything else is written with ``pwrite``, where a full disk is an
``OSError``. Both turn a full disk into ``DiskFullError`` naming the file and the space left, which
the broker answers as SERVICE_NOT_AVAILABLE.

``pwrite_all`` never leaves a partial write behind: if the disk fills halfway through, the bytes
that did land are zeroed again (their blocks exist, so that cannot fail for want of space), so
recovery never finds half a record where the log ends.

Reading has a trap too: on tmpfs a read fault on a hole allocates a page, so reading a sparse
file through a mapping on a full tmpfs is a SIGBUS as well. Files that may have holes
(ConsumeQueues, the timer wheel, index entries not yet written) are read with ``pread`` where a
hole may be read (``pread`` of a hole allocates nothing), or copied with ``read_sparse``.

Tests replace ``LAYER`` (``install``) to run the full-disk paths without a small filesystem.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
from pathlib import Path

from rocketlite.common.errors import DiskFullError, FlushError, StoreError

log = logging.getLogger(__name__)

PAGE = 4096
ZERO_CHUNK = 1 << 20
ZEROS = bytes(ZERO_CHUNK)  # the store's one buffer of zeros (mapped_file shares it)
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# posix_fallocate without filesystem support (glibc emulates it, other C libraries may not).
_NO_FALLOCATE = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})
_fdatasync = getattr(os, "fdatasync", os.fsync)


class FileLayer:
    """The system calls the store's writers go through: space, writes and syncs (tests install a
    fault-injecting one: a full disk, a failing fdatasync)."""

    def allocate(self, fd: int, offset: int, length: int) -> None:
        os.posix_fallocate(fd, offset, length)

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, pos: int) -> int:
        return os.pwrite(fd, data, pos)

    def sync(self, fd: int) -> None:
        """Make the file's written data durable (``fdatasync``; raises ``OSError``)."""
        _fdatasync(fd)

    def space(self, path: Path) -> tuple[int, int]:
        """(used, available to an unprivileged writer) bytes of the filesystem holding ``path``."""
        st = os.statvfs(path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_bavail * st.f_frsize


LAYER = FileLayer()


def install(layer: FileLayer) -> FileLayer:
    """Replace the file layer (tests); returns the previous one."""
    global LAYER
    previous, LAYER = LAYER, layer
    return previous


def existing(path: Path) -> Path:
    """``path``, or its nearest existing parent."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def space(path: Path) -> tuple[int, int]:
    """(used, available) bytes of the filesystem holding ``path`` (or its nearest parent)."""
    return LAYER.space(existing(path))


def free_bytes(path: Path) -> int | None:
    try:
        return space(path)[1]
    except OSError:
        return None


def write_error(path: Path, what: str, e: OSError) -> StoreError:
    """The store's error for a failed allocation or write: ``DiskFullError`` when the disk (or a
    quota) is full, naming the file and the space left; otherwise ``FlushError``."""
    if e.errno in _FULL:
        free = free_bytes(path)
        left = "" if free is None else f"; {free} bytes free on its filesystem"
        return DiskFullError(f"the disk is full: cannot {what} {path} "
                             f"({os.strerror(e.errno or 0)}){left}")
    return FlushError(f"cannot {what} {path}: {e}")


def allocate(fd: int, offset: int, length: int, path: Path, what: str = "allocate") -> None:
    """Give ``[offset, offset + length)`` of the file its disk blocks (the file grows to cover
    it). Raises ``DiskFullError`` (or ``FlushError``), never leaves the caller to find out
    through a mapping."""
    if length <= 0:
        return
    try:
        LAYER.allocate(fd, offset, length)
    except OSError as e:
        if e.errno not in _NO_FALLOCATE:
            raise write_error(path, f"{what} {length} bytes at {offset} of", e) from e
        try:
            _write_zeros(fd, offset, length)
        except OSError as e2:
            raise write_error(path, f"{what} {length} bytes at {offset} of", e2) from e2


def _write_zeros(fd: int, offset: int, length: int) -> None:
    """Allocate by writing zeros, only over pages that read as zeros (a hole, or never written):
    the range may hold data when a file is re-allocated after a restart."""
    end = offset + length
    pos = offset
    while pos < end:
        n = min(ZERO_CHUNK, end - pos)
        have = os.pread(fd, n, pos)
        if have == ZEROS[: len(have)]:
            write_all(fd, ZEROS[:n], pos)
        else:
            for p in range(0, n, PAGE):
                page = have[p : p + PAGE]
                m = min(PAGE, n - p)
                if page == ZEROS[: len(page)]:
                    write_all(fd, ZEROS[:m], pos + p)
        pos += n


def write_all(fd: int, data: bytes | bytearray | memoryview, pos: int) -> int:
    """Write all of ``data`` through the layer; on failure the ``OSError`` carries ``written``
    (the bytes that landed)."""
    view = memoryview(data)
    written = 0
    pwrite = LAYER.pwrite
    try:
        while written < len(view):
            n = pwrite(fd, view[written:], pos + written)
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written += n
    except OSError as e:
        e.written = written  # type: ignore[attr-defined]
        raise
    return written


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, pos: int, path: Path) -> None:
    """Write all of ``data`` at ``pos`` or nothing: on a failure (a full disk halfway through)
    the bytes that landed are zeroed again, then ``DiskFullError``/``FlushError`` is raised."""
    first = 0
    try:
        first = LAYER.pwrite(fd, data, pos)
        if first == len(data):  # the common case: one call wrote it all
            return
        write_all(fd, memoryview(data)[first:], pos + first)
    except OSError as e:
        written: int = first + getattr(e, "written", 0)
        if written:
            try:
                write_all(fd, bytes(written), pos)
            except OSError:
                log.error("could not zero the %d bytes of a failed write at %d of %s", written,
                          pos, path)
        raise write_error(path, f"write {len(data)} bytes at {pos} of", e) from e


def is_sparse(fd: int) -> bool:
    """Whether the file has fewer blocks than bytes (holes, or allocated ranges never written)."""
    st = os.fstat(fd)
    return st.st_blocks * 512 < st.st_size


def read_sparse(fd: int, size: int) -> mmap.mmap:
    """The first ``size`` bytes of the file in anonymous memory: only its data extents are read
    (``SEEK_DATA``/``SEEK_HOLE``), holes stay the zero pages of the anonymous mapping. Neither
    touches a hole of the file through a mapping, nor costs memory for one."""
    # private: a read of an untouched page maps the zero page (shared anonymous memory is shmem)
    buf = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                break  # only a hole remains
            raise
        if start >= size:
            break
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        view = memoryview(buf)
        try:
            while start < end:
                n = os.preadv(fd, [view[start:end]], start)
                if n <= 0:
                    break
                start += n
        finally:
            view.release()
        pos = end
    return buf
