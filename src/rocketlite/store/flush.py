"""Flushing the CommitLog to disk (seed S10).

* SYNC_FLUSH, group commit: every append registers ``(end_offset, Future)``; the flush thread takes
  everything written since its last ``fdatasync`` as one batch, syncs once, and completes every
  future whose end offset is now durable. It idles 10 ms when nothing waits. A writer that waits
  longer than ``syncFlushTimeout`` gets ``FlushTimeoutError`` (its record is stored, not confirmed).
* ASYNC_FLUSH: the same thread syncs every ``flushIntervalCommitLog`` ms.

An ``fdatasync`` failure fails every waiting future with ``FlushError`` and is retried on the next
round; it is never swallowed. After each CommitLog flush the checkpoint's physicMsgTimestamp is set to
the store time of the last record the flush covered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from rocketlite.common.errors import FlushError, FlushTimeoutError
from rocketlite.store.commitlog import CommitLog

log = logging.getLogger(__name__)

SYNC_IDLE_S = 0.010


class FlushService:
    def __init__(
        self,
        commitlog: CommitLog,
        *,
        sync: bool,
        interval_ms: int,
        commit_interval_ms: int | None = None,
        on_flushed: Callable[[int, int], None],
        periodic: Callable[[], None],
        periodic_interval_ms: int,
        on_committed: Callable[[], None] = lambda: None,
    ) -> None:
        self.commitlog = commitlog
        self.sync = sync
        self.interval_s = interval_ms / 1000
        # With a transient store pool, buffered appends are committed to the file this often.
        self.commit_interval_s = None if commit_interval_ms is None else commit_interval_ms / 1000
        self.on_flushed = on_flushed  # (flushed_offset, store timestamp of the last flushed record)
        self.periodic = periodic  # ConsumeQueue/index flush + checkpoint, on its own cadence
        self.periodic_interval_s = periodic_interval_ms / 1000
        self.on_committed = on_committed  # buffered appends became readable
        self._waiters: deque[tuple[int, Future[None]]] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self._stopped = threading.Event()  # wakes the ConsumeQueue flush thread to stop
        self.last_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="flush-commitlog", daemon=True)
        # Its own thread (RocketMQ's FlushConsumeQueueService): flushing thousands of queue files
        # takes seconds and must not hold up a group commit.
        self._periodic_thread = threading.Thread(target=self._run_periodic,
                                                 name="flush-consumequeue", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._periodic_thread.start()

    def request(self, end_offset: int) -> Future[None]:
        """A future completed once the CommitLog is durable up to ``end_offset``."""
        fut: Future[None] = Future()
        with self._cond:
            self._waiters.append((end_offset, fut))
            self._cond.notify()
        return fut

    @staticmethod
    def wait(fut: Future[None], timeout_ms: int) -> None:
        try:
            fut.result(timeout_ms / 1000)
        except TimeoutError as e:
            raise FlushTimeoutError(f"flush did not complete within {timeout_ms} ms") from e

    def flush_once(self) -> int:
        """Flush now; complete or fail the waiters it covers. Returns the flushed offset."""
        cl = self.commitlog
        with cl.lock:
            target_ts = cl.last_store_timestamp
        try:
            cl.files.commit()
            flushed = cl.files.flush()
        except FlushError as e:
            self.last_error = e
            log.error("CommitLog flush failed: %s", e)
            self._fail_waiters(e)
            raise
        self.last_error = None
        self.on_flushed(flushed, target_ts)
        self._complete_waiters(flushed)
        return flushed

    def _commit_only(self) -> None:
        try:
            self.commitlog.files.commit()
        except FlushError as e:
            self.last_error = e
            log.error("CommitLog commit failed: %s", e)
        else:
            self.on_committed()

    def _complete_waiters(self, flushed: int) -> None:
        done: list[Future[None]] = []
        with self._cond:
            w = self._waiters
            while w and w[0][0] <= flushed:
                done.append(w.popleft()[1])
        for fut in done:
            if not fut.done():
                fut.set_result(None)

    def _fail_waiters(self, err: BaseException) -> None:
        with self._cond:
            pending = list(self._waiters)
            self._waiters.clear()
        for _, fut in pending:
            if not fut.done():
                fut.set_exception(err)

    def _run_periodic(self) -> None:
        while not self._stopped.wait(self.periodic_interval_s):
            try:
                self.periodic()
            except Exception:
                log.exception("periodic ConsumeQueue/index flush failed")

    def _run(self) -> None:
        next_flush = time.monotonic() + self.interval_s
        while not self._stopping():
            with self._cond:
                if self.sync:
                    if not self._waiters:
                        self._cond.wait(SYNC_IDLE_S)
                else:
                    wait = next_flush - time.monotonic()
                    if self.commit_interval_s is not None:
                        wait = min(wait, self.commit_interval_s)
                    if wait > 0:
                        self._cond.wait(wait)
            if self._stopping():
                break
            if not self.sync and time.monotonic() < next_flush:
                self._commit_only()
                continue
            next_flush = time.monotonic() + self.interval_s
            try:
                self.flush_once()
            except FlushError:
                time.sleep(0.1)  # the disk failed; waiters were told, try again shortly
            except Exception:
                log.exception("unexpected error in the flush thread")

    def _stopping(self) -> bool:
        with self._cond:
            return self._stop

    def halt(self) -> None:
        """Stop the thread without a final flush (a simulated crash)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._stopped.set()
        for t in (self._thread, self._periodic_thread):
            if t.is_alive():
                t.join()
        self._fail_waiters(FlushError("store halted before the flush completed"))

    def shutdown(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._stopped.set()
        for t in (self._thread, self._periodic_thread):
            if t.is_alive():
                t.join()
        try:
            self.flush_once()
        except FlushError:
            log.exception("final flush failed")
        self.periodic()
        self._fail_waiters(FlushError("store shut down before the flush completed"))
