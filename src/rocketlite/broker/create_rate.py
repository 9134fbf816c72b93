"""How fast auto-creation may add topics and subscription groups (``autoCreateTopicsPerMinute``,
``autoCreateGroupsPerMinute``): without a bound, one client sending to random topic names fills
the broker's tables, its config files and the NameServer's routes (up to ``MAX_TOPICS``).

A token bucket per kind: it holds at most a minute's worth, starts full and refills at the rate,
so a burst of new names at start-up passes while a steady flood is held to the rate. A refusal is
counted in the broker's ``LimitCounts`` and named by ``refusal`` (the remark the client gets).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rocketlite.remoting.limits import LimitCounts

__all__ = ["CreateRate"]


class CreateRate:
    """At most ``per_minute`` creations a minute, on average; ``take`` says whether one may go."""

    def __init__(self, per_minute: int, limit: str, key: str, counts: LimitCounts, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute < 1:
            raise ValueError(f"{key}={per_minute}: must be positive")
        self.per_minute = per_minute
        self.limit = limit  # the counter's label
        self.key = key  # the config key, for the remark
        self.counts = counts
        self._clock = clock
        self._tokens = float(per_minute)
        self._at = clock()
        self._lock = threading.Lock()  # the gRPC front creates from its own threads

    def take(self) -> bool:
        """One creation may go now (a token taken); False counts a refusal."""
        with self._lock:
            now = self._clock()
            tokens = min(float(self.per_minute),
                         self._tokens + (now - self._at) * self.per_minute / 60.0)
            self._at = now
            if tokens >= 1.0:
                self._tokens = tokens - 1.0
                return True
            self._tokens = tokens
        self.counts.hit(self.limit)
        return False

    def refusal(self, what: str) -> str:
        """The remark for a refused creation of ``what`` (``topic[T]``, ``subscription group [G]``)."""
        return (f"{what} not exist, and auto-creation is refused: the auto-create rate limit "
                f"{self.key}={self.per_minute} was reached; retry later or create it first")
