"""Files of the store root other than the logs: the lock, the abort marker, JSON config files."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
from pathlib import Path

import orjson

from rocketlite.common.errors import StoreLockedError
from rocketlite.store.config import StoreConfig

log = logging.getLogger(__name__)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class StoreLock:
    """An exclusive ``flock`` on ``<root>/lock``, so two processes never open one store."""

    def __init__(self) -> None:
        self._fd: int | None = None

    def acquire(self, root: Path) -> None:
        path = root / "lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise StoreLockedError(
                f"the store {root} is in use by another process"
                + (f" (pid {other})" if other else "")
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def atomic_write_json(path: Path, obj: object) -> None:
    """Write JSON to a temp file, fsync, keep the old file as ``.bak``, rename into place."""
    data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if path.exists():
        bak = path.with_name(path.name + ".bak")
        shutil.copyfile(path, bak)
        with bak.open("rb+") as f:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_json(path: Path) -> object | None:
    """Read a JSON config file, falling back to its ``.bak`` when it is missing or corrupt."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            value: object = orjson.loads(candidate.read_bytes())
            return value
        except FileNotFoundError:
            continue
        except orjson.JSONDecodeError:
            log.warning("config file %s is corrupt; trying its backup", candidate)
    return None


def create_abort_file(path: Path) -> None:
    path.touch()
    _fsync_dir(path.parent)


def abort_file_exists(path: Path) -> bool:
    return path.exists()


def remove_abort_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    _fsync_dir(path.parent)


def ensure_layout(config: StoreConfig) -> None:
    for d in (config.store_path_root_dir, config.commit_log_dir, config.consume_queue_dir,
              config.index_dir, config.config_dir):
        d.mkdir(parents=True, exist_ok=True)


def disk_usage_ratio(path: Path) -> float:
    """Used share (0..1) of the filesystem holding ``path``."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    if total == 0:
        return 0.0
    free = st.f_bavail * st.f_frsize
    return (total - free) / total
