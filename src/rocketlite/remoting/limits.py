"""What the Remoting transport allows a peer: rate-limited warnings about it (``PeerLog``).

A peer that sends nothing but bad frames must not fill the log: each bad frame used to write a
WARNING, 26,000 lines for one probe. ``PeerLog`` writes the first few warnings per peer host and
window, counts the rest, and writes one summary line per host with that count when its window
ends (a timer on the running loop), or when ``flush`` is called (a server's close).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

BAD_FRAME_LOG_FIRST = 10
"""Warnings about one peer host written in full per window; the rest are counted."""
BAD_FRAME_LOG_WINDOW_S = 60.0
"""The window, and so the longest a count waits before its summary line."""
PEER_LOG_MAX_HOSTS = 1024
"""Hosts tracked at once; past that the oldest window is summarized early and forgotten."""


@dataclass(slots=True)
class _Window:
    start: float
    logged: int = 0
    suppressed: int = 0


class PeerLog:
    """Warnings about peers, at most ``first`` per peer host every ``window`` seconds; the rest
    are counted and summarized in one line per host when the window ends."""

    def __init__(self, logger: logging.Logger, what: str = "bad frames", *,
                 first: int = BAD_FRAME_LOG_FIRST, window: float = BAD_FRAME_LOG_WINDOW_S,
                 max_hosts: int = PEER_LOG_MAX_HOSTS) -> None:
        self.log = logger
        self.what = what
        self.first = first
        self.window = window
        self.max_hosts = max_hosts
        self._hosts: dict[str, _Window] = {}
        self._timer: asyncio.TimerHandle | None = None

    def warning(self, host: str, msg: str, *args: object) -> None:
        """Log ``msg % args`` as a WARNING unless ``host`` used up its lines for this window."""
        now = time.monotonic()
        w = self._hosts.get(host)
        if w is None or now - w.start >= self.window:
            if w is not None:
                self._summarize(host, w)
            elif len(self._hosts) >= self.max_hosts:
                self.flush(now)
                if len(self._hosts) >= self.max_hosts:
                    oldest = next(iter(self._hosts))
                    self._summarize(oldest, self._hosts.pop(oldest))
            w = self._hosts[host] = _Window(now)  # re-inserted: the dict stays oldest first
        if w.logged < self.first:
            w.logged += 1
            self.log.warning(msg, *args)
            return
        w.suppressed += 1
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (a test): summarized by the next warning or flush
                return
            self._timer = loop.call_later(w.start + self.window - now, self._on_timer)

    def flush(self, now: float | None = None) -> None:
        """Summarize and forget every window that has ended by ``now`` (every window if None)."""
        hosts = self._hosts
        for host, w in list(hosts.items()):
            if now is None or now - w.start >= self.window:
                self._summarize(host, hosts.pop(host))
        if now is None and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _summarize(self, host: str, w: _Window) -> None:
        if w.suppressed:
            self.log.warning("%s: %d more %s in %.0f s not logged one by one", host, w.suppressed,
                             self.what, time.monotonic() - w.start)
            w.suppressed = 0

    def _on_timer(self) -> None:
        self._timer = None
        now = time.monotonic()
        self.flush(now)
        pending = [w.start for w in self._hosts.values() if w.suppressed]
        if pending:
            delay = max(0.0, min(pending) + self.window - now)
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)
