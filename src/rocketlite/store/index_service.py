"""IndexService: the ``index/`` directory of IndexFiles, named by creation time
``yyyyMMddHHmmssSSS``; builds entries for ``topic#key`` and answers key queries (seed S6)."""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

from rocketlite.common.errors import StoreError
from rocketlite.store.index_file import IndexFile

log = logging.getLogger(__name__)
_NAME = re.compile(r"^\d{17}$")


def _file_name(ms: int) -> str:
    t = time.localtime(ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"


class IndexService:
    def __init__(self, directory: Path, hash_slot_num: int, index_num: int) -> None:
        self.directory = directory
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.iterdir()):
            if not _NAME.match(path.name):
                continue
            try:
                self.files.append(IndexFile(path, self.hash_slot_num, self.index_num))
            except (StoreError, OSError, ValueError) as e:
                log.warning("index file %s is unusable (%s); deleting it, dispatch rebuilds", path,
                            e)
                path.unlink(missing_ok=True)

    def _new_file(self) -> IndexFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        ms = time.time_ns() // 1_000_000
        while (self.directory / _file_name(ms)).exists():
            ms += 1
        f = IndexFile(self.directory / _file_name(ms), self.hash_slot_num, self.index_num)
        self.files.append(f)
        return f

    def end_phy_offset(self) -> int:
        return self.files[-1].end_phy_offset if self.files else 0

    def build(self, topic: str, keys: list[str], uniq_key: str | None, phy_offset: int,
              store_timestamp: int) -> None:
        with self._lock:
            last = self.files[-1] if self.files else None
            if last is not None and last.entries and phy_offset <= last.end_phy_offset:
                return  # already indexed (re-dispatch after recovery)
            for key in ([*keys, uniq_key] if uniq_key else keys):
                if not key:
                    continue
                full = f"{topic}#{key}"
                if last is None or not last.put(full, phy_offset, store_timestamp):
                    if last is not None:
                        last.flush()
                    last = self._new_file()
                    last.put(full, phy_offset, store_timestamp)

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        out: list[int] = []
        full = f"{topic}#{key}"
        with self._lock:
            for f in reversed(self.files):
                if not f.entries or f.end_timestamp < begin_ms or f.begin_timestamp > end_ms:
                    continue
                out.extend(f.select(full, max_num - len(out), begin_ms, end_ms))
                if len(out) >= max_num:
                    break
        return out

    def flush(self) -> int:
        """Flush the newest file; return the store time it covers (for the checkpoint)."""
        with self._lock:
            if not self.files:
                return 0
            last = self.files[-1]
            last.flush()
            return int(last.end_timestamp)

    def truncate(self, offset: int) -> int | None:
        """Drop index files holding entries at or past ``offset`` (the CommitLog was cut there).

        Whole files go, even if they also index earlier messages; the returned begin offset of the
        oldest dropped file (None if none) is where dispatch must restart to rebuild them.
        """
        rebuild_from: int | None = None
        with self._lock:
            while self.files and self.files[-1].end_phy_offset >= offset and self.files[-1].entries:
                f = self.files.pop()
                rebuild_from = f.begin_phy_offset
                log.info("recovery: dropping index file %s (ends at %d >= %d)", f.path.name,
                         f.end_phy_offset, offset)
                f.destroy()
        return rebuild_from

    def delete_expired(self, min_commit_log_offset: int) -> int:
        deleted = 0
        with self._lock:
            while len(self.files) > 1 and self.files[0].end_phy_offset < min_commit_log_offset:
                self.files.pop(0).destroy()
                deleted += 1
        return deleted

    def close(self) -> None:
        with self._lock:
            for f in self.files:
                f.close()
            self.files = []
