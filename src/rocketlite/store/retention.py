"""Retention: deleting expired CommitLog files and keeping disk use in bounds (seed S11).

One ``run_once`` (every ``cleanResourceInterval``, 10 s, or on a manual trigger):

1. Measure disk use of the store's filesystem (the probe is injectable for tests).
   Above ``diskSpaceWarningLevelRatio`` (90 %) the store refuses writes with an error naming the
   path, the ratio and the threshold; below it again, writes resume by themselves. (The other
   full-disk refusals, a segment or blocks that could not be allocated ahead, are retried by this
   thread every second while they last: ``WriteGate.retry``.)
2. Delete when it is ``deleteWhen`` o'clock (04), when use passes ``diskMaxUsedSpaceRatio`` (75 %),
   or on a manual trigger. Only files older than ``fileReservedTime`` (72 h) go, unless use passes
   ``diskSpaceCleanForciblyRatio`` (85 %): then the oldest go regardless of age, unless
   ``cleanFileForciblyEnable`` is false (RocketMQ's switch for it): then passing that ratio
   deletes expired files only.
3. Head first only: walk from the oldest segment and stop at the first one that must stay; never
   the segment being written; at most ``deleteFileBatchMax`` files per run.
4. ConsumeQueue files and IndexFiles pointing only below the new CommitLog minimum go in the same
   run, and every queue's minimum offset is corrected.

Consumption progress is not considered (RocketMQ does not either). Deleted segments are unlinked at
once; their mappings are closed one run later so that a reader still holding one is not cut off
(RocketMQ's ``destroyMapedFileIntervalForcibly``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocketlite.store.mapped_file import MappedFile
from rocketlite.store.store_files import disk_usage_ratio

if TYPE_CHECKING:
    from rocketlite.store.message_store import MessageStore

log = logging.getLogger(__name__)

RETRY_S = 1.0  # how often a failed allocation is retried while writes are refused


@dataclass(frozen=True, slots=True)
class RetentionReport:
    disk_ratio: float
    triggered_by: str  # "", "time", "space", "forced", "manual"
    commitlog_files_deleted: int
    consume_queue_files_deleted: int
    index_files_deleted: int
    writes_refused: bool


class RetentionService:
    def __init__(
        self,
        store: MessageStore,
        disk_usage: Callable[[Path], float] = disk_usage_ratio,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.disk_usage = disk_usage
        self.clock = clock
        self._retired: list[MappedFile] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _is_delete_hour(self, now: float) -> bool:
        hour = time.localtime(now).tm_hour
        return any(int(h) == hour for h in self.store.config.delete_when.split(";"))

    def _update_write_gate(self, ratio: float) -> bool:
        cfg = self.store.config
        limit = cfg.disk_space_warning_level_ratio / 100
        gate = self.store.gate
        if ratio > limit:
            gate.refuse("disk", (
                f"disk holding the store {cfg.store_path_root_dir} is {ratio:.1%} full, above "
                f"diskSpaceWarningLevelRatio {cfg.disk_space_warning_level_ratio}%: writes are "
                "refused until space is freed"
            ))
            return True
        if gate.refused("disk"):
            log.warning("disk use is %.1f%%, below the limit again", ratio * 100)
            gate.clear("disk")
        return False

    def run_once(self, manual: bool = False) -> RetentionReport:
        with self._lock:
            return self._run_once(manual)

    def _run_once(self, manual: bool) -> RetentionReport:
        cfg = self.store.config
        for mf in self._retired:
            mf.close()
        self._retired = []
        now = self.clock()
        ratio = self.disk_usage(cfg.store_path_root_dir)
        refused = self._update_write_gate(ratio)
        over_forcibly = ratio > cfg.disk_space_clean_forcibly_ratio / 100
        forced = over_forcibly and cfg.clean_file_forcibly_enable
        if manual:
            trigger = "manual"
        elif forced:
            trigger = "forced"
        elif over_forcibly or ratio > cfg.disk_max_used_space_ratio / 100:
            trigger = "space"
        elif self._is_delete_hour(now):
            trigger = "time"
        else:
            return RetentionReport(ratio, "", 0, 0, 0, refused)
        cl_deleted = self._delete_commitlog(now, forced)
        cq_deleted, index_deleted = self._delete_queues_and_index()
        if cl_deleted:
            log.info("retention (%s, disk %.1f%%): deleted %d CommitLog, %d ConsumeQueue, "
                     "%d index files", trigger, ratio * 100, cl_deleted, cq_deleted, index_deleted)
            ratio = self.disk_usage(cfg.store_path_root_dir)
            refused = self._update_write_gate(ratio)
        return RetentionReport(ratio, trigger, cl_deleted, cq_deleted, index_deleted, refused)

    def _delete_commitlog(self, now: float, forced: bool) -> int:
        cfg = self.store.config
        files = self.store.commitlog.files
        reserved_s = cfg.file_reserved_time * 3600
        deleted = 0
        while deleted < cfg.delete_file_batch_max and len(files.files) > 1:
            head = files.files[0]
            if not forced and head.mtime() + reserved_s > now:
                break
            if head.file_from_offset + head.file_size > self.store.dispatcher.dispatch_from:
                break  # not yet dispatched: its messages would vanish from the queues unseen
            mf = files.retire_first()
            if mf is None:
                break
            self._retired.append(mf)
            deleted += 1
        return deleted

    def _delete_queues_and_index(self) -> tuple[int, int]:
        cl_min = self.store.commitlog.min_offset
        cq_deleted = 0
        for cq in list(self.store.queues.values()):
            retired = cq.delete_expired(cl_min)
            cq_deleted += len(retired)
            self._retired.extend(retired)
        index = self.store.index
        index_deleted = index.delete_expired(cl_min) if index is not None else 0
        return cq_deleted, index_deleted

    # -- background thread -------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="retention", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        interval = self.store.config.clean_resource_interval / 1000
        gate = self.store.gate
        next_run = time.monotonic() + interval
        while True:  # wakes every RETRY_S: a refusal with a retry may have come meanwhile
            if self._stop.wait(max(0.0, min(next_run - time.monotonic(), RETRY_S))):
                return
            try:
                if gate.retry_pending:
                    gate.retry()  # space may have returned: allocate what was missing
            except Exception:  # the thread must keep retrying and deleting
                log.exception("retrying refused writes failed")
            if time.monotonic() < next_run:
                continue
            next_run = time.monotonic() + interval
            try:
                self.run_once()
            except Exception:  # retention must keep running
                log.exception("retention run failed")

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for mf in self._retired:
            mf.close()
        self._retired = []
