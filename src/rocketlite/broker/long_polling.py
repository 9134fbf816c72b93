"""PullRequestHoldService: long polling. A pull that finds nothing new is held until a message
arrives for its queue or its suspend time runs out, then run again and answered.

The dispatcher thread reports each queue it extended at the end of a dispatch round
(``on_dispatched``, thread-safe and cheap when nobody waits on that queue); the event loop then
wakes the pulls held on that queue whose offset is now below the queue's end. A held pull is
re-run without suspension, so it answers whatever it finds (messages, or PULL_NOT_FOUND at the
timeout). Latency from dispatch to reply is one loop iteration, not a polling interval.

A pull is registered before the queue's end is read again, and the dispatcher commits units before
it reports them, so an arrival between the first read and the registration is never missed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass

QueueKey = tuple[str, int]


@dataclass(slots=True, eq=False)
class HeldPull:
    key: QueueKey
    offset: int
    run: Callable[[], None]  # re-runs the pull and sends its reply
    timer: asyncio.TimerHandle | None = None


class PullRequestHoldService:
    def __init__(self, max_held: int = 100_000) -> None:
        self.max_held = max_held
        self.held: dict[QueueKey, list[HeldPull]] = {}
        self.count = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._arrivals: list[tuple[QueueKey, int]] = []
        self._arrivals_lock = threading.Lock()
        self._scheduled = False
        self._closing = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._closing = False

    # -- dispatcher thread -----------------------------------------------------------------

    def on_dispatched(self, topic: str, queue_id: int, next_offset: int) -> None:
        """A dispatcher listener: units up to ``next_offset`` are readable in the queue."""
        key = (topic, queue_id)
        if key not in self.held:
            return
        with self._arrivals_lock:
            self._arrivals.append((key, next_offset))
            if self._scheduled:
                return
            self._scheduled = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._drain)

    # -- event loop ------------------------------------------------------------------------

    def _drain(self) -> None:
        with self._arrivals_lock:
            arrivals, self._arrivals = self._arrivals, []
            self._scheduled = False
        for key, next_offset in arrivals:
            self.notify(key, next_offset)

    def notify(self, key: QueueKey, next_offset: int) -> None:
        """Wake the pulls on ``key`` that have something to read below ``next_offset``."""
        waiting = self.held.get(key)
        if not waiting:
            return
        wake = [p for p in waiting if p.offset < next_offset]
        if not wake:
            return
        for p in wake:
            self._release(p)
        for p in wake:
            p.run()

    def hold(self, key: QueueKey, offset: int, timeout_s: float, run: Callable[[], None],
             current_end: Callable[[], int]) -> bool:
        """Hold a pull; False if too many are held already or the service is shutting down
        (the caller answers at once)."""
        if self.count >= self.max_held or self._closing:
            return False
        assert self._loop is not None, "PullRequestHoldService.start was not called"
        p = HeldPull(key, offset, run)
        self.held.setdefault(key, []).append(p)
        self.count += 1
        p.timer = self._loop.call_later(timeout_s, self._expire, p)
        if current_end() > offset:  # arrived between the caller's read and the registration
            self._release(p)
            self._loop.call_soon(p.run)
        return True

    def _expire(self, p: HeldPull) -> None:
        p.timer = None
        if self._release(p):
            p.run()

    def _release(self, p: HeldPull) -> bool:
        waiting = self.held.get(p.key)
        if waiting is None:
            return False
        try:
            waiting.remove(p)
        except ValueError:
            return False
        if not waiting:
            del self.held[p.key]
        self.count -= 1
        if p.timer is not None:
            p.timer.cancel()
            p.timer = None
        return True

    def release_all(self) -> None:
        """At shutdown: answer every held pull now (as at its timeout); hold no more."""
        self._closing = True
        for waiting in list(self.held.values()):
            for p in list(waiting):
                if self._release(p):
                    p.run()
