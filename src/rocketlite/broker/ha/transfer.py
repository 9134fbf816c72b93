"""SYNC_MASTER's waits for the slave (Java 4.x ``HAService.GroupTransferService`` with
``CommitLog.handleHA``): a send is answered once a slave has acked the end offset of its append.

``request(end_offset)`` is called once per append (not per message) right after it, on the event
loop thread, and returns:

* ``SUCCESS`` when a slave has already acked ``end_offset``;
* ``SLAVE_NOT_AVAILABLE`` when no slave is connected, or the best slave is more than
  ``SLAVE_FALLBEHIND_MAX`` bytes behind ``end_offset`` (Java's ``HAService.isSlaveOK`` with the
  default ``haSlaveFallbehindMax``): the message is stored, only the answer says so;
* otherwise a future resolved with ``SUCCESS`` once a slave acks ``end_offset``, or with
  ``FLUSH_SLAVE_TIMEOUT`` after ``syncFlushTimeout`` (4.x's wait; the message stays stored).

The waiters are kept in one deque sorted by end offset; appends happen on the loop thread in
offset order, so a new waiter goes at the tail (an out-of-order one is inserted in place). An
ack (``acked``, from ``HAServer`` on the loop thread) resolves every waiter it covers in one pass
from the head. Timeouts: one timer for the whole deque, armed at the head's deadline; when it
fires, one sweep from the head resolves every waiter whose deadline has passed, and the timer is
armed again for the new head. Waiters are registered in time order too, so the heads are the
oldest (an out-of-order waiter may delay the sweep of the ones behind it by the few moments
between their registrations).

Controller mode adds ``set_alone``: a master alone in its SyncStateSet answers SUCCESS at once
(RocketMQ 5's controller-mode master with ``minInSyncReplicas`` 1), as 4.x clients need to go on
sending after a failover (both ali-ons and the C++ client treat SLAVE_NOT_AVAILABLE as a failure).

The server's closing resolves the remaining waiters with ``FLUSH_SLAVE_TIMEOUT``. A slave that
disconnects does not fail the waiters: another may connect and ack in time (as Java).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

from rocketlite.protocol.codes import ResponseCode

if TYPE_CHECKING:
    from rocketlite.broker.ha.server import HAServer

log = logging.getLogger(__name__)

SUCCESS = int(ResponseCode.SUCCESS)
SLAVE_NOT_AVAILABLE = int(ResponseCode.SLAVE_NOT_AVAILABLE)
FLUSH_SLAVE_TIMEOUT = int(ResponseCode.FLUSH_SLAVE_TIMEOUT)
# Java's haSlaveFallbehindMax default: a slave further behind than this is "not available".
SLAVE_FALLBEHIND_MAX = 256 * 1024 * 1024

# What ``request`` returns: a response code now, or a future of one.
Replica = int | asyncio.Future[int]


class _Waiter:
    __slots__ = ("deadline", "future", "offset")

    def __init__(self, offset: int, deadline: float, future: asyncio.Future[int]) -> None:
        self.offset = offset
        self.deadline = deadline
        self.future = future

    def __lt__(self, other: _Waiter) -> bool:  # bisect.insort orders by offset
        return self.offset < other.offset


class GroupTransfer:
    def __init__(self, server: HAServer, timeout_ms: int) -> None:
        self.server = server
        self.timeout_s = timeout_ms / 1000
        self._waiters: deque[_Waiter] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self.requests = 0  # waiters ever queued (appends that had to wait)
        self.timeouts = 0  # waiters answered FLUSH_SLAVE_TIMEOUT
        # Controller mode: the SyncStateSet is the master alone (``set_alone``); the highest end
        # offset answered SUCCESS that way (a slave joins the set only once it holds it)
        self.alone = False
        self.alone_acked = -1

    def set_alone(self, alone: bool) -> None:
        """Controller mode (RocketMQ 5, ``minInSyncReplicas`` 1): a master alone in its
        SyncStateSet answers appends SUCCESS without a slave (no other replica may be elected,
        so nothing acknowledged can be lost), and the waiting ones at once. Set only after the
        shrunk set is in the controller's state; cleared before a larger set is written."""
        self.alone = alone
        if alone and self._waiters:
            top = self._waiters[-1].offset
            self.alone_acked = max(self.alone_acked, top)
            self.acked(top)

    @property
    def waiting(self) -> int:
        """How many appends wait for a slave's ack now (one waiter per append)."""
        return len(self._waiters)

    def request(self, end_offset: int) -> int | asyncio.Future[int]:
        """The replication outcome of an append ending at ``end_offset``: a response code now,
        or a future of one (module docstring). On the event loop thread."""
        server = self.server
        acked = server.max_acked
        if acked >= end_offset:
            return SUCCESS
        if self.alone:
            if end_offset > self.alone_acked:
                self.alone_acked = end_offset
            return SUCCESS
        if not server.slave_connected or end_offset - acked >= SLAVE_FALLBEHIND_MAX:
            return SLAVE_NOT_AVAILABLE
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        w = _Waiter(end_offset, time.monotonic() + self.timeout_s, fut)
        waiters = self._waiters
        if not waiters or waiters[-1].offset <= end_offset:
            waiters.append(w)
        else:
            bisect.insort(waiters, w)
        self.requests += 1
        if self._timer is None:
            self._timer = loop.call_at(loop.time() + self.timeout_s, self._sweep)
        return fut

    def acked(self, offset: int) -> None:
        """A slave acked ``offset``: resolve every waiter it covers (one pass from the head)."""
        waiters = self._waiters
        while waiters and waiters[0].offset <= offset:
            fut = waiters.popleft().future
            if not fut.done():
                fut.set_result(SUCCESS)
        if not waiters and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _sweep(self) -> None:
        """The timeout sweep: answer FLUSH_SLAVE_TIMEOUT to every waiter past its deadline, then
        arm the timer for the new head."""
        self._timer = None
        waiters = self._waiters
        now = time.monotonic()
        n = 0
        while waiters and waiters[0].deadline <= now:
            fut = waiters.popleft().future
            if not fut.done():
                fut.set_result(FLUSH_SLAVE_TIMEOUT)
                n += 1
        if n:
            self.timeouts += n
            log.warning("HA: %d appends not acked by a slave within %g s (acked offset %d)", n,
                        self.timeout_s, self.server.max_acked)
        if waiters:
            loop = asyncio.get_running_loop()
            delay = max(0.0, waiters[0].deadline - now)
            self._timer = loop.call_at(loop.time() + delay, self._sweep)

    def close(self) -> None:
        """The server closes: the remaining waiters are answered FLUSH_SLAVE_TIMEOUT."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            if not w.future.done():
                w.future.set_result(FLUSH_SLAVE_TIMEOUT)
