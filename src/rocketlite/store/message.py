"""What goes into the store and what comes back from an append."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

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


class AppendResult(NamedTuple):
    """Where one message landed (a NamedTuple: one is made per message on the hot path)."""

    commit_log_offset: int
    size: int
    queue_offset: int
    store_timestamp: int

    @property
    def end_offset(self) -> int:
        return self.commit_log_offset + self.size
