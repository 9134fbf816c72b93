"""TimerCheckpoint: the ``config/timercheck`` file (layout in ``rocketlite.formats.timer``).

What the timer wheel had durably done when it was last flushed: every slot before
``last_read_time_ms`` delivered, every timer-topic queue offset before ``last_timer_queue_offset``
appended to the TimerLog and linked into the wheel, the TimerLog durable up to
``last_timer_log_flush_pos``. Recovery trusts exactly that much and redoes the rest, so a crash
between two flushes repeats work (at-least-once) but loses none.

A 4 KiB file mapped like RocketMQ's (``DefaultMappedFile.OS_PAGE_SIZE``); a short or missing file
reads as zeros (a fresh timer).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rocketlite.formats.timer import (
    TIMER_CHECKPOINT,
    TIMER_CHECKPOINT_FILE_SIZE,
    TimerCheckpointData,
    decode_checkpoint,
)
from rocketlite.store.fixed_file import FixedFile


class TimerCheckpoint:
    """Set the fields, then ``flush()`` to make them durable."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._closed = False
        self._file = FixedFile(self.path, TIMER_CHECKPOINT_FILE_SIZE)
        self.existed = self._file.size_at_open > 0
        head = self._file.mapping[:TIMER_CHECKPOINT.size]  # a short file was extended with zeros
        data = decode_checkpoint(head)
        self.last_read_time_ms = data.last_read_time_ms
        self.last_timer_log_flush_pos = data.last_timer_log_flush_pos
        self.last_timer_queue_offset = data.last_timer_queue_offset
        self.master_timer_queue_offset = data.master_timer_queue_offset
        self.state_version = data.state_version
        self.timestamp = data.timestamp
        self.counter = data.counter

    def data(self) -> TimerCheckpointData:
        return TimerCheckpointData(
            self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
            self.master_timer_queue_offset, self.state_version, self.timestamp, self.counter,
        )

    def update(self, read_time_ms: int, log_flush_pos: int, queue_offset: int) -> None:
        """Set the progress fields; the DataVersion moves when the progress did (as 5.x's
        ``prepareTimerCheckPoint``)."""
        if (read_time_ms, queue_offset) != (self.last_read_time_ms, self.last_timer_queue_offset):
            self.counter += 1
            self.timestamp = time.time_ns() // 1_000_000
        self.last_read_time_ms = read_time_ms
        self.last_timer_log_flush_pos = log_flush_pos
        self.last_timer_queue_offset = queue_offset
        self.master_timer_queue_offset = queue_offset

    def flush(self) -> None:
        """Write the fields into the mapping and fdatasync the file."""
        with self._lock:
            if self._closed:
                raise ValueError(f"timer checkpoint {self.path} is closed")
            TIMER_CHECKPOINT.pack_into(self._file.mapping, 0, *self.data())
            self._file.sync()

    def close(self, flush: bool = True) -> None:
        """Flush (unless told not to: a simulated crash), unmap and close; idempotent."""
        if self._closed:
            return
        try:
            if flush:
                self.flush()
        finally:
            with self._lock:
                self._closed = True
                self._file.close()

    def __repr__(self) -> str:
        return f"TimerCheckpoint({str(self.path)!r}, {self.data()})"
