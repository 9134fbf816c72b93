"""One Remoting connection on asyncio, for either side: the server's accepted sockets and the
client's outgoing ones.

An ``asyncio.Protocol`` (streams cost several times more per frame here) that feeds received
bytes to the sans-IO ``FrameDecoder`` and routes each command:

* a response (flag bit 0) goes to the ``ReplyWaiter`` its request is waiting with, found by
  ``opaque`` in the connection's ``PendingTable`` (``pending.py``);
* a request goes to the connection's ``RequestHandler`` (the server's processor table, or a
  client's handler for broker-initiated requests such as NOTIFY_CONSUMER_IDS_CHANGED).

Limits (``ConnectionLimits``): at most ``max_inflight`` requests from the peer are answered by
coroutines at once (beyond that the connection stops reading until half finish), at most
``max_pending`` of our own requests wait for responses, and every request has a timeout.

Backpressure (the server side, ``read_backpressure``): replies, whether a handler returns them at
once, from a coroutine, or later through ``send`` (held pulls), go to the transport's write
buffer, whose water marks are ``write_high``/``write_low``. When the peer leaves them unread past
the high mark the transport calls ``pause_writing``: the connection stops reading and holds back
the requests it has already read, in order, without running them; work that would write to it
later can wait in the same queue (``when_writable``). Once the peer has read the buffer down to
the low mark (``resume_writing``) the held-back requests run and reading resumes. So a peer that
does not read costs at most the high mark, one coalesced run of replies (``COALESCE_MAX``), the
requests of one read and the replies of coroutines already running. ``blocked_since`` and
``last_io`` let the server close a connection stuck above the mark, or idle, for too long.

A frame that breaks the stream (bad length, oversized) closes the connection; a malformed header
inside a well-delimited frame is answered with SYSTEM_ERROR when its opaque can be read; a frame
whose header is above ``max_header`` is not decoded and closes the connection. Both limits on a
header are the decoder's: it counts a request's ext fields as it decodes the header, and one with
more than ``max_ext_fields`` comes out as an ``ExtFieldsLimitError`` (answered SYSTEM_ERROR unless
oneway, not run, the connection kept), so the dispatch loop counts nothing per request.

A server's connections share a ``FrameBudget`` for the partial frames they buffer, and a
``LimitCounts`` for the limits crossed; its ``on_open`` admits or refuses each connection once
its peer is known.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol, cast

from rocketlite.common.errors import FormatError, HeaderTooLargeError, ProtocolError, RemotingError
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import ExtFieldsLimitError, FrameDecoder, RemotingCommand
from rocketlite.remoting.limits import ConnectionLimits, FrameBudget, LimitCounts, PeerLog
from rocketlite.remoting.output import COALESCE_MAX, WRITE_ALONE, CoalescedOutput
from rocketlite.remoting.pending import FutureWaiter, PendingTable, ReplyWaiter, next_opaque

log = logging.getLogger(__name__)
BAD_FRAMES = PeerLog(log)
"""Warnings about bad frames for connections that were given no ``PeerLog`` of their own."""
SERVER_LIMITS = ConnectionLimits()
CLIENT_COUNTS = LimitCounts()
"""Limit crossings of connections that were given no ``LimitCounts`` of their own (clients')."""

DEFAULT_MAX_PENDING = 65536
TIMEOUT_SWEEP = 0.02
"""Seconds between checks for requests past their deadline (Java scans every second)."""


_now = time.monotonic


def _packed_ip(ip: str) -> bytes:
    """The peer's address as a message's born host: IPv4 (also IPv4-mapped IPv6) in 4 bytes."""
    try:
        packed = socket.inet_pton(socket.AF_INET6 if ":" in ip else socket.AF_INET, ip)
    except OSError:
        return b"\x7f\x00\x00\x01"
    if len(packed) == 16 and packed[:12] == b"\x00" * 10 + b"\xff\xff":
        return packed[12:]
    return packed


class RequestHandler(Protocol):
    def __call__(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        """Answer a request: a response now, an awaitable of one, or None (no reply now: a
        oneway request, or one the handler answers later with ``conn.send``)."""


RunHandler = Callable[["Connection", list[RemotingCommand]], None]
"""Answers a run of consecutive requests read together, in one call, as the request handler would
answer each (replies, errors, oneway requests unanswered); the requests it does not take itself
it passes, in order, to ``Connection.handle_request``. Raising is a bug: the run's requests are
answered SYSTEM_ERROR."""

Signer = Callable[[RemotingCommand], None]
"""Adds credentials to an outgoing request's ext fields (``remoting/acl_gate.request_signer``)."""

# A command read from the peer and not yet run, or work waiting for the write buffer to drain.
Held = RemotingCommand | ProtocolError | Callable[[], None]


class Connection(CoalescedOutput, asyncio.Protocol):
    def __init__(
        self,
        handler: RequestHandler | None = None,
        *,
        limits: ConnectionLimits = SERVER_LIMITS,
        max_pending: int = DEFAULT_MAX_PENDING,
        on_close: Callable[[Connection], None] | None = None,
        peer_log: PeerLog = BAD_FRAMES,
        frame_budget: FrameBudget | None = None,
        run_handlers: Mapping[int, RunHandler] | None = None,
        counts: LimitCounts = CLIENT_COUNTS,
        on_open: Callable[[Connection], bool] | None = None,
    ) -> None:
        self.handler = handler
        self.counts = counts
        self.on_open = on_open  # False: refused (closed at once, ``admitted`` stays False)
        self.admitted = False
        # Request codes whose consecutive requests go to a RunHandler together (read, not copied:
        # the server's table, which registrations may change).
        self.run_handlers: Mapping[int, RunHandler] = run_handlers if run_handlers is not None else {}
        self.limits = limits
        self.peer_log = peer_log
        self.decoder = FrameDecoder(limits.max_frame, limits.max_header, limits.max_ext_fields)
        self.max_inflight = limits.max_inflight
        self.max_pending = max_pending
        self.frame_budget = frame_budget
        self._held_bytes = 0  # this connection's partial frame, as the budget knows it
        self.on_close = on_close
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.peer_ip = "?"
        self.peer_host = b"\x7f\x00\x00\x01"  # packed IPv4 (4 bytes) or IPv6 (16 bytes)
        self.peer_port = 0
        self._pending = PendingTable()
        self._inflight = 0
        self._inflight_full = False
        self._reading_paused = False
        self._backpressure = limits.read_backpressure
        self._holding = False  # replies wait above the high mark: run no more requests
        self._held: collections.deque[Held] = collections.deque()
        self._held_scheduled = False
        self.blocked_since = 0.0  # monotonic time the write buffer passed the high mark; 0: below
        self.last_io = 0.0  # monotonic time of the last read or write
        self._can_write: asyncio.Event | None = None
        self._closed_fut: asyncio.Future[None] | None = None
        self._out: list[bytes] = []  # frames waiting to be written together
        self._in_read = False
        self._out_big = False  # a piece of WRITE_ALONE bytes or more waits in _out
        self._read_end: list[Callable[[], None]] = []  # work to run once the read is handled
        self._flush_scheduled = False
        self._sweeper: asyncio.TimerHandle | None = None
        self.signer: Signer | None = None  # signs our requests (ACL credentials), if set

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer = f"{peer[0]}:{peer[1]}"
            self.peer_ip = str(peer[0])
            self.peer_port = int(peer[1])
            self.peer_host = _packed_ip(str(peer[0]))
        self.transport.set_write_buffer_limits(self.limits.write_high, self.limits.write_low)
        loop = asyncio.get_running_loop()
        self._closed_fut = loop.create_future()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self.last_io = _now()
        if self.on_open is not None and not self.on_open(self):
            self.transport.close()
            return
        self.admitted = True

    def data_received(self, data: bytes) -> None:
        self.last_io = _now()
        decoder = self.decoder
        try:
            items = decoder.feed(data)
        except Exception as e:  # noqa: BLE001 - ProtocolError: the stream broke; else a codec bug
            what = "" if isinstance(e, ProtocolError) else f"{type(e).__name__}: "
            self.peer_log.warning(self.peer_ip, "closing connection from %s: %s%s", self.peer, what, e)
            self.close()
            return
        budget = self.frame_budget
        if budget is not None and decoder.buffered != self._held_bytes:
            old = self._held_bytes
            self._held_bytes = decoder.buffered
            budget.update(self, old, self._held_bytes)  # may shed this very connection
            if not self.is_open:
                return
        if not items:
            return
        if self._held:  # requests read earlier wait for the peer to read: keep the order
            self._held.extend(items)
            return
        self._run(items)

    def _run(self, items: Iterable[Held]) -> None:
        """Run what the peer sent, in order; once replies wait above the high mark, hold back
        the rest (``_holding``) until the peer reads them (``resume_writing``)."""
        self._in_read = True
        runs = self.run_handlers
        try:
            todo = items if isinstance(items, list) else list(items)
            n = len(todo)
            i = 0
            while i < n:
                item = todo[i]
                if self._holding:
                    self._held.extend(todo[i:])
                    break
                i += 1
                if item.__class__ is RemotingCommand:
                    if item.flag & 1:  # a response
                        self._pending.complete(item)
                    elif runs and (run := runs.get(item.code)) is not None:
                        i = self._run_requests(run, todo, i - 1, n)
                    else:
                        self.handle_request(item)
                elif isinstance(item, ProtocolError):
                    self._bad_request(item)
                else:
                    item()  # type: ignore[operator]  # work that waited for the buffer to drain
        finally:
            if self._read_end:
                self._end_read()
            self._in_read = False
        if self._out:
            self._flush_out()

    def at_read_end(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the requests of the current read are all handled, before their
        replies are written (processors that batch the requests of one read: one append, one
        write); outside a read, at the end of this loop iteration."""
        if self._in_read:
            self._read_end.append(fn)
        else:
            asyncio.get_running_loop().call_soon(fn)

    def _end_read(self) -> None:
        """The read's end: run what processors asked for (each once, in order; a failing one
        does not keep the others from running)."""
        while self._read_end:
            fns, self._read_end = self._read_end, []
            for fn in fns:
                try:
                    fn()
                except Exception:
                    log.exception("end-of-read work on the connection from %s failed", self.peer)

    def when_writable(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` now, or, while this connection's replies wait above the high mark, after
        the requests held back before it (for work that writes a reply, such as a held pull)."""
        if self._holding or self._held:
            self._held.append(fn)
        else:
            fn()

    def _run_held(self) -> None:
        self._held_scheduled = False
        if self._holding:
            return
        items, self._held = self._held, collections.deque()
        if self.is_open:
            self._run(items)
        self._update_reading()

    def _update_reading(self) -> None:
        """Read while nothing holds it back: coroutines in flight, replies above the high mark,
        requests read earlier and not yet run."""
        paused = self._inflight_full or self._holding or bool(self._held)
        transport = self.transport
        if paused is not self._reading_paused and transport is not None and not transport.is_closing():
            self._reading_paused = paused
            if paused:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def shed(self) -> None:
        """Close now, dropping what is buffered either way (the frame budget's last resort)."""
        self._held_bytes = 0
        self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        err = RemotingError(f"connection to {self.peer} closed" + (f": {exc}" if exc else ""))
        try:
            self._pending.fail_all(err)
        finally:
            if self._can_write is not None:
                self._can_write.set()
            if self._closed_fut is not None and not self._closed_fut.done():
                self._closed_fut.set_result(None)
            self._release()
            if self.on_close is not None:
                self.on_close(self)

    def _release(self) -> None:
        """Drop what this connection buffers; held pulls may keep the object alive a while."""
        self._held.clear()
        self._out = []
        self.decoder.discard()
        if self._held_bytes and self.frame_budget is not None:
            self.frame_budget.update(self, self._held_bytes, 0)
        self._held_bytes = 0

    def pause_writing(self) -> None:
        """The transport's buffer passed the high mark: the peer is not reading its replies."""
        self.blocked_since = _now()
        if self._can_write is not None:
            self._can_write.clear()
        if self._backpressure:
            self._holding = True
            self._update_reading()

    def resume_writing(self) -> None:
        """The peer read the buffer down to the low mark: run what was held back, read again."""
        self.blocked_since = 0.0
        if self._can_write is not None:
            self._can_write.set()
        if self._holding:
            self._holding = False
            if not self._held:
                self._update_reading()
            elif not self._held_scheduled:  # not from inside the transport's write callback
                self._held_scheduled = True
                asyncio.get_running_loop().call_soon(self._run_held)

    # -- requests from the peer ---------------------------------------------------------------

    def _bad_request(self, err: ProtocolError) -> None:
        if isinstance(err, ExtFieldsLimitError):
            self._too_many_ext_fields(err)
            return
        self.peer_log.warning(self.peer_ip, "bad request from %s: %s", self.peer, err)
        if isinstance(err, HeaderTooLargeError):
            self.counts.hit("header_bytes")
        if err.opaque is None:
            self.close()  # nothing to answer to: the peer is not speaking Remoting
        else:
            reply = RemotingCommand(code=ResponseCode.SYSTEM_ERROR, opaque=err.opaque, flag=1,
                                    remark=f"bad request: {err}")
            self.send(reply)

    def _too_many_ext_fields(self, err: ExtFieldsLimitError) -> None:
        """The decoder refused a request for its ext fields: not run, answered unless oneway;
        the stream is sound, so the connection goes on."""
        self.counts.hit("ext_fields")
        cmd = err.command
        self.peer_log.warning(self.peer_ip, "request %d from %s has %d ext fields, above "
                              "maxExtFields (%d): not run", cmd.code, self.peer, err.count,
                              err.limit)
        if not cmd.is_oneway:
            self.send(cmd.response(ResponseCode.SYSTEM_ERROR, str(err)))

    def _run_requests(self, run: RunHandler, items: list[Held], start: int, n: int) -> int:
        """Hand ``run`` the requests from ``start`` on that it handles (consecutive ones whose
        codes map to it); returns the index after them."""
        runs = self.run_handlers
        code = items[start].code  # type: ignore[union-attr]
        end = start + 1
        while end < n:
            nxt = items[end]
            if nxt.__class__ is not RemotingCommand or nxt.flag & 1:
                break
            if nxt.code != code:
                other = runs.get(nxt.code)
                if other is not run and (other is None or other != run):  # equal: bound methods
                    break
            end += 1
        cmds = cast(list[RemotingCommand], items[start:end])
        try:
            run(self, cmds)
        except Exception as e:
            log.exception("the run handler of request %d from %s failed", cmds[0].code, self.peer)
            for cmd in cmds:
                self._reply_error(cmd, e)
        return end

    def handle_request(self, cmd: RemotingCommand) -> None:
        """Answer one request through the connection's request handler (a run handler hands
        over those it does not take itself)."""
        handler = self.handler
        if handler is None:
            self.send(cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                   f"request code {cmd.code} is not supported by this peer"))
            return
        try:
            result = handler(self, cmd)
        except Exception as e:  # noqa: BLE001 - a failing processor answers SYSTEM_ERROR
            self._reply_error(cmd, e)
            return
        if result is None:
            return
        if isinstance(result, RemotingCommand):
            if not cmd.is_oneway:
                self.send(result)
            return
        self._inflight += 1
        if self._inflight >= self.max_inflight and not self._inflight_full:
            self._inflight_full = True
            self.counts.hit("inflight")
            self._update_reading()
        task = asyncio.ensure_future(result)
        task.add_done_callback(lambda t: self._request_done(cmd, t))

    def _request_done(self, cmd: RemotingCommand, task: asyncio.Future[RemotingCommand | None]) -> None:
        self._inflight -= 1
        if self._inflight_full and self._inflight < self.max_inflight // 2:
            self._inflight_full = False
            self._update_reading()
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._reply_error(cmd, exc)
            return
        reply = task.result()
        if reply is not None and not cmd.is_oneway:
            self.send(reply)

    def _reply_error(self, cmd: RemotingCommand, exc: BaseException) -> None:
        code = getattr(exc, "response_code", None)
        if code is None:
            if isinstance(exc, FormatError):  # a bad header or body: the peer's mistake
                self.peer_log.warning(self.peer_ip, "request %d from %s: %s", cmd.code, self.peer, exc)
            else:
                log.error("request %d from %s failed", cmd.code, self.peer, exc_info=exc)
            code = ResponseCode.SYSTEM_ERROR
        if not cmd.is_oneway:
            self.send(cmd.response(int(code), f"{type(exc).__name__}: {exc}"))

    # -- our side -----------------------------------------------------------------------------

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        if self._can_write is not None and not self._can_write.is_set():
            await self._can_write.wait()

    async def request(
        self, cmd: RemotingCommand, timeout: float  # noqa: ASYNC109 - per-request timeout, Remoting API
    ) -> RemotingCommand:
        """Send a request and wait up to ``timeout`` seconds for its response."""
        return await self.request_future(cmd, timeout)

    def request_future(self, cmd: RemotingCommand, timeout: float) -> asyncio.Future[RemotingCommand]:
        """Send a request now; the future gets its response, or ``RemotingTimeoutError`` once
        ``timeout`` seconds have passed, or ``RemotingError`` if the connection closes first."""
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        opaque = cmd.opaque = next_opaque()
        if self.signer is not None:
            self.signer(cmd)
        self._wait(opaque, FutureWaiter(fut), timeout, cmd.code)
        self.send(cmd)
        return fut

    def send_request(self, head: bytes, body: bytes, opaque: int, code: int, timeout: float,
                     waiter: ReplyWaiter) -> None:
        """Send an encoded request (``head``: length field, header length and header; ``body``
        may be empty) whose header says ``opaque`` (from ``next_opaque()``): ``waiter`` gets the
        reply, or ``RemotingTimeoutError`` once ``timeout`` seconds have passed (checked every
        ``TIMEOUT_SWEEP`` s), or ``RemotingError`` if the connection closes first. No future, no
        task and no timer per request: the deadline joins the FIFO of the requests with the same
        timeout, which one periodic sweep walks. Raises ``RemotingError`` (and sends nothing)
        when the connection is closed or ``max_pending`` requests already wait. The request
        goes as encoded: on a connection with a ``signer`` it must be signed already (the
        producer's templates sign their frames: ``client.send_sign.SignedSendFrame``)."""
        transport = self.transport
        pending = self._pending
        if transport is None or transport.is_closing() or len(pending.waiters) >= self.max_pending:
            self._wait(opaque, waiter, timeout, code)  # raises
        pending.add(opaque, waiter, timeout, _now(), code)
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(TIMEOUT_SWEEP, self._sweep)
        out = self._out
        out.append(head)
        if body:
            out.append(body)
            if len(body) >= WRITE_ALONE:
                self._out_big = True
        elif len(head) >= WRITE_ALONE:  # a whole frame in ``head`` (a large batch)
            self._out_big = True
        if len(out) >= COALESCE_MAX:
            self._flush_out()
        elif not self._in_read and not self._flush_scheduled:  # _schedule_flush, inline
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_out)

    def _wait(self, opaque: int, waiter: ReplyWaiter, timeout: float, code: int) -> None:
        if not self.is_open:
            raise RemotingError(f"connection to {self.peer} is closed")
        pending = self._pending
        if len(pending.waiters) >= self.max_pending:
            raise RemotingError(f"{len(pending.waiters)} requests to {self.peer} already wait")
        pending.add(opaque, waiter, timeout, _now(), code)
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(TIMEOUT_SWEEP, self._sweep)

    @property
    def _deadlines(self) -> dict[float, collections.deque[tuple[float, int, int]]]:
        """The pending table's deadline FIFOs, per timeout value (tests check they empty)."""
        return self._pending.fifos

    def _sweep(self) -> None:
        """Fail the requests whose deadline passed; drop answered ones from the FIFOs' fronts."""
        self._sweeper = None
        watching = True
        try:
            watching = self._pending.sweep(_now(), self.peer)
        finally:
            if watching:
                self._sweeper = asyncio.get_running_loop().call_later(TIMEOUT_SWEEP, self._sweep)

    def send_oneway(self, cmd: RemotingCommand) -> None:
        cmd.flag |= 0x2
        cmd.opaque = next_opaque()
        if self.signer is not None:
            self.signer(cmd)
        self.send(cmd)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._flush_out()  # replies already sent go out before the close
            self.transport.close()

    def close_idle(self) -> None:
        """Close a connection idle for the server's idle time: gracefully, unless replies still
        wait unwritten (the peer has not read for all that time, so a graceful close would wait
        for ever): those are dropped (``abort``)."""
        if self.transport is not None and self.transport.get_write_buffer_size():
            self.abort()
        else:
            self.close()

    def abort(self) -> None:
        """Close at once, dropping unwritten replies (a peer that does not read them)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()
        self._release()

    async def wait_closed(self) -> None:
        if self._closed_fut is not None:
            await asyncio.shield(self._closed_fut)
