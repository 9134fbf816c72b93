"""``Stream``: one gRPC call on an HTTP/2 connection: the request messages as they arrive (each
taken reopens the stream's window), the response sent under the client's windows (what does not
fit waits, in order, until a WINDOW_UPDATE), and the end: trailers with grpc-status, or a reset.
A call of a batched unary method (``batched``, set by the server) has no task: once its request
is complete the stream goes to its connection's ``ready`` list, which the server's batch handler
takes at the end of the read.

The response header blocks are constant bytes (RFC 7541, no dynamic table: an indexed ``:status
200`` and literals without indexing), so nothing is encoded per call but a status message."""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from rocketlite.proxy.h2 import frames as f

if TYPE_CHECKING:
    from rocketlite.proxy.h2.connection import H2Connection

MAX_STATUS_MESSAGE: Final = 4_096  # a grpc-message is cut here: the trailers fit one frame
INBOX_BYTES: Final = 4 << 20  # request bytes held for a handler before the window stays shut


def _hpack_int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    """An HPACK integer (RFC 7541 5.1) with ``first``'s high bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _literal(name: bytes, value: bytes) -> bytes:
    """A literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    return b"\x00" + _hpack_int(len(name), 7) + name + _hpack_int(len(value), 7) + value


STATUS_200: Final = b"\x88"
CONTENT_TYPE: Final = b"\x0f\x10" + _hpack_int(16, 7) + b"application/grpc"  # static name 31
RESPONSE_HEADERS: Final = STATUS_200 + CONTENT_TYPE
_HEADERS_FRAME: Final = f.frame(f.HEADERS, f.END_HEADERS, 0, RESPONSE_HEADERS)
OK_TRAILERS: Final = _literal(b"grpc-status", b"0")
# A unary answer around its message: the HEADERS frame, the DATA frame's header and the gRPC
# message prefix (``_REPLY_HEAD``), then the OK trailers' HEADERS frame (``_REPLY_TAIL``).
_REPLY_HEAD: Final = struct.Struct(f">IBI{len(RESPONSE_HEADERS)}sIBIBI")
_HEADERS_TYPE: Final = len(RESPONSE_HEADERS) << 8 | f.HEADERS
_REPLY_TAIL: Final = struct.Struct(f">IBI{len(OK_TRAILERS)}s")
_TRAILERS_TYPE: Final = len(OK_TRAILERS) << 8 | f.HEADERS


def trailers(code: int, message: str = "") -> bytes:
    block = _literal(b"grpc-status", str(code).encode())
    if message:
        text = quote(message[:MAX_STATUS_MESSAGE], safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~")
        block += _literal(b"grpc-message", text.encode("ascii")[:3 * MAX_STATUS_MESSAGE])
    return block


class Stream:
    """The server side of one stream (module docstring). ``task``, ``deadline`` and ``path``
    are the server's to fill."""

    __slots__ = (
        "_counted",
        "_headers_sent",
        "_held",
        "_inbox_bytes",
        "_pending",
        "_rbuf",
        "_sent",
        "_trailers",
        "_waiter",
        "batched",
        "bucket",
        "callbacks",
        "cancelled",
        "conn",
        "deadline",
        "done",
        "headers",
        "inbox",
        "local_closed",
        "recv_window",
        "remote_closed",
        "send_window",
        "sid",
        "task",
    )

    def __init__(self, conn: H2Connection, sid: int) -> None:
        self.conn = conn
        self.sid = sid
        self.headers: list[tuple[str, str]] = []
        self.remote_closed = False
        self.local_closed = False
        self.cancelled = False
        self.done = False
        self.send_window = conn.peer_initial_window
        self.recv_window = conn.limits.stream_window
        self._rbuf = b""
        self.inbox: deque[bytes] = deque()
        self._inbox_bytes = 0
        self._held = 0  # bytes received and not granted again (the handler is behind)
        self._counted = 0  # what this stream adds to the connection's ``buffered``
        self._waiter: asyncio.Future[None] | None = None
        self._pending: deque[bytes] = deque()  # gRPC messages (prefixed) not sent yet
        self._trailers: bytes | None = None
        self._headers_sent = False
        self._sent: asyncio.Future[None] | None = None
        self.task: asyncio.Task[Any] | None = None
        self.batched: Any = None  # the server's batched unary method, until the request is in
        self.bucket: set[Stream] | None = None  # the deadline bucket it waits in
        self.deadline: float | None = None
        self.callbacks: list[Callable[[], None]] = []

    # -- input ----------------------------------------------------------------------------------

    def received(self, data: bytes, size: int, end: bool) -> bool:
        """A DATA payload (``size`` counting its padding, ``end``: the client's last); False
        when it ended the stream."""
        self.recv_window -= size
        if self.recv_window < 0:
            self.conn._stream_error(self, f.FLOW_CONTROL_ERROR)
            return False
        buf = self._rbuf + data if self._rbuf else data
        messages, used, refused = f.split_messages(buf, self.conn.limits.max_message)
        if refused:
            self.fail(12, "compressed messages are not accepted (no grpc-encoding)") \
                if refused < 0 else \
                self.fail(8, f"a request message of {refused} bytes (at most "
                             f"{self.conn.limits.max_message})")
            return False
        self._rbuf = buf[used:] if used < len(buf) else b""
        for m in messages:
            self.inbox.append(m)
            self._inbox_bytes += len(m)
        self._account()
        if not end:
            self._held += size
            self._reopen()
        return True

    def _reopen(self) -> None:
        """Grants the client again what it sent, unless the handler is that far behind."""
        if self._held and self._inbox_bytes < INBOX_BYTES:
            self.recv_window += self._held
            self.conn.reopen(self, self._held)
            self._held = 0

    def input_arrived(self) -> None:
        if self.remote_closed and self._rbuf:
            self.fail(13, f"the request ended inside a message ({len(self._rbuf)} bytes left)")
            return
        if self.remote_closed:
            if self.local_closed:
                self._end()
            elif self.batched is not None:  # a batched unary call's request is complete
                self.conn.ready.append((self, self.batched))
                self.batched = None
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def take(self) -> bytes | None:
        """The next request message if one is there."""
        if not self.inbox:
            return None
        m = self.inbox.popleft()
        self._inbox_bytes -= len(m)
        self._account()
        if self._held:
            self._reopen()
        return m

    def _account(self) -> None:
        """Brings the connection's ``buffered`` up to date with what this stream holds."""
        now = len(self._rbuf) + self._inbox_bytes
        if now != self._counted:
            conn = self.conn
            shrank = now < self._counted
            conn.buffered += now - self._counted
            self._counted = now
            if shrank:
                conn.reopen_connection()

    async def recv(self) -> bytes | None:
        """The next request message; None once the client half-closed (or the stream ended)."""
        while not self.inbox:
            if self.remote_closed or self.cancelled or self.local_closed:
                return None
            self._waiter = self.conn.loop.create_future()
            await self._waiter
        return self.take()

    # -- output ---------------------------------------------------------------------------------

    def reply(self, payload: bytes) -> None:
        """A unary answer: headers, the message and OK trailers, in one write when they fit."""
        if self.local_closed:
            return
        n = len(payload) + f.MESSAGE_PREFIX_SIZE
        conn = self.conn
        if (not self._headers_sent and not self._pending and n <= self.send_window
                and n <= conn.send_window and n <= conn.peer_max_frame):
            self.send_window -= n
            conn.send_window -= n
            self._headers_sent = True
            sid = self.sid
            conn.write(b"".join((
                _REPLY_HEAD.pack(_HEADERS_TYPE, f.END_HEADERS, sid, RESPONSE_HEADERS,
                                 n << 8 | f.DATA, 0, sid, 0, len(payload)),
                payload,
                _REPLY_TAIL.pack(_TRAILERS_TYPE, f.END_HEADERS | f.END_STREAM, sid, OK_TRAILERS))))
            self._closed_locally()
            return
        self.send(payload)
        self.finish(0)

    def send(self, payload: bytes) -> None:
        """One response message, sent now or queued behind a shut window."""
        if self.local_closed or self.cancelled:
            return
        if not self._headers_sent:
            self._headers_sent = True
            self.conn.write(f.frame_header(len(RESPONSE_HEADERS), f.HEADERS, f.END_HEADERS,
                                           self.sid) + RESPONSE_HEADERS)
        self._pending.append(f.message(payload))
        self.flush()

    async def sent(self) -> None:
        """Returns once queued messages are out and the transport takes writes."""
        while self._pending and not self.cancelled:
            self._sent = self.conn.loop.create_future()
            await self._sent
        await self.conn.drained()

    def flush(self) -> None:
        """Sends what the windows allow of the queued messages, then the trailers if queued."""
        conn = self.conn
        pending = self._pending
        while pending:
            room = min(self.send_window, conn.send_window, conn.peer_max_frame)
            if room <= 0:
                if conn.send_window <= 0 and self not in conn.blocked:
                    conn.blocked.append(self)
                return
            head = pending[0]
            chunk = head if len(head) <= room else head[:room]
            if chunk is head:
                pending.popleft()
            else:
                pending[0] = head[room:]
            self.send_window -= len(chunk)
            conn.send_window -= len(chunk)
            conn.write(f.frame_header(len(chunk), f.DATA, 0, self.sid) + chunk)
        if self._sent is not None and not self._sent.done():
            self._sent.set_result(None)
        if self._trailers is not None:
            block, self._trailers = self._trailers, None
            conn.write(f.frame_header(len(block), f.HEADERS, f.END_HEADERS | f.END_STREAM,
                                      self.sid) + block)
            self._closed_locally()

    def finish(self, code: int, message: str = "") -> None:
        """Ends the response: trailers with ``code`` (after any queued messages), or a
        trailers-only answer when nothing was sent."""
        if self.local_closed or self.cancelled:
            return
        block = OK_TRAILERS if code == 0 and not message else trailers(code, message)
        if not self._headers_sent:
            self._headers_sent = True
            block = RESPONSE_HEADERS + block
        self._trailers = block
        self.flush()

    def fail(self, code: int, message: str) -> None:
        """A stream error of ours: the status to the client, the stream reset, its task ended."""
        self.finish(code, message)
        if not self.local_closed:  # held behind a shut window: the client learns by the reset
            self.conn.write(f.rst_stream(self.sid, f.CANCEL))
        self._cancel_task()
        self.reset()

    def _closed_locally(self) -> None:
        self.local_closed = True
        if self.remote_closed:
            self._end()
        else:  # the client still sending: it need not (gRPC: trailers then RST_STREAM NO_ERROR)
            self.conn.write(f.rst_stream(self.sid, f.NO_ERROR))
            self.remote_closed = True
            self._end()

    def _end(self) -> None:
        if self.done:
            return
        self.done = True
        if self.bucket is not None:
            self.bucket.discard(self)
        if self._counted:
            self._rbuf = b""
            self.inbox.clear()
            self._inbox_bytes = 0
            self._account()
        self.conn.stream_done(self)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)
        for cb in self.callbacks:
            cb()

    def reset(self) -> None:
        """The stream is gone (RST_STREAM either way, the connection lost): its handler is
        cancelled, what it queued is dropped."""
        if self.done:
            return
        self.cancelled = True
        self._pending.clear()
        self._trailers = None
        if self._sent is not None and not self._sent.done():
            self._sent.set_result(None)
        self._cancel_task()
        self._end()

    def _cancel_task(self) -> None:
        task = self.task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
