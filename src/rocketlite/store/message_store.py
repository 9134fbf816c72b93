"""MessageStore: the storage engine's composition root. It wires the parts and owns their order of
start and stop; the rules live in the parts.

    put_messages ─► CommitLog.append ─► FlushService (group commit / interval) ─► Dispatcher
                                                                                 ├► ConsumeQueue
                                                                                 └► IndexService
    get_message ◄─ ConsumeQueue units ◄─ CommitLog bytes

Start-up: lock the store, open files, recover (see ``recovery``), trim ConsumeQueues and the index to
the CommitLog's valid end, re-dispatch what they miss, then write the ``abort`` file that marks a
running store. Shutdown drains dispatch, flushes everything, writes the checkpoint and removes
``abort``.

A full disk refuses writes, never kills the process: ``gate`` (a ``WriteGate``) collects why
(retention's disk ratio, a CommitLog segment that could not be allocated ahead, a dispatcher that
cannot write or reserve ConsumeQueue/index blocks), ``_check_writable`` raises ``DiskFullError``
with the first reason, and each source clears itself (or is retried every second by the retention
thread) once space returns. Reads never look at it.

A slave's store (``brokerRole=SLAVE``, 4.x HA) refuses sends (``SlaveModeError``) and takes its
master's CommitLog bytes with ``append_raw`` (and ``truncate_commitlog`` when its log diverged);
its dispatcher stops at the last whole record (``replica.whole_end``). A master's HA server reads
with ``read_commitlog`` and hears of appends through ``on_append``.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from rocketlite.common.errors import (
    DiskFullError,
    FlushError,
    FormatError,
    SlaveModeError,
    StoreClosedError,
    StoreError,
)
from rocketlite.formats import message_record as rec
from rocketlite.formats.message_id import decode_message_id, encode_message_id
from rocketlite.formats.properties import KEYS, UNIQ_KEY, decode_properties
from rocketlite.store import disk, replica, store_files
from rocketlite.store.checkpoint import StoreCheckpoint
from rocketlite.store.commitlog import CommitLog, now_ms
from rocketlite.store.config import StoreConfig
from rocketlite.store.consume_queue import ConsumeQueue
from rocketlite.store.dispatcher import Dispatcher
from rocketlite.store.flush import FlushService
from rocketlite.store.get_message import GetMessageResult, get_message
from rocketlite.store.index_service import IndexService
from rocketlite.store.mapped_file_queue import Allocator
from rocketlite.store.message import AppendResult, BatchAppendResult, MessageBatch, MessageToStore
from rocketlite.store.recovery import RecoveryResult, recover_commitlog
from rocketlite.store.retention import RetentionService
from rocketlite.store.write_gate import WriteGate

log = logging.getLogger(__name__)


# ConsumeQueues are flushed when 2 pages wait, and all of them every 60 s (RocketMQ's
# flushConsumeQueueLeastPages and flushConsumeQueueThoroughInterval); a crash rebuilds the rest
# from the CommitLog.
CQ_FLUSH_LEAST_BYTES = 2 * 4096
CQ_THOROUGH_FLUSH_INTERVAL_S = 60.0
NEW_QUEUE_ROOM = 64 << 10  # free bytes a message for a new queue needs (its first unit's block)


def _raise_open_file_limit() -> None:
    """Every ConsumeQueue segment keeps a mapping (and its descriptor): allow as many as we may."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass(slots=True)
class PutResult:
    results: list[AppendResult]
    flushed: Future[None] | None = None  # SYNC_FLUSH: completes when the batch is durable
    msg_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PutBatchResult:
    result: BatchAppendResult
    flushed: Future[None] | None = None  # SYNC_FLUSH: completes when the batch is durable


class MessageStore:
    def __init__(
        self,
        config: StoreConfig,
        clock: Callable[[], int] = now_ms,
        disk_usage: Callable[[Path], float] = store_files.disk_usage_ratio,
    ) -> None:
        self.config = config
        self.clock = clock
        self._lock_file = store_files.StoreLock()
        self.gate = WriteGate()
        self.allocator = Allocator(warm=config.warm_mapped_file_enable,
                                   on_failure=self._segment_failed)
        self.commitlog = CommitLog(config, self.allocator, clock)
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._queues_lock = threading.Lock()
        self._flush_lock = threading.Lock()  # ConsumeQueue flushes vs. topic deletion
        self.index: IndexService | None = (
            IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
            if config.message_index_enable
            else None
        )
        self.checkpoint: StoreCheckpoint | None = None
        self.dispatcher = Dispatcher(
            self.commitlog, self.consume_queue, self.index, self._dispatch_limit, self.gate
        )
        self._flushed_woken = -1  # the flushed offset the dispatcher was last woken for
        self.flusher = FlushService(
            self.commitlog,
            sync=config.sync_flush,
            interval_ms=config.flush_interval_commit_log,
            commit_interval_ms=(
                config.commit_interval_commit_log if config.transient_store_pool_enable else None
            ),
            on_flushed=self._on_flushed,
            periodic=self.flush_queues,
            periodic_interval_ms=config.flush_interval_consume_queue,
            on_committed=self.dispatcher.wake,
        )
        self.retention = RetentionService(self, disk_usage)
        self.recovery: RecoveryResult | None = None
        self._next_thorough_flush = 0.0
        self.running = False
        # ASYNC_FLUSH without the transient pool: appended records are dispatchable at once, so
        # the appender dispatches them itself (see Dispatcher.dispatch_inline).
        self.inline_dispatch = not config.sync_flush and not config.transient_store_pool_enable
        self.slave = config.is_slave
        self._whole_end = 0  # a slave's dispatch limit: the end of its last whole record
        # Called after every append (one call per batch, not per message; from the appending
        # thread): the master's HA server wakes its idle connections with it.
        self.on_append: Callable[[], None] | None = None

    @property
    def write_refused(self) -> str | None:
        """Why writes are refused right now (a full disk), or None."""
        return self.gate.reason

    def _segment_failed(self, path: Path, size: int, error: StoreError) -> None:
        """The allocator could not create the next CommitLog segment ahead: refuse writes now,
        while the current segment still has room, and retry every second."""
        self.gate.refuse("commitlog", str(error),
                         lambda: self.allocator.prepare_now(path, size))

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> MessageStore:
        if self.running:
            return self
        cfg = self.config
        _raise_open_file_limit()
        store_files.ensure_layout(cfg)
        self._lock_file.acquire(cfg.store_path_root_dir)
        try:
            self._load_and_recover()
        except BaseException:
            self._release_files()
            self._lock_file.release()
            raise
        store_files.create_abort_file(cfg.abort_path)
        self._whole_end = self.commitlog.max_offset  # recovery cut any torn record
        self.retention.run_once()  # decides at once whether the disk allows writes
        self.flusher.start()
        self.dispatcher.start()
        self.retention.start()
        self.running = True
        return self

    def _load_and_recover(self) -> None:
        cfg = self.config
        abnormal = store_files.abort_file_exists(cfg.abort_path)
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
        self.commitlog.load()
        self._load_queues()
        if self.index is not None:
            self.index.load()
        min_ts = self.checkpoint.min_timestamp(self.index is not None)
        self.recovery = result = recover_commitlog(self.commitlog, abnormal, min_ts)
        valid_end = result.valid_end
        self.commitlog.files.flush()
        for cq in self.queues.values():
            cq.recover()
            cq.truncate_dirty(valid_end)
        dispatch_from = max((cq.max_physic_end for cq in self.queues.values()), default=0)
        if self.index is not None:
            rebuild_from = self.index.truncate(valid_end)
            if rebuild_from is not None:
                dispatch_from = min(dispatch_from, rebuild_from)
            if self.index.end_phy_offset() > 0:
                dispatch_from = min(dispatch_from, self.index.end_phy_offset())
        if abnormal:
            # Queues and index are durable up to the checkpoint's smallest timestamp; rebuild
            # everything stored after it (units are rewritten in place, so overlap is harmless).
            dispatch_from = min(dispatch_from, result.redispatch_from)
        dispatch_from = max(min(dispatch_from, valid_end), self.commitlog.min_offset)
        log.info("dispatching CommitLog [%d, %d) to rebuild queues", dispatch_from, valid_end)
        self.dispatcher.dispatch_from = dispatch_from
        self.dispatcher.settled_end = valid_end
        table = self.commitlog.topic_queue_table
        try:
            self.dispatcher.dispatch_available(valid_end)
        except StoreError as e:
            # A full disk: start anyway (reads work), refusing writes until the dispatcher
            # thread has caught up; queue offsets of what is not dispatched yet come from the
            # records themselves.
            self.dispatcher.gate.refuse("dispatch", f"queues are not rebuilt yet: {e}")
            table.update(self.dispatcher.queue_ends(valid_end))
        cl_min = self.commitlog.min_offset
        for key, cq in self.queues.items():
            cq.correct_min_offset(cl_min)
            table[key] = max(table.get(key, 0), cq.max_offset)
        self.commitlog.files.prepare_next()  # the segment after the last, ahead of need
        self.flush_queues()

    def _load_queues(self) -> None:
        root = self.config.consume_queue_dir
        if not root.is_dir():
            return
        for topic_dir in sorted(root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if not (qdir.is_dir() and qdir.name.isdigit()):
                    continue
                cq = self.consume_queue(topic_dir.name, int(qdir.name))
                cq.load()

    def _release_files(self) -> None:
        """Close what a start that failed had opened, writing nothing: the files stay as they
        were found, and a process that retries (or a caller that reports and goes on) keeps no
        descriptors or mappings of them."""
        self.allocator.close()
        self.commitlog.close()
        for cq in self.queues.values():
            cq.files.close()
        self.queues.clear()
        if self.index is not None:
            self.index.close(flush=False)
        if self.checkpoint is not None:
            self.checkpoint.close(flush=False)

    def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        self.retention.shutdown()
        self.flusher.shutdown()
        self.dispatcher.shutdown()
        end = self.commitlog.max_offset
        try:
            self.dispatcher.dispatch_available(min(end, self._whole_end) if self.slave else end)
        except StoreError as e:  # a full disk: the next start re-dispatches the rest
            log.error("shutdown: dispatch stopped at CommitLog offset %d: %s",
                      self.dispatcher.dispatch_from, e)
        self.flush_queues()
        self.allocator.close()
        self.commitlog.close()
        for cq in self.queues.values():
            cq.close()
        if self.index is not None:
            self.index.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
        store_files.remove_abort_file(self.config.abort_path)
        self._lock_file.release()

    def halt(self) -> None:
        """Stop as a crash would: threads stop, files close, nothing more is flushed and the
        ``abort`` file stays (for crash tests; a kill -9 leaves the same state)."""
        if not self.running:
            return
        self.running = False
        self.retention.shutdown()
        self.flusher.halt()
        self.dispatcher.shutdown()
        self.allocator.close()
        self.commitlog.close()
        for cq in self.queues.values():
            cq.close()
        if self.index is not None:
            self.index.close(flush=False)
        self._lock_file.release()

    def __enter__(self) -> MessageStore:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- flushing ----------------------------------------------------------------------------

    def _dispatch_limit(self) -> int:
        cl = self.commitlog
        end = cl.flushed_offset if self.config.sync_flush else cl.committed_offset
        return min(end, self._whole_end) if self.slave else end

    def _on_flushed(self, flushed_offset: int, store_timestamp: int) -> None:
        cp = self.checkpoint
        if cp is not None and store_timestamp:
            cp.physic_msg_timestamp = store_timestamp
            cp.confirm_phy_offset = flushed_offset
        if self.config.sync_flush and flushed_offset != self._flushed_woken:
            # Only when the flush moved: the idle group commit runs every few ms, and waking the
            # dispatcher with nothing new made it retry a failing round at that pace.
            self._flushed_woken = flushed_offset
            self.dispatcher.wake()

    def flush_queues(self) -> None:
        """Flush dirty ConsumeQueues and the index, then the checkpoint (FlushConsumeQueueService)."""
        now = time.monotonic()
        thorough = not self.running or now >= self._next_thorough_flush
        if thorough:
            self._next_thorough_flush = now + CQ_THOROUGH_FLUSH_INTERVAL_S
        with self._flush_lock:
            dirty, logics_ts = self.dispatcher.take_dirty()
            least = 0 if thorough else CQ_FLUSH_LEAST_BYTES
            still_dirty = [cq for cq in dirty if not cq.flush(least)]
        if still_dirty:
            self.dispatcher.mark_dirty(still_dirty)
        cp = self.checkpoint
        if cp is None:
            return
        if logics_ts and thorough:
            # Only a thorough flush covers every queue up to this record.
            cp.logics_msg_timestamp = logics_ts
        if self.index is not None:
            # The dispatcher indexes each record as it dispatches it, so once the index is
            # flushed it covers everything dispatched before ``take_dirty`` (``logics_ts``), even
            # when those records had no keys to index.
            index_ts = max(self.index.flush(), logics_ts)
            if index_ts:
                cp.index_msg_timestamp = index_ts
        cp.flush()

    # -- writing -----------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if not self.running:
            raise StoreClosedError("the store is not running")
        if self.slave:
            raise SlaveModeError("the broker is a slave (brokerRole=SLAVE): sends go to the master")
        if self.gate.reason is not None:
            raise DiskFullError(self.gate.reason)
        err = self.flusher.last_error
        if err is not None and not self.config.sync_flush:
            raise FlushError(f"the store cannot write to disk: {err}")

    def _check_new_queue(self) -> None:
        """A message for a queue without a ConsumeQueue yet: its first file needs a block, so
        refuse it now on a disk that has none left, rather than starve the dispatcher later."""
        free = disk.free_bytes(self.config.consume_queue_dir)
        if free is not None and free < NEW_QUEUE_ROOM:
            raise DiskFullError(f"the disk is full: {free} bytes free for a new ConsumeQueue "
                                f"under {self.config.consume_queue_dir}")

    def put_messages(self, msgs: Sequence[MessageToStore]) -> PutResult:
        """Append a batch. Under SYNC_FLUSH, ``PutResult.flushed`` completes when it is durable."""
        self._check_writable()
        queues = self.queues
        for m in msgs:
            if (m.topic, m.queue_id) not in queues:
                self._check_new_queue()
                break
        results = self.commitlog.append(msgs)
        return PutResult(results, self._appended(results[-1].end_offset) if results else None)

    def put_batch(self, batch: MessageBatch) -> PutBatchResult:
        """Append a batch of one topic and queue (SEND_BATCH_MESSAGE); see ``put_messages``."""
        self._check_writable()
        if (batch.topic, batch.queue_id) not in self.queues:
            self._check_new_queue()
        result = self.commitlog.append_batch(batch)
        return PutBatchResult(result, self._appended(result.end_offset))

    def _appended(self, end_offset: int) -> Future[None] | None:
        """After an append up to ``end_offset``: SYNC_FLUSH, the future of the group commit that
        covers it; otherwise dispatch it (on this thread when allowed) and return None."""
        if self.on_append is not None:
            self.on_append()
        if self.config.sync_flush:
            return self.flusher.request(end_offset)
        if self.inline_dispatch:
            self.dispatcher.dispatch_inline()
        else:
            self.dispatcher.wake()
        return None

    # -- replication (4.x HA) ----------------------------------------------------------------

    def read_commitlog(self, offset: int, max_size: int) -> bytes | None:
        """A master's raw CommitLog bytes for a slave (``CommitLog.read_from``)."""
        return self.commitlog.read_from(offset, max_size)

    def append_raw(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """A slave's append of its master's bytes at its max offset (``CommitLog.append_raw``);
        flushed and dispatched as local appends are. Returns the new max offset."""
        if not self.running:
            raise StoreClosedError("the store is not running")
        cl = self.commitlog
        end = cl.append_raw(offset, data)
        self._whole_end, ts = replica.whole_end(cl, max(self._whole_end, cl.min_offset))
        if ts:
            cl.last_store_timestamp = ts
        self._appended(end)
        return end

    def set_slave(self, slave: bool) -> None:
        """Switch the store's role at runtime (controller mode, ``broker/ha/role.py``). A slave
        refuses sends and dispatches whole records only; on becoming master the log is first cut
        back to the end of its last whole record, so new appends never follow half a record
        copied from the old master, and the next queue offsets are taken from the queues."""
        if slave == self.slave:
            return
        if not slave:
            cl = self.commitlog
            if self._whole_end < cl.max_offset:
                self.truncate_commitlog(self._whole_end)
            # The next queue offsets: a slave's appends (``append_raw``) leave them to the
            # dispatch, so take them from the queues once every copied record is dispatched.
            self.dispatcher.dispatch_available(cl.max_offset)
            with self._queues_lock:
                for key, cq in self.queues.items():
                    cl.topic_queue_table[key] = max(cl.topic_queue_table.get(key, 0), cq.max_offset)
        else:
            self._whole_end = self.commitlog.max_offset
        self.slave = slave

    def truncate_commitlog(self, offset: int) -> None:
        """Cut a diverged slave's CommitLog, ConsumeQueues and index back to ``offset``."""
        with self.dispatcher.lock, self._queues_lock:
            replica.truncate(self.commitlog, list(self.queues.values()), self.index,
                             self.dispatcher, offset)
            self._whole_end = min(self._whole_end, offset)

    def put_messages_sync(self, msgs: Sequence[MessageToStore]) -> list[AppendResult]:
        """Append and, under SYNC_FLUSH, wait up to ``syncFlushTimeout`` for durability."""
        put = self.put_messages(msgs)
        if put.flushed is not None:
            FlushService.wait(put.flushed, self.config.sync_flush_timeout)
        return put.results

    def message_id(self, commit_log_offset: int) -> str:
        return encode_message_id(
            self.commitlog.store_host, self.commitlog.store_port, commit_log_offset
        )

    # -- queues ------------------------------------------------------------------------------

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.queues.get(key)
        if cq is None:
            with self._queues_lock:
                cq = self.queues.get(key)
                if cq is None:
                    directory = self.config.consume_queue_dir / topic / str(queue_id)
                    cq = ConsumeQueue(
                        topic, queue_id, directory, self.config.mapped_file_size_consume_queue
                    )
                    self.queues[key] = cq
        return cq

    def delete_topic(self, topic: str) -> int:
        """Drop a topic's ConsumeQueues (files too) and queue offsets; its CommitLog records stay
        until retention removes them (RocketMQ's ``deleteTopics``). Returns the queues dropped."""
        cl = self.commitlog
        with self._flush_lock, self.dispatcher.lock, self._queues_lock:
            dropped = [cq for (t, _), cq in self.queues.items() if t == topic]
            for cq in dropped:
                del self.queues[(topic, cq.queue_id)]
            self.dispatcher.forget_topic(topic)
            with cl.lock:
                for key in [k for k in cl.topic_queue_table if k[0] == topic]:
                    del cl.topic_queue_table[key]
            for cq in dropped:
                cq.close()
        shutil.rmtree(self.config.consume_queue_dir / topic, ignore_errors=True)
        return len(dropped)

    def drop_expired_queues(self, keep: Callable[[str], bool]) -> list[ConsumeQueue]:
        """Java's ``cleanExpiredConsumerQueue``: forget the ConsumeQueues (not of a topic ``keep``
        names) that had messages and have none left in the CommitLog, with their queue offsets,
        so the queue's next message is offset 0 again. A queue with a message stored but not
        dispatched yet stays. Returns the dropped queues, closed; their files are the caller's
        to remove (``remove_queue_files``)."""
        cl = self.commitlog
        dropped: list[ConsumeQueue] = []
        with self._flush_lock, self.dispatcher.lock, self._queues_lock:
            cl_min = cl.min_offset
            for key, cq in list(self.queues.items()):
                if keep(cq.topic) or cq.max_offset == 0:
                    continue
                last = cq.last_unit()
                if last is not None and last[0] >= cl_min:
                    continue
                with cl.lock:
                    if cl.topic_queue_table.get(key, 0) != cq.max_offset:
                        continue
                    cl.topic_queue_table.pop(key, None)
                del self.queues[key]
                self.dispatcher.forget_queue(cq)
                dropped.append(cq)
            for cq in dropped:
                cq.close()
        return dropped

    def remove_queue_files(self, queues: Sequence[ConsumeQueue]) -> None:
        """Delete dropped queues' directories (and their topic's, once empty)."""
        for cq in queues:
            topic_dir = self.config.consume_queue_dir / cq.topic
            shutil.rmtree(topic_dir / str(cq.queue_id), ignore_errors=True)
            with contextlib.suppress(OSError):
                topic_dir.rmdir()  # only if empty

    def find_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_queue(topic, queue_id)
        return cq.max_offset if cq else 0

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_queue(topic, queue_id)
        return cq.min_offset if cq else 0

    # -- reading -----------------------------------------------------------------------------

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        max_bytes: int = 1 << 20,
        tag_filter: Callable[[int], bool] | None = None,
    ) -> GetMessageResult:
        return get_message(
            self.commitlog, self.find_queue(topic, queue_id), offset, max_count, max_bytes,
            tag_filter,
        )

    def look_message(self, commit_log_offset: int) -> rec.MessageRecord | None:
        return self.commitlog.read_record(commit_log_offset)

    def read_raw(self, commit_log_offset: int, size: int) -> bytes | None:
        return self.commitlog.read(commit_log_offset, size)

    def look_message_by_id(self, msg_id: str) -> rec.MessageRecord | None:
        try:
            _, _, offset = decode_message_id(msg_id)
        except FormatError:
            return None
        if offset < self.commitlog.min_offset or offset >= self.commitlog.max_offset:
            return None
        try:
            return self.look_message(offset)
        except FormatError:
            return None

    def query_message(
        self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int = 1 << 62
    ) -> list[rec.MessageRecord]:
        """Messages of ``topic`` whose KEYS or UNIQ_KEY contain ``key``, stored in the time range."""
        if self.index is None:
            return []
        out: list[rec.MessageRecord] = []
        # The index holds only hashes: ask for more than needed and verify each candidate.
        for offset in self.index.query(topic, key, max_num * 4, begin_ms, end_ms):
            if offset < self.commitlog.min_offset:
                continue
            try:
                m = self.look_message(offset)
            except FormatError:
                continue
            if m is None or m.topic != topic:
                continue
            props = decode_properties(m.properties_text)
            keys = props.get(KEYS, "").split(" ")
            if key in keys or props.get(UNIQ_KEY) == key:
                out.append(m)
                if len(out) >= max_num:
                    break
        return out

    def offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset stored at or after ``timestamp_ms`` (max offset if none)."""
        cq = self.find_queue(topic, queue_id)
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            unit = cq.get_unit(mid)
            ts = self._unit_time(unit[0]) if unit else -1
            if ts is not None and ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def message_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at ``offset`` of a queue (Java's
        ``getMessageStoreTimeStamp``); -1 if there is none (any more)."""
        cq = self.find_queue(topic, queue_id)
        unit = cq.get_unit(offset) if cq is not None and offset >= cq.min_offset else None
        if unit is None:
            return -1
        try:
            ts = self._unit_time(unit[0])
        except StoreError:  # its segment was deleted meanwhile
            return -1
        return -1 if ts is None else ts

    def _unit_time(self, commit_log_offset: int) -> int | None:
        if commit_log_offset < self.commitlog.min_offset:
            return -1
        return self.commitlog.store_timestamp_at(commit_log_offset)

    def earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message (of a queue, or of the whole store); -1 if none."""
        cl = self.commitlog
        if topic is None:
            if cl.max_offset <= cl.min_offset:
                return -1
            return cl.store_timestamp_at(cl.min_offset)
        cq = self.find_queue(topic, queue_id)
        unit = cq.get_unit(cq.min_offset) if cq else None
        if unit is None or unit[0] < cl.min_offset:
            return -1
        return cl.store_timestamp_at(unit[0])

    @property
    def root(self) -> Path:
        return self.config.store_path_root_dir
