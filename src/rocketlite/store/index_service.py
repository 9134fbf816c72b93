"""IndexService: the ``index/`` directory of IndexFiles (RocketMQ's ``store/index/IndexService.java``).

What it owns: the list of IndexFiles, oldest first, named by creation time ``yyyyMMddHHmmssSSS``
(local time, like Java); rolling to a new file when the newest is full; building entries for
``topic#key`` of each KEYS entry and of UNIQ_KEY; answering key queries across files; the
recovery cut (``truncate``) and retention (``delete_expired``).

Every file in the list holds at least one entry: a file is created only to take an entry, and
``load`` deletes empty ones. An unreadable file (wrong size, impossible header) is deleted at
``load`` with a warning rather than stopping the store: the index is derived data, and the
dispatcher rebuilds whatever recovery asks it to re-dispatch.

Results of ``query`` are *candidates*: only key hashes are stored, so the caller must read each
message and check it really carries the key (``MessageStore.query_message`` does).

Thread safety: ``build``, ``query``, ``truncate``, ``delete_expired`` and ``close`` hold one lock.
``flush`` takes the lock only to pick the file, then runs ``fdatasync`` outside it so the dispatcher
is not stalled behind the disk.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from rocketlite.common import native
from rocketlite.common.errors import DiskFullError, FlushError, StoreError
from rocketlite.formats.index_entries import key_entries
from rocketlite.formats.javahash import index_key_hash
from rocketlite.store.index_file import IndexFile

log = logging.getLogger(__name__)
_NAME = re.compile(r"^\d{17}$")
_NONE = -(1 << 63)  # no file yet: no message was indexed before


def index_file_name(ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` of the epoch-milliseconds ``ms`` in local time."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ms // 1000)) + f"{ms % 1000:03d}"


def index_key(topic: str, key: str) -> str:
    """The string that is hashed into the index: ``topic#key``."""
    return f"{topic}#{key}"


def _key_hash_entries_py(
    topics: Sequence[str], props: Sequence[bytes], phy_offsets: Sequence[int],
    timestamps: Sequence[int], done: int,
) -> tuple[list[int], list[int], list[int], int]:
    """``index_entries.key_entries`` with each key's ``index_key_hash`` in its place (what the
    IndexFile stores of it): the compiled twin (``_index_c.key_hash_entries``) hashes the ASCII
    keys without making them."""
    keys, phys, stamps, done = key_entries(topics, props, phy_offsets, timestamps, done)
    return list(map(index_key_hash, keys)), phys, stamps, done


key_hash_entries: Callable[
    [Sequence[str], Sequence[bytes], Sequence[int], Sequence[int], int],
    tuple[list[int], list[int], list[int], int],
] = _key_hash_entries_py
_c = native.load("rocketlite.formats._index_c")
if _c is not None:
    key_hash_entries = _c.key_hash_entries


class IndexService:
    def __init__(self, directory: Path, hash_slot_num: int, index_num: int) -> None:
        self.directory = directory
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        self._spare: IndexFile | None = None  # the next file, created before a message needs it
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    def load(self) -> None:
        """Open every ``yyyyMMddHHmmssSSS`` file in name order; delete unusable or empty ones."""
        if not self.directory.is_dir():
            return
        with self._lock:
            if self.files:
                raise StoreError(f"index service {self.directory} is already loaded")
            for path in sorted(self.directory.iterdir()):
                if not _NAME.match(path.name) or not path.is_file():
                    continue
                try:
                    f = IndexFile(path, self.hash_slot_num, self.index_num)
                except (StoreError, OSError, ValueError) as e:
                    log.warning("index file %s is unusable (%s); deleted, dispatch rebuilds it",
                                path, e)
                    path.unlink(missing_ok=True)
                    continue
                if f.entries == 0:
                    log.info("index file %s has no entries; deleted", path)
                    f.destroy()
                    continue
                self.files.append(f)

    def close(self, *, flush: bool = True) -> None:
        """Flush (unless ``flush=False``) and close every file (all are closed even if a flush
        fails; the first FlushError is raised afterwards). The service may be loaded again."""
        with self._lock:
            files, self.files = self.files, []
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.destroy()  # empty
        error: FlushError | None = None
        for f in files:
            try:
                f.close(flush=flush)
            except FlushError as e:
                error = error or e
                f.close(flush=False)
        if error is not None:
            raise error

    # -- building ----------------------------------------------------------------------------

    def _next_path(self) -> Path:
        """A fresh name: now, or one past the newest file if the clock went back (names must
        sort in creation order for ``load``); bumped by 1 ms while taken."""
        n = int(index_file_name(time.time_ns() // 1_000_000))
        if self.files:
            n = max(n, int(self.files[-1].path.name) + 1)
        while (path := self.directory / f"{n:017d}").exists():
            n += 1
        return path

    def _create_file(self) -> IndexFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        f = IndexFile(self._next_path(), self.hash_slot_num, self.index_num, create=True)
        log.info("created index file %s", f.path.name)
        return f

    def _new_file(self) -> IndexFile:
        f, self._spare = self._spare or self._create_file(), None
        self.files.append(f)
        return f

    def build(self, topic: str, keys: Iterable[str], uniq_key: str | None, phy_offset: int,
              store_timestamp: int) -> None:
        """Index the message at ``phy_offset`` under ``topic#k`` for its UNIQ_KEY and each KEYS
        entry (stripped; empty and repeated ones skipped).

        A message at or below the newest file's ``endPhyOffset`` is skipped: it was indexed before
        (re-dispatch after recovery). RocketMQ skips only offsets strictly below, re-indexing the
        last message on every restart; ``<=`` avoids those duplicates.
        """
        wanted = [uniq_key.strip()] if uniq_key else []
        wanted.extend(k.strip() for k in keys)
        full_keys = [index_key(topic, k) for k in dict.fromkeys(wanted) if k]
        if not full_keys:
            return
        filled: list[IndexFile] = []
        with self._lock:
            last = self.files[-1] if self.files else None
            if last is not None and phy_offset <= last.end_phy_offset:
                return
            # Blocks for every key before any is written (in this file and, when they spill, the
            # next one): a full disk fails the message whole and the dispatcher's retry indexes it
            # whole.
            if last is not None:
                last.reserve(len(full_keys))
            if last is not None and last.entries_left < len(full_keys) and self._spare is None:
                self._spare = self._create_file()
            for full in full_keys:
                if last is None or not last.put(full, phy_offset, store_timestamp):
                    if last is not None:
                        filled.append(last)
                    last = self._new_file()
                    last.put(full, phy_offset, store_timestamp)
        for f in filled:  # make a full file durable once, outside the lock
            f.flush()

    def build_many(self, topics: Sequence[str], props: Sequence[bytes],
                   phy_offsets: Sequence[int], timestamps: Sequence[int]) -> None:
        """``build`` for a run of messages in CommitLog order, given by their topics and encoded
        properties (``key_hash_entries`` reads their KEYS and UNIQ_KEY and hashes the keys): the
        same entries, written with one ``IndexFile.put_many`` per file. The blocks for every key are
        reserved first: a full disk fails the run whole (the dispatcher's retry skips what an
        earlier attempt indexed)."""
        with self._lock:
            last = self.files[-1] if self.files else None
            full, phys, stamps, _ = key_hash_entries(
                topics, props, phy_offsets, timestamps, _NONE if last is None else last.end_phy_offset
            )
            if not full:
                return
            filled: list[IndexFile] = []
            if last is not None:
                last.reserve(len(full))
            if last is not None and last.entries_left < len(full) and self._spare is None:
                self._spare = self._create_file()
            at = 0
            while at < len(full):
                if last is None or last.is_full():
                    if last is not None:
                        filled.append(last)
                    last = self._new_file()
                at += (last.put_many(full, phys, stamps) if at == 0 else
                       last.put_many(full[at:], phys[at:], stamps[at:]))
        for f in filled:  # make a full file durable once, outside the lock
            f.flush()

    # -- reading -----------------------------------------------------------------------------

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Candidate CommitLog offsets for ``topic#key`` stored in [begin_ms, end_ms], newest first,
        at most ``max_num``. Offsets of colliding keys may be included: verify each message."""
        out: list[int] = []
        if max_num <= 0:
            return out
        full = index_key(topic, key)
        with self._lock:
            for f in reversed(self.files):
                if f.time_overlaps(begin_ms, end_ms):
                    out.extend(f.select(full, max_num - len(out), begin_ms, end_ms))
                    if len(out) >= max_num:
                        break
                if f.begin_timestamp < begin_ms:
                    break  # older files end before this one began: before the range
        return out

    @property
    def short(self) -> DiskFullError | None:
        """Why the newest file has no blocks ahead of its next entries (a full disk), or None."""
        files = self.files
        return files[-1].short if files else None

    def reserve_ahead(self) -> DiskFullError | None:
        """Retry allocating the blocks ahead of the newest file's entries; the error if it fails
        again (raised when even the next entry has none)."""
        with self._lock:
            return self.files[-1].reserve_ahead() if self.files else None

    def end_phy_offset(self) -> int:
        """Offset of the newest indexed message (0 when there is no index yet)."""
        with self._lock:
            return self.files[-1].end_phy_offset if self.files else 0

    def last_update_timestamp(self) -> int:
        """Store time of the newest indexed message (0 when there is no index yet)."""
        with self._lock:
            return self.files[-1].end_timestamp if self.files else 0

    # -- durability, recovery, retention -----------------------------------------------------

    def flush(self) -> int:
        """Flush the newest file (full ones were flushed when rolled); return the store time of
        the newest entry now durable, for the checkpoint's ``indexMsgTimestamp`` (0: none)."""
        with self._lock:
            if not self.files:
                return 0
            last = self.files[-1]
            covered = last.end_timestamp  # read before the flush: everything up to it is synced
        last.flush()
        return covered

    def truncate(self, offset: int) -> int | None:
        """Drop every file holding an entry at or past ``offset`` (the CommitLog was cut there).

        Whole files go, even one that also indexes earlier messages: entries are chained through
        shared slots, so they cannot be cut out cheaply, and RocketMQ likewise destroys whole files
        on recovery. Returns the lowest ``beginPhyOffset`` among dropped files (None if none):
        dispatch must restart there to rebuild what they held. Queries meanwhile are best effort.
        """
        rebuild_from: int | None = None
        with self._lock:
            kept: list[IndexFile] = []
            for f in self.files:
                if f.end_phy_offset < offset:
                    kept.append(f)
                    continue
                log.info("recovery: dropping index file %s (phy [%d, %d], cut at %d)",
                         f.path.name, f.begin_phy_offset, f.end_phy_offset, offset)
                rebuild_from = (f.begin_phy_offset if rebuild_from is None
                                else min(rebuild_from, f.begin_phy_offset))
                f.destroy()
            self.files = kept
        return rebuild_from

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Delete files whose entries all point below ``min_commit_log_offset`` (the newest file is
        always kept); return how many went."""
        deleted = 0
        with self._lock:
            while len(self.files) > 1 and self.files[0].end_phy_offset < min_commit_log_offset:
                f = self.files.pop(0)
                log.info("deleting expired index file %s (ends at %d < %d)", f.path.name,
                         f.end_phy_offset, min_commit_log_offset)
                f.destroy()
                deleted += 1
        return deleted
