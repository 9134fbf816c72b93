"""Files of the store root other than the logs: the lock, the abort marker, JSON config files.

* ``StoreLock``: an exclusive ``flock`` on ``<root>/lock`` holding the owner's pid, so two
  processes never open one store (RocketMQ locks the same file with ``FileChannel.tryLock``).
* ``atomic_write_json`` / ``read_json``: config files written through a temp file and a rename,
  with the previous good version kept as ``<name>.bak`` (RocketMQ ``ConfigManager``/``MixAll``).
* the ``abort`` marker: present while a store runs, so its presence at start means a crash.
* ``ensure_layout`` and ``disk_usage_ratio``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from collections.abc import Callable
from pathlib import Path

import orjson

from rocketlite.common.errors import StoreLockedError
from rocketlite.store import disk
from rocketlite.store.config import StoreConfig

log = logging.getLogger(__name__)

LOCK_FILE = "lock"


def fsync_dir(path: Path) -> None:
    """fsync a directory, making creates, renames and unlinks in it durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, data: bytes) -> None:
    """Write ``path`` whole and fsync it (``OSError``, ENOSPC on a full disk)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        disk.write_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


# -- lock --------------------------------------------------------------------------------------


class StoreLock:
    """An exclusive non-blocking ``flock`` on ``<root>/lock``; the file holds the owner's pid.

    The lock belongs to the open file, so a second ``StoreLock`` on the same root fails even in
    the same process. The kernel drops it when the process dies, however it dies.
    """

    def __init__(self) -> None:
        self._fd: int | None = None
        self._root: Path | None = None

    @property
    def locked(self) -> bool:
        return self._fd is not None

    def acquire(self, root: Path) -> None:
        """Lock the store at ``root`` (the directory must exist) or raise ``StoreLockedError``."""
        if self._fd is not None:
            raise StoreLockedError(f"this StoreLock already holds the store {self._root}")
        root = Path(root)
        path = root / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            other = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            owner = f" (pid {other})" if other.isdigit() else ""
            raise StoreLockedError(
                f"the store {root} is in use by another process{owner}: {path} is locked"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:  # the pid is for people; the lock is the flock (a full disk)
            log.warning("cannot write the pid into %s: %s", path, e)
        self._fd, self._root = fd, root

    def release(self) -> None:
        """Unlock; the lock file stays. A second call does nothing."""
        fd, self._fd, self._root = self._fd, None, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def lock_holder(root: Path) -> str | None:
    """Who holds the store's lock right now: the owner's pid as text ("" when the lock file does
    not name it), or None when no process holds it (a read-only look: nothing is locked)."""
    path = Path(root) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            other = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
            return other if other.isdigit() else ""
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


# -- JSON config files -------------------------------------------------------------------------


def _bak(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def _is_json(data: bytes) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


def atomic_write_json(path: Path, obj: object) -> None:
    """Write ``obj`` as JSON to ``path`` so that a crash leaves the old or the new content."""
    atomic_write_bytes(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))


def atomic_write_bytes(
    path: Path, data: bytes, is_valid: Callable[[bytes], bool] = _is_json
) -> None:
    """Write a config file so that a crash leaves the old or the new content.

    Write ``<path>.tmp`` and fsync it; make the current ``path`` (if ``is_valid`` accepts it) the
    new ``<path>.bak``; rename the temp file over ``path``; fsync the directory. A corrupt current
    file is not kept, so ``.bak`` keeps the last good version. On a full disk this raises
    ``OSError`` (ENOSPC) and leaves ``path`` and ``.bak`` as they were.
    """
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        _write_durably(tmp, data)
        try:
            current: bytes | None = path.read_bytes()
        except FileNotFoundError:
            current = None
        if current is not None:
            if is_valid(current):
                _keep_as_backup(path, current)
            else:
                log.warning("%s is corrupt; not copying it over %s", path, _bak(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def _keep_as_backup(path: Path, current: bytes) -> None:
    """Make ``path``'s current content the ``.bak``: a hard link (no data to write: works on a
    full disk, and a failure leaves the old ``.bak`` whole), else a copy through a temp file."""
    bak = _bak(path)
    tmp = bak.with_suffix(bak.suffix + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(path, tmp)
        except OSError:
            _write_durably(tmp, current)  # no hard links on this filesystem
        os.replace(tmp, bak)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def read_json(
    path: Path,
    loads: Callable[[bytes], object] = orjson.loads,
    errors: tuple[type[Exception], ...] = (orjson.JSONDecodeError,),
) -> object | None:
    """Read a JSON config file; if it is missing or corrupt, its ``.bak``; else ``None``.

    ``loads`` and ``errors`` allow other dialects (fastjson's bare integer keys)."""
    problem = "missing"
    caught: tuple[type[Exception], ...] = (OSError, *errors)
    for candidate in (path, _bak(path)):
        try:
            value: object = loads(candidate.read_bytes())
        except FileNotFoundError:
            continue
        except caught as e:
            log.warning("config file %s is unreadable or corrupt: %s", candidate, e)
            if candidate == path:
                problem = "corrupt"
            continue
        if candidate != path:
            log.warning("config file %s is %s; using its backup %s", path, problem, candidate)
        return value
    return None


# -- abort marker ------------------------------------------------------------------------------


def create_abort_file(path: Path) -> None:
    """Create the ``abort`` marker (durably): the store is running."""
    path.touch()
    fsync_dir(path.parent)


def abort_file_exists(path: Path) -> bool:
    """Whether the marker is left from a run that did not shut down cleanly."""
    return path.exists()


def remove_abort_file(path: Path) -> None:
    """Remove the marker (durably) after a clean shutdown; a missing marker is fine."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fsync_dir(path.parent)


# -- layout and disk -------------------------------------------------------------------------


def ensure_layout(config: StoreConfig) -> None:
    """Create the store root and its commitlog/, consumequeue/, index/ and config/ directories."""
    for d in (config.store_path_root_dir, config.commit_log_dir, config.consume_queue_dir,
              config.index_dir, config.config_dir):
        d.mkdir(parents=True, exist_ok=True)


def disk_usage_ratio(path: Path) -> float:
    """Used share (0..1) of the filesystem holding ``path`` (or its nearest existing parent).

    As ``UtilAll.getDiskPartitionSpaceUsedPercent``: used = total - free, out of used + the space
    available to unprivileged users, rounded up to a whole percent.
    """
    used, available = disk.space(path)
    entire = used + available
    if entire <= 0:
        return 0.0
    return min(1.0, -(-used * 100 // entire) / 100)
