"""What the Remoting transport allows a peer: how much of its replies may wait unread, how long
it may stay idle and how much of its incomplete frames may be buffered (``ConnectionLimits``,
``FrameBudget``), and how many warnings about it are written (``PeerLog``).

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
from typing import Protocol

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


# -- connection limits ------------------------------------------------------------------------

DEFAULT_MAX_FRAME = 16 * 1024 * 1024
DEFAULT_MAX_INFLIGHT = 1024
DEFAULT_WRITE_HIGH = 4 * 1024 * 1024
DEFAULT_WRITE_LOW = 1024 * 1024
DEFAULT_MAX_IDLE_S = 120.0
DEFAULT_BUFFERED_FRAMES_MAX = 256 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 10_000
DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 2_000
"""One client host's share: a fifth of the broker's, so one host that opens connections without
end leaves room for at least four others, and still far above what one address needs (a client
instance holds one connection per broker: even a host with hundreds of producers and consumers,
or a NAT address in front of many hosts, stays well under it; the load test's 1,000 clients from
loopback pass)."""
DEFAULT_MAX_HEADER = 1024 * 1024
"""A request header's bytes: a send's is a few hundred bytes plus its properties (at most 32 KiB,
the CommitLog's bound); bodies carry everything large. Clients take any header (``for_client``)."""
DEFAULT_MAX_EXT_FIELDS = 1_000
"""A request header's ext fields: RocketMQ's requests carry at most a few dozen (a send ~15, plus
the ACL's three); a header with thousands is no client's."""


class LimitCounts:
    """How often each limit was crossed since start, by name (``LIMITS``): the Prometheus family
    ``rocketlite_limit_rejections_total{limit=...}``. Counted only at a crossing (one dict
    increment); the normal path never touches it."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def hit(self, limit: str) -> None:
        self.counts[limit] = self.counts.get(limit, 0) + 1

    def get(self, limit: str) -> int:
        return self.counts.get(limit, 0)


LIMITS = ("connections", "connections_per_address", "header_bytes", "ext_fields", "autocreate_topic",
          "autocreate_group", "message_size", "batch_size", "inflight", "pending_bytes")
"""The ``limit`` label's values (each shown, 0 until crossed)."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one connection may hold, and for how long.

    * ``max_frame``: the largest frame, length field included (``frameMaxLength``).
    * ``max_inflight``: requests from the peer answered by coroutines at once; reading stops at
      this many and resumes below half.
    * ``write_high``/``write_low``: the transport's write-buffer water marks
      (``writeBufferHighWaterMark``/``writeBufferLowWaterMark``). With ``read_backpressure`` (the
      server side) a connection whose unwritten replies pass the high mark stops reading and
      holds back the requests it has read but not yet run, until the peer has read its way down
      to the low mark. A client does not: it must keep reading the replies that unblock the peer.
    * ``max_idle_s``: a server closes a connection with neither a read nor a write for this long,
      or held above the high mark for this long (``serverChannelMaxIdleTimeSeconds``; 0: never).
    * ``buffered_frames_max``: bytes of incomplete frames all of a server's connections may hold
      together (``maxBufferedFrameBytes``; 0: no bound but ``max_frame`` each); past it the
      connections holding the largest are closed.
    * ``max_connections``/``max_connections_per_address``: a server's open connections, in all
      and from one client IP (``maxConnections``/``maxConnectionsPerAddress``); a connection past
      either is closed as soon as it is accepted.
    * ``max_header``: bytes of one frame's header (``maxHeaderBytes``); a larger one is not
      decoded, and as its opaque is unknown the connection is closed.
    * ``max_ext_fields``: ext fields in one request's header (``maxExtFields``), counted by the
      frame decoder as it decodes the header (``FrameDecoder``, both twins), not per request in
      the dispatch loop; a request with more is answered SYSTEM_ERROR without running (a oneway
      one is dropped) and the connection goes on.
    """

    max_frame: int = DEFAULT_MAX_FRAME
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    write_high: int = DEFAULT_WRITE_HIGH
    write_low: int = DEFAULT_WRITE_LOW
    read_backpressure: bool = True
    max_idle_s: float = DEFAULT_MAX_IDLE_S
    buffered_frames_max: int = DEFAULT_BUFFERED_FRAMES_MAX
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_address: int = DEFAULT_MAX_CONNECTIONS_PER_ADDRESS
    max_ext_fields: int = DEFAULT_MAX_EXT_FIELDS
    max_header: int = DEFAULT_MAX_HEADER

    def __post_init__(self) -> None:
        if not 0 <= self.write_low <= self.write_high:
            raise ValueError(f"write-buffer marks must be 0 <= low ({self.write_low}) <= high "
                             f"({self.write_high})")
        if (self.max_inflight < 1 or self.max_idle_s < 0 or self.buffered_frames_max < 0
                or self.max_connections < 1 or self.max_connections_per_address < 1
                or self.max_ext_fields < 0 or self.max_header < 0):
            raise ValueError(f"bad connection limits: {self}")

    @classmethod
    def for_client(cls, max_frame: int = DEFAULT_MAX_FRAME) -> ConnectionLimits:
        """A client's: no read backpressure, no idle timeout, no shared frame budget."""
        return cls(max_frame=max_frame, read_backpressure=False, max_idle_s=0.0,
                   buffered_frames_max=0, max_header=0xFFFFFF)  # any 24-bit header length


class FrameHolder(Protocol):
    peer: str
    peer_ip: str

    def shed(self) -> None:
        """Drop the partial frame and close the connection now."""


class FrameBudget:
    """The bytes of incomplete frames that a server's connections buffer, together, bounded by
    ``limit``: when a read takes the total past it, the connections holding the largest partial
    frames are closed until it fits again. After every read the total is at most ``limit``."""

    def __init__(self, limit: int, peer_log: PeerLog) -> None:
        self.limit = limit
        self.peer_log = peer_log
        self.total = 0
        self.holders: dict[FrameHolder, int] = {}

    def update(self, holder: FrameHolder, old: int, new: int) -> None:
        """``holder`` now buffers ``new`` bytes of a partial frame instead of ``old``."""
        self.total += new - old
        holders = self.holders
        if new:
            holders[holder] = new
        else:
            holders.pop(holder, None)
        while self.total > self.limit and holders:
            victim = max(holders, key=holders.__getitem__)
            held = holders.pop(victim)
            self.peer_log.warning(
                victim.peer_ip, "closing connection from %s: its partial frame of %d bytes is the "
                "largest while partial frames take %d bytes, above maxBufferedFrameBytes (%d)",
                victim.peer, held, self.total, self.limit)
            self.total -= held
            victim.shed()
