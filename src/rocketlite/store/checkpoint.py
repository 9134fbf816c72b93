"""StoreCheckpoint: the ``checkpoint`` file (layout in ``rocketlite.formats.checkpoint_layout``).

A 4 KiB file, memory-mapped, of which the first 40 bytes hold five big-endian longs. Recovery after
a crash starts from the CommitLog file whose first record is no later than ``min_timestamp``:
everything the CommitLog, ConsumeQueues and index held before that time was already durable
(``StoreCheckpoint.java``: ``getMinTimestamp`` / ``getMinTimestampIndex``).

A file shorter than 4096 bytes (a torn create, a truncation) is extended with a logged warning;
the fields it held in full are kept and the others read as 0.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from rocketlite.formats.checkpoint_layout import CHECKPOINT, CHECKPOINT_FILE_SIZE
from rocketlite.store.fixed_file import FixedFile

log = logging.getLogger(__name__)

RECOVERY_SLACK_MS = 3000
"""RocketMQ moves the recovery point 3 s earlier than the smaller of the CommitLog and
ConsumeQueue timestamps (store timestamps have millisecond granularity and cross threads)."""

_FIELDS = ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
           "master_flushed_offset", "confirm_phy_offset")
_LONG = 8


class StoreCheckpoint:
    """The checkpoint file. Set the attributes, then ``flush()`` to make them durable."""

    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int
    master_flushed_offset: int
    confirm_phy_offset: int

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._closed = False
        self._file = FixedFile(self.path, CHECKPOINT_FILE_SIZE)
        size = self._file.size_at_open
        head = self._file.mapping[:min(size, CHECKPOINT.size)]  # what the file held before it was extended
        repaired = 0 < size < CHECKPOINT_FILE_SIZE
        if repaired:
            log.warning("checkpoint %s is %d bytes, not %d: extended; fields past byte %d read as 0",
                        self.path, size, CHECKPOINT_FILE_SIZE, len(head) - len(head) % _LONG)
        whole = len(head) - len(head) % _LONG  # a field cut short by the truncation reads as 0
        values = CHECKPOINT.unpack(head[:whole].ljust(CHECKPOINT.size, b"\0"))
        for name, value in zip(_FIELDS, values, strict=True):
            setattr(self, name, int(value))
        if repaired:
            self.flush()

    @property
    def closed(self) -> bool:
        return self._closed

    def min_timestamp(self, index_enabled: bool) -> int:
        """Where recovery may start: ``min(physic, logics) - 3000`` (floor 0), then, with the
        index enabled, no later than ``index_msg_timestamp`` (which RocketMQ does not move back)."""
        ts = max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - RECOVERY_SLACK_MS)
        if index_enabled:
            ts = max(0, min(ts, self.index_msg_timestamp))
        return ts

    def flush(self) -> None:
        """Write the five fields into the mapping and fdatasync the file."""
        with self._lock:
            if self._closed:
                raise ValueError(f"checkpoint {self.path} is closed")
            CHECKPOINT.pack_into(self._file.mapping, 0, *(getattr(self, name) for name in _FIELDS))
            self._file.sync()

    def close(self, *, flush: bool = True) -> None:
        """Flush (unless ``flush=False``: a store that failed to start leaves the file as it
        found it), unmap and close. A second call does nothing."""
        if self._closed:
            return
        try:
            if flush:
                self.flush()
        finally:
            with self._lock:
                self._closed = True
                self._file.close()

    def __enter__(self) -> StoreCheckpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)}" for name in _FIELDS)
        return f"StoreCheckpoint({str(self.path)!r}, {fields})"
