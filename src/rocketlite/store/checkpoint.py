"""StoreCheckpoint: the ``checkpoint`` file (layout in ``rocketlite.formats.checkpoint_layout``).

Recovery after a crash starts from the smallest of its timestamps: everything the CommitLog,
ConsumeQueues and index held before that time was already durable.
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

from rocketlite.common.errors import FlushError
from rocketlite.formats.checkpoint_layout import CHECKPOINT, CHECKPOINT_FILE_SIZE

log = logging.getLogger(__name__)

RECOVERY_SLACK_MS = 3000  # RocketMQ subtracts 3 s from the minimum timestamp


class StoreCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        if 0 < size < CHECKPOINT_FILE_SIZE:
            log.warning("checkpoint %s is %d bytes, extending to %d", path, size,
                        CHECKPOINT_FILE_SIZE)
        if size < CHECKPOINT_FILE_SIZE:
            os.ftruncate(self._fd, CHECKPOINT_FILE_SIZE)
        self._mm = mmap.mmap(self._fd, CHECKPOINT_FILE_SIZE)
        (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
         self.master_flushed_offset, self.confirm_phy_offset) = CHECKPOINT.unpack_from(self._mm, 0)

    def min_timestamp(self, index_enabled: bool) -> int:
        ts = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_enabled:
            ts = min(ts, self.index_msg_timestamp)
        return max(0, int(ts) - RECOVERY_SLACK_MS)

    def flush(self) -> None:
        CHECKPOINT.pack_into(self._mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                             self.index_msg_timestamp, self.master_flushed_offset,
                             self.confirm_phy_offset)
        try:
            os.fdatasync(self._fd)
        except OSError as e:
            raise FlushError(f"fdatasync of {self.path} failed: {e}") from e

    def close(self) -> None:
        self.flush()
        self._mm.close()
        os.close(self._fd)
