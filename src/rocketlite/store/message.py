"""What goes into the store and what comes back from an append."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rocketlite.formats.record_encode import AppendResult as AppendResult  # made by the encoder

LOOPBACK_V4 = b"\x7f\x00\x00\x01"


@dataclass(slots=True)
class MessageToStore:
    """A message as the broker hands it to the store (RocketMQ's ``MessageExtBrokerInner``).

    ``properties`` is the already-encoded property string (``name\\x01value\\x02`` ...); the store
    assigns the queue offset, the CommitLog offset and the store timestamp.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOOPBACK_V4
    born_port: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


@dataclass(slots=True)
class MessageBatch:
    """Messages for one topic and queue appended together (RocketMQ's ``MessageExtBatch``).

    Column-wise, so the store encodes the batch without a Python object per message: ``bodies``
    and ``properties`` (encoded property strings, one per body) run in parallel; ``flags`` is one
    per body or None for all zero. The born host, port, timestamp and ``sys_flag`` are shared.
    Batches carry no transactional or reconsume state, as in RocketMQ.
    """

    topic: str
    queue_id: int
    bodies: Sequence[bytes]
    properties: Sequence[bytes]
    flags: Sequence[int] | None = None
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOOPBACK_V4
    born_port: int = 0


@dataclass(slots=True)
class BatchAppendResult:
    """Where a batch landed: its records are consecutive in the CommitLog unless the batch was
    split at a segment end, and their queue offsets are consecutive."""

    offsets: list[int]
    sizes: list[int]
    queue_offset: int
    store_timestamp: int

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def end_offset(self) -> int:
        return self.offsets[-1] + self.sizes[-1] if self.sizes else 0


class DispatchHint(NamedTuple):
    """What an append already knows about a run of records it wrote, so the dispatcher need not
    parse them: CommitLog range [start, end) in one segment, one topic and queue."""

    start: int
    end: int
    topic: str
    queue_id: int
    queue_offset: int
    offsets: list[int]
    sizes: list[int]
    properties: Sequence[bytes]
    store_timestamp: int
