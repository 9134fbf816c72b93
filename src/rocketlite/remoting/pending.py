"""Our requests that wait for their replies, on one connection: no future and no timer each.

A request is sent with a ``ReplyWaiter``, an object whose ``reply_received`` is called exactly
once, with the reply (a ``RemotingCommand``) or the error that ends the wait
(``RemotingTimeoutError``, or ``RemotingError`` when the connection closes). ``PendingTable``
keeps the waiters by opaque and the deadlines per timeout, to the millisecond: one FIFO per
timeout (``round(timeout, 3)``), in sending order, so the deadlines of a FIFO are in order within
a millisecond and a sweep only looks at their fronts (a deadline behind one up to 1 ms later fires
with it). Timeouts that differ only below the millisecond (a sync send's remaining budget) share
a FIFO: there are never more FIFOs than distinct milliseconds of timeout, whatever the callers
pass (a FIFO per distinct float was a deque and a walk per sweep for each such request).
An answered request stays in its FIFO until a sweep finds it at the front (gone from the table);
requests are answered roughly in order, so that happens within a sweep or two. Behind a front that
waits long, a sweep drops the answered ones once the FIFO holds twice as many as wait (+1024).

``FutureWaiter`` adapts an ``asyncio.Future`` for callers that want one (``request_future``).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import weakref
from typing import Protocol

from rocketlite.common.errors import RemotingTimeoutError
from rocketlite.protocol.command import RemotingCommand

__all__ = ["FutureWaiter", "PendingTable", "ReplyWaiter", "next_opaque"]

log = logging.getLogger(__name__)
_opaques = itertools.count(1)
_INT32_MAX = 0x7FFFFFFF
_tables: weakref.WeakSet[PendingTable] = weakref.WeakSet()  # every live table, for wrapped opaques


def _deliver(waiter: ReplyWaiter, result: RemotingCommand | BaseException) -> None:
    """Call a waiter; what it raises is logged, never let into the connection's own work (a
    read, a sweep, a close) where it would cut short the other waiters."""
    try:
        waiter.reply_received(result)
    except Exception:
        log.exception("a reply waiter (%s) failed", type(waiter).__name__)


def next_opaque() -> int:
    """The opaque of our next request (or oneway): a positive int32 (Java's int), unique among
    the requests of this process that still wait for a reply. The first 2^31 - 1 come straight
    from a counter; after it wraps, an id that a live ``PendingTable`` still waits on is skipped
    (as is 0), so a long-waiting request is never overwritten by a new one."""
    n = next(_opaques)
    if n <= _INT32_MAX:
        return n
    return _wrapped_opaque(n)


def _wrapped_opaque(n: int) -> int:
    while True:
        opaque = n & _INT32_MAX
        if opaque and not any(opaque in t.waiters for t in list(_tables)):
            return opaque
        n = next(_opaques)


class ReplyWaiter(Protocol):
    def reply_received(self, result: RemotingCommand | BaseException) -> None:
        """The reply to the request, or why none will come; called once."""


class FutureWaiter:
    """A ``ReplyWaiter`` that completes a future (unless it is already done: cancelled)."""

    __slots__ = ("fut",)

    def __init__(self, fut: asyncio.Future[RemotingCommand]) -> None:
        self.fut = fut

    def reply_received(self, result: RemotingCommand | BaseException) -> None:
        fut = self.fut
        if fut.done():
            return
        if result.__class__ is RemotingCommand:
            fut.set_result(result)
        else:
            fut.set_exception(result)  # type: ignore[arg-type]


class PendingTable:
    """Waiters by opaque, and their deadlines per timeout value (see the module docstring)."""

    __slots__ = ("__weakref__", "fifos", "waiters")

    def __init__(self) -> None:
        self.waiters: dict[int, ReplyWaiter] = {}
        # per timeout to the ms: (deadline, opaque, request code), in sending order
        self.fifos: dict[float, collections.deque[tuple[float, int, int]]] = {}
        _tables.add(self)

    def __len__(self) -> int:
        return len(self.waiters)

    def add(self, opaque: int, waiter: ReplyWaiter, timeout: float, now: float, code: int) -> None:
        self.waiters[opaque] = waiter
        fifo = self.fifos.get(timeout)  # a timeout to the ms already (3.0) is its own key
        if fifo is None:
            key = round(timeout, 3)
            fifo = self.fifos.get(key)
            if fifo is None:
                fifo = self.fifos[key] = collections.deque()
        fifo.append((now + timeout, opaque, code))

    def complete(self, reply: RemotingCommand) -> None:
        """Hand ``reply`` to its waiter, if one still waits for it."""
        waiter = self.waiters.pop(reply.opaque, None)
        if waiter is not None:
            try:  # _deliver, inline: once per reply
                waiter.reply_received(reply)
            except Exception:
                log.exception("a reply waiter (%s) failed", type(waiter).__name__)

    def sweep(self, now: float, peer: str) -> bool:
        """Fail the requests whose deadline passed, drop answered ones from the FIFOs' fronts;
        True while some deadline is left to watch."""
        waiters = self.waiters
        fifos = self.fifos
        for timeout, fifo in list(fifos.items()):
            while fifo:
                deadline, opaque, code = fifo[0]
                if opaque in waiters:
                    if deadline > now:
                        break
                    waiter = waiters.pop(opaque)
                    fifo.popleft()
                    _deliver(waiter, RemotingTimeoutError(
                        f"no response from {peer} to request {code} within {timeout:.3f} s"))
                else:
                    fifo.popleft()
            if not fifo:
                del fifos[timeout]
            elif len(fifo) > 2 * len(waiters) + 1024:  # answered ones pile up behind a slow front
                fifos[timeout] = collections.deque(e for e in fifo if e[1] in waiters)
        return bool(fifos)

    def fail_all(self, err: BaseException) -> None:
        """The connection closed: every waiter gets ``err``."""
        waiters, self.waiters = self.waiters, {}
        self.fifos.clear()
        for waiter in waiters.values():
            _deliver(waiter, err)
