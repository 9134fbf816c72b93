"""ProcessQueue: the client-side buffer of one assigned message queue (Java's ``ProcessQueue``).

Pulled messages wait here, in queue-offset order, until the consumer has processed them. The
buffer answers the questions the push consumer asks:

- **Which offset may be committed?** :meth:`ProcessQueue.remove` drops finished messages and
  returns the smallest offset still buffered (everything below it is done), or
  ``queue_offset_max + 1`` once the buffer is empty, or -1 when it was already empty, so that
  completing messages out of order never commits past an unfinished one.
- **Flow control**: :attr:`msg_count`, :attr:`msg_size` (sum of body lengths) and :meth:`span`
  (highest minus lowest buffered offset) bound what the pull loop fetches ahead.
- **Orderly consumption**: :meth:`take` moves a batch to a "consuming" map; :meth:`commit` finishes
  it and gives the offset to commit; :meth:`make_available_again` hands messages back for a retry
  (``SUSPEND_CURRENT_QUEUE_A_MOMENT``); :meth:`rollback` hands back the whole batch.
- **State**: ``dropped`` (the rebalance took the queue away), ``locked`` (orderly: the broker lock
  is held), the last lock/pull/consume times and their expiry (:data:`REBALANCE_LOCK_MAX_LIVE_TIME`,
  :data:`PULL_MAX_IDLE_TIME`), measured on an injectable monotonic clock in seconds.

Meant for one asyncio event loop: no locks, except :attr:`ProcessQueue.consume_lock`, which orderly
consumption holds while a batch runs so that the rebalance does not unlock the queue under it.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar

__all__ = [
    "PULL_MAX_IDLE_TIME",
    "REBALANCE_LOCK_INTERVAL",
    "REBALANCE_LOCK_MAX_LIVE_TIME",
    "HasOffset",
    "ProcessQueue",
]

REBALANCE_LOCK_MAX_LIVE_TIME = 30.0
"""Seconds a broker-side queue lock is trusted after it was last taken or renewed (Java 30 000 ms)."""
REBALANCE_LOCK_INTERVAL = 20.0
"""Seconds between lock renewals of orderly consumers (Java 20 000 ms)."""
PULL_MAX_IDLE_TIME = 120.0
"""Seconds without a pull after which the rebalance considers the queue's pulling stuck (Java 120 000 ms)."""


class HasOffset(Protocol):
    """What the buffer needs of a message: its offset in the queue and its body."""

    @property
    def queue_offset(self) -> int: ...

    @property
    def body(self) -> bytes: ...


M = TypeVar("M", bound=HasOffset)


class ProcessQueue(Generic[M]):
    """The messages of one queue between pull and consumption, ordered by queue offset."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._msgs: dict[int, M] = {}  # buffered, not taken: offset -> message
        self._keys: list[int] = []  # the offsets of _msgs, ascending
        self._consuming: dict[int, M] = {}  # orderly: taken by the running batch
        self._count = 0
        self._size = 0
        self.queue_offset_max = 0
        """Highest offset ever put (0 before the first put and after :meth:`clear`)."""
        self.is_consuming = False
        """Orderly: a consume task is scheduled or running for this queue (set by :meth:`put`)."""
        self.dropped = False
        self.locked = False
        now = clock()
        self.last_lock_time = now
        self.last_pull_time = now
        self.last_consume_time = now
        self.try_unlock_times = 0
        self.consume_lock = asyncio.Lock()
        """Held by orderly consumption while a batch runs (Java's ``consumeLock``)."""

    # -- buffer ----------------------------------------------------------------------------------

    def put(self, msgs: Iterable[M]) -> bool:
        """Buffer pulled messages; offsets already buffered (or being consumed) are ignored.

        Returns True when a consume task should be dispatched: the buffer holds messages and no
        task was marked as running (:attr:`is_consuming` is then set; orderly consumption uses this,
        concurrent consumption may ignore it).
        """
        for msg in msgs:
            offset = msg.queue_offset
            if offset in self._msgs or offset in self._consuming:
                continue
            self._msgs[offset] = msg
            keys = self._keys
            if not keys or offset > keys[-1]:
                keys.append(offset)  # the common case: pulls arrive in offset order
            else:
                bisect.insort(keys, offset)
            self._count += 1
            self._size += len(msg.body)
            self.queue_offset_max = max(self.queue_offset_max, offset)
        if self._msgs and not self.is_consuming:
            self.is_consuming = True
            return True
        return False

    def remove(self, msgs: Iterable[HasOffset]) -> int:
        """Drop consumed messages and return the offset to commit.

        That is the smallest offset still buffered, or ``queue_offset_max + 1`` when the buffer is
        now empty; -1 when the buffer was already empty (nothing put, or cleared after a drop), in
        which case nothing should be committed. Offsets not buffered are ignored.
        """
        self.last_consume_time = self._clock()
        if not self._msgs:
            return -1
        for msg in msgs:
            stored = self._msgs.pop(msg.queue_offset, None)
            if stored is not None:
                self._discard_key(msg.queue_offset)
                self._count -= 1
                self._size -= len(stored.body)
        return self._keys[0] if self._keys else self.queue_offset_max + 1

    def _discard_key(self, offset: int) -> None:
        keys = self._keys
        i = bisect.bisect_left(keys, offset)
        if i < len(keys) and keys[i] == offset:
            del keys[i]

    def contains(self, msg: HasOffset) -> bool:
        """Whether ``msg``'s offset is buffered (not counting messages taken by :meth:`take`)."""
        return msg.queue_offset in self._msgs

    def has_messages(self) -> bool:
        """Whether messages wait in the buffer (Java's ``hasTempMessage``)."""
        return bool(self._msgs)

    def first(self) -> M | None:
        """The buffered message with the smallest offset, or None."""
        return self._msgs[self._keys[0]] if self._keys else None

    @property
    def msg_count(self) -> int:
        """Messages held: buffered plus taken by a running orderly batch."""
        return self._count

    @property
    def msg_size(self) -> int:
        """Sum of the body lengths of the messages counted by :attr:`msg_count`."""
        return self._size

    @property
    def min_offset(self) -> int:
        """Smallest buffered offset, -1 when the buffer is empty."""
        return self._keys[0] if self._keys else -1

    @property
    def max_offset(self) -> int:
        """Largest buffered offset, -1 when the buffer is empty."""
        return self._keys[-1] if self._keys else -1

    def span(self) -> int:
        """Largest minus smallest buffered offset; 0 when empty (Java's ``getMaxSpan``)."""
        return self._keys[-1] - self._keys[0] if self._keys else 0

    def clear(self) -> None:
        """Forget every message, taken ones included; counters and ``queue_offset_max`` go to 0."""
        self._msgs.clear()
        self._keys.clear()
        self._consuming.clear()
        self._count = 0
        self._size = 0
        self.queue_offset_max = 0

    # -- orderly ---------------------------------------------------------------------------------

    def take(self, batch: int) -> list[M]:
        """Orderly: move up to ``batch`` messages, lowest offsets first, to the consuming map.

        An empty result clears :attr:`is_consuming`: the consume task ends and the next :meth:`put`
        dispatches a new one.
        """
        self.last_consume_time = self._clock()
        n = min(max(batch, 0), len(self._keys))
        taken_keys = self._keys[:n]
        del self._keys[:n]
        result = [self._msgs.pop(k) for k in taken_keys]
        self._consuming.update(zip(taken_keys, result, strict=True))
        if not result:
            self.is_consuming = False
        return result

    def commit(self) -> int:
        """Orderly: the taken batch is consumed. Returns the largest taken offset + 1 (the offset to
        commit), or -1 when nothing was taken."""
        if not self._consuming:
            return -1
        last = max(self._consuming)
        self._count -= len(self._consuming)
        self._size -= sum(len(m.body) for m in self._consuming.values())
        self._consuming.clear()
        return last + 1

    def make_available_again(self, msgs: Iterable[M]) -> None:
        """Orderly: put taken messages back into the buffer to be consumed again."""
        for msg in msgs:
            offset = msg.queue_offset
            stored = self._consuming.pop(offset, None)
            if offset in self._msgs:
                continue
            if stored is None:  # not taken: a new message after all
                self._count += 1
                self._size += len(msg.body)
                self.queue_offset_max = max(self.queue_offset_max, offset)
            self._msgs[offset] = msg
            bisect.insort(self._keys, offset)

    def rollback(self) -> None:
        """Orderly: put the whole taken batch back into the buffer."""
        self.make_available_again(list(self._consuming.values()))

    @property
    def taken_count(self) -> int:
        """Messages taken by the running orderly batch."""
        return len(self._consuming)

    def taken_offsets(self) -> list[int]:
        """The offsets of the running orderly batch, ascending."""
        return sorted(self._consuming)

    # -- state -----------------------------------------------------------------------------------

    def now(self) -> float:
        """The queue's clock (seconds, monotonic)."""
        return self._clock()

    def mark_locked(self) -> None:
        """The broker granted or renewed the queue lock."""
        self.locked = True
        self.last_lock_time = self._clock()

    def mark_pulled(self) -> None:
        """A pull request for this queue was sent."""
        self.last_pull_time = self._clock()

    def is_lock_expired(self) -> bool:
        """Whether the lock was last granted more than :data:`REBALANCE_LOCK_MAX_LIVE_TIME` ago."""
        return self._clock() - self.last_lock_time > REBALANCE_LOCK_MAX_LIVE_TIME

    def is_pull_expired(self) -> bool:
        """Whether the last pull was more than :data:`PULL_MAX_IDLE_TIME` ago."""
        return self._clock() - self.last_pull_time > PULL_MAX_IDLE_TIME

    def inc_try_unlock_times(self) -> int:
        """Count a failed attempt to unlock the queue while a batch ran; returns the new count."""
        self.try_unlock_times += 1
        return self.try_unlock_times

    def __repr__(self) -> str:
        return (f"ProcessQueue(count={self._count}, size={self._size}, min={self.min_offset}, "
                f"max={self.max_offset}, taken={len(self._consuming)}, dropped={self.dropped}, "
                f"locked={self.locked})")
