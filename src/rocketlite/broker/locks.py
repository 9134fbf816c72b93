"""RebalanceLockManager: which client of a consumer group holds each queue (orderly consumers).

LOCK_BATCH_MQ (41) asks for a set of queues and gets back the subset it now holds: queues free,
expired, or already its own (which renews them). A lock expires ``rebalanceLockMaxLiveTime``
(60 s) after its last renewal; orderly clients renew every 20 s. UNLOCK_BATCH_MQ (42) releases only
the caller's own locks; so does a client's UNREGISTER_CLIENT (35) of the group (``unlock_client``),
as the C++ 4.x client's UNLOCK_BATCH_MQ on shutdown leaves out one of its queues.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from rocketlite.protocol.bodies import MessageQueue

MAX_LOCKS = 1_000_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class RebalanceLockManager:
    def __init__(self, max_live_ms: int = 60_000,
                 clock: Callable[[], int] = monotonic_ms) -> None:
        self.max_live_ms = max_live_ms
        self.clock = clock
        # group -> queue -> (client id, last renewal)
        self.table: dict[str, dict[MessageQueue, tuple[str, int]]] = {}
        self._count = 0
        self.lock = threading.Lock()

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str
                       ) -> set[MessageQueue]:
        now = self.clock()
        locked: set[MessageQueue] = set()
        with self.lock:
            held = self.table.setdefault(group, {})
            for mq in mqs:
                entry = held.get(mq)
                if entry is None:
                    if self._count >= MAX_LOCKS:
                        continue
                    self._count += 1
                elif entry[0] != client_id and now - entry[1] <= self.max_live_ms:
                    continue  # another live client holds it
                held[mq] = (client_id, now)
                locked.add(mq)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        with self.lock:
            held = self.table.get(group)
            if not held:
                return
            for mq in mqs:
                entry = held.get(mq)
                if entry is not None and entry[0] == client_id:
                    del held[mq]
                    self._count -= 1
            if not held:
                del self.table[group]

    def unlock_client(self, group: str, client_id: str) -> int:
        """Release every lock ``client_id`` holds in ``group`` (it left the group); how many."""
        with self.lock:
            held = self.table.get(group)
            if not held:
                return 0
            mine = [mq for mq, (owner, _) in held.items() if owner == client_id]
        self.unlock_batch(group, mine, client_id)
        return len(mine)

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        entry = self.table.get(group, {}).get(mq)
        return (entry is not None and entry[0] == client_id
                and self.clock() - entry[1] <= self.max_live_ms)

    def expire(self) -> int:
        """Drop expired locks (so the table stays bounded by live ones); how many were dropped."""
        now = self.clock()
        dropped = 0
        with self.lock:
            for group in list(self.table):
                held = self.table[group]
                for mq in [mq for mq, (_, t) in held.items() if now - t > self.max_live_ms]:
                    del held[mq]
                    dropped += 1
                if not held:
                    del self.table[group]
            self._count -= dropped
        return dropped
