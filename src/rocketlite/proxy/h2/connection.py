"""``H2Connection``: one client's HTTP/2 connection to the native gRPC server, an asyncio
Protocol. It owns the frames' order and meaning (RFC 9113): the preface, SETTINGS (ours sent
first, the client's applied and acknowledged), PING acks, header blocks (HPACK: ``hpack_decode``;
CONTINUATION gathered),
streams (``Stream``: at most ``Limits.max_streams`` open, more REFUSED_STREAM), flow control both
ways (our windows reopened as data is taken, the client's windows and frame size respected when
sending, data waiting per stream while a window is shut), RST_STREAM both ways (a client
cancelling more than ``Limits.max_resets_per_s`` calls a second is cut off) and GOAWAY.

A protocol error ends the connection with GOAWAY and its error code; a stream's error (a message
too big, a compressed one) ends that stream with a grpc-status and RST_STREAM. What a stream
means (the method, its handler) is the server's: ``on_stream`` is called once a request's headers
are complete, and ``on_ready`` once per read with the batched unary calls whose requests became
complete in it (``Stream.batched``), before the read's answers are written."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from rocketlite.proxy.h2 import frames as f
from rocketlite.proxy.h2.hpack_decode import HeaderDecoder, HPACKError
from rocketlite.proxy.h2.stream import Stream

log = logging.getLogger(__name__)



@dataclass(slots=True, frozen=True)
class Limits:
    """What one connection may hold: open streams, a header list's size (decoded, RFC 9113
    6.5.2 sizing), a gRPC message's size, the receive windows we grant, and the request bytes
    held for handlers on all its streams (past ``max_buffered`` the connection window stays shut
    until handlers take messages or streams end; it must exceed ``max_message``)."""

    max_streams: int = 1_000
    max_header_list: int = 16 << 10
    max_message: int = 130 << 20
    stream_window: int = 1 << 20
    connection_window: int = 16 << 20
    max_frame: int = f.DEFAULT_MAX_FRAME_SIZE
    max_buffered: int = 256 << 20
    max_resets_per_s: int = 1_000  # calls a client may cancel a second ("rapid reset")

    def __post_init__(self) -> None:
        if self.max_buffered <= self.max_message:
            raise ValueError(f"max_buffered {self.max_buffered} must exceed max_message "
                             f"{self.max_message}: a message could never complete")
        if not f.DEFAULT_WINDOW <= self.connection_window <= f.MAX_WINDOW \
                or not 0 < self.stream_window <= f.MAX_WINDOW:
            raise ValueError("windows must be within 65535..2^31-1 (stream: 1..2^31-1)")


class ConnectionError_(Exception):
    """A connection error: GOAWAY with ``code``, then close."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class H2Connection(asyncio.Protocol):
    def __init__(self, on_stream: Callable[[Stream], None], limits: Limits,
                 on_close: Callable[[H2Connection], None] | None = None,
                 on_ready: Callable[[list[tuple[Stream, Any]]], None] | None = None) -> None:
        self.on_stream = on_stream
        self.on_ready = on_ready
        self.ready: list[tuple[Stream, Any]] = []  # batched calls with their request (a read's)
        self.on_close = on_close
        self.limits = limits
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.streams: dict[int, Stream] = {}
        self.last_sid = 0
        self._buf = bytearray()
        self._preface = False
        self._continuing: tuple[int, int, list[bytes], int] | None = None
        self._decoder = HeaderDecoder()
        # the client's settings and windows (what we may send)
        self.send_window = f.DEFAULT_WINDOW
        self.peer_initial_window = f.DEFAULT_WINDOW
        self.peer_max_frame = f.DEFAULT_MAX_FRAME_SIZE
        # what we granted and have not reopened yet
        self._recv_window = f.DEFAULT_WINDOW
        self._recv_unacked = 0
        self.buffered = 0  # request bytes the streams hold (``Limits.max_buffered``)
        self.blocked: deque[Stream] = deque()
        self._out: list[bytes] = []
        self._reset_second = 0
        self._resets = 0  # RST_STREAMs of the client in ``_reset_second``
        self._reading = False
        self.paused = False
        self._resumed: asyncio.Future[None] | None = None
        self.going_away = False
        self.closed = asyncio.Event()

    # -- transport events ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's: no subclass
        addr = transport.get_extra_info("peername")
        if isinstance(addr, tuple) and len(addr) >= 2:
            host = str(addr[0])
            self.peer = f"ipv6:[{host}]:{addr[1]}" if ":" in host else f"ipv4:{host}:{addr[1]}"
        lim = self.limits
        out = f.settings({f.MAX_CONCURRENT_STREAMS: lim.max_streams,
                          f.INITIAL_WINDOW_SIZE: lim.stream_window,
                          f.MAX_HEADER_LIST_SIZE: lim.max_header_list})
        if lim.connection_window > f.DEFAULT_WINDOW:
            out += f.window_update(0, lim.connection_window - f.DEFAULT_WINDOW)
            self._recv_window = lim.connection_window
        transport.write(out)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        for stream in list(self.streams.values()):
            stream.reset()
        self.streams.clear()
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self.closed.set()
        if self.on_close is not None:
            self.on_close(self)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    async def drained(self) -> None:
        """Returns once the transport takes writes again (at once when it does)."""
        if self.paused and self.transport is not None:
            if self._resumed is None:
                self._resumed = self.loop.create_future()
            await self._resumed

    def write(self, data: bytes) -> None:
        """Queues ``data``: what a read or a loop turn writes goes out in one ``transport.write``
        (``flush``: at the end of ``data_received``, else by ``call_soon``)."""
        out = self._out
        if not out and not self._reading:
            self.loop.call_soon(self.flush)
        out.append(data)

    def flush(self) -> None:
        out = self._out
        if out:
            data = b"".join(out) if len(out) > 1 else out[0]
            out.clear()
            if self.transport is not None:
                self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        pending = bool(self._out)  # a call_soon flush is already on its way
        self._reading = True
        try:
            self._received(data)
            if self.ready:
                ready, self.ready = self.ready, []
                if self.on_ready is not None:
                    self.on_ready(ready)
        except ConnectionError_ as e:
            self.abort(e.code, str(e))
        except Exception as e:  # a bug of ours: this connection ends, the server goes on
            log.exception("gRPC connection from %s: reading failed", self.peer)
            self.abort(f.INTERNAL_ERROR, f"internal error: {type(e).__name__}")
        finally:
            self._reading = False
            if not pending:
                self.flush()

    def _received(self, data: bytes) -> None:
        buf = self._buf
        if not self._preface:
            buf += data
            if len(buf) < len(f.PREFACE):
                if not f.PREFACE.startswith(bytes(buf)):
                    raise ConnectionError_(f.PROTOCOL_ERROR, "not an HTTP/2 connection preface")
                return
            if not buf.startswith(f.PREFACE):
                raise ConnectionError_(f.PROTOCOL_ERROR, "not an HTTP/2 connection preface")
            del buf[:len(f.PREFACE)]
            self._preface = True
            data, buf = bytes(buf), bytearray()
            self._buf = buf
        if buf:
            buf += data
            frames, used, oversize = f.split_frames(buf, self.limits.max_frame)
            del buf[:used]
        else:
            frames, used, oversize = f.split_frames(data, self.limits.max_frame)
            if used < len(data):
                buf += data[used:] if not oversize else b""
        streams = self.streams
        for ftype, flags, sid, payload in frames:
            if (ftype == f.WINDOW_UPDATE and sid and sid not in streams and len(payload) == 4
                    and self._continuing is None):
                continue  # an ended stream's window (the clients grant it after the answer)
            self._frame(ftype, flags, sid, payload)
            if self.transport is None:
                return
        if oversize:
            raise ConnectionError_(f.FRAME_SIZE_ERROR,
                                   f"a frame of {oversize} bytes (SETTINGS_MAX_FRAME_SIZE "
                                   f"{self.limits.max_frame})")

    # -- frames -------------------------------------------------------------------------------

    def _frame(self, ftype: int, flags: int, sid: int, payload: bytes) -> None:
        if self._continuing is not None and ftype != f.CONTINUATION:
            raise ConnectionError_(f.PROTOCOL_ERROR, "a header block was not continued")
        if ftype == f.DATA:
            self._data(flags, sid, payload)
        elif ftype == f.HEADERS:
            self._headers(flags, sid, payload)
        elif ftype == f.CONTINUATION:
            self._continuation(flags, sid, payload)
        elif ftype == f.WINDOW_UPDATE:
            self._window_update(sid, payload)
        elif ftype == f.SETTINGS:
            self._settings(flags, sid, payload)
        elif ftype == f.PING:
            self._ping(flags, sid, payload)
        elif ftype == f.RST_STREAM:
            self._rst_stream(sid, payload)
        elif ftype == f.GOAWAY:
            self.going_away = True
            if not self.streams:
                self.close()
        elif ftype == f.PUSH_PROMISE:
            raise ConnectionError_(f.PROTOCOL_ERROR, "a client may not push")
        # PRIORITY and unknown types are ignored (RFC 9113 5.5)

    def _ping(self, flags: int, sid: int, payload: bytes) -> None:
        if sid != 0 or len(payload) != 8:
            raise ConnectionError_(f.FRAME_SIZE_ERROR if sid == 0 else f.PROTOCOL_ERROR,
                                   "a PING must be 8 bytes on stream 0")
        if not flags & f.ACK:
            self.write(f.ping_ack(payload))

    def _rst_stream(self, sid: int, payload: bytes) -> None:
        if sid == 0 or len(payload) != 4:
            raise ConnectionError_(f.PROTOCOL_ERROR if sid == 0 else f.FRAME_SIZE_ERROR,
                                   "a RST_STREAM must be 4 bytes on a stream")
        stream = self.streams.pop(sid, None)
        if stream is not None:
            stream.reset()
            second = int(self.loop.time())
            if second != self._reset_second:
                self._reset_second, self._resets = second, 0
            self._resets += 1
            if self._resets > self.limits.max_resets_per_s:
                raise ConnectionError_(f.ENHANCE_YOUR_CALM, f"over {self.limits.max_resets_per_s}"
                                       " calls cancelled in a second")

    @staticmethod
    def _unpad(flags: int, payload: bytes) -> bytes:
        if flags & f.PADDED:
            if not payload or payload[0] >= len(payload):
                raise ConnectionError_(f.PROTOCOL_ERROR, "padding longer than the frame")
            return payload[1:len(payload) - payload[0]]
        return payload

    def _data(self, flags: int, sid: int, payload: bytes) -> None:
        size = len(payload)
        self._recv_window -= size
        if self._recv_window < 0:
            raise ConnectionError_(f.FLOW_CONTROL_ERROR, "DATA beyond the connection window")
        self._recv_unacked += size
        stream = self.streams.get(sid)
        if stream is None:
            if sid == 0 or sid > self.last_sid:
                raise ConnectionError_(f.PROTOCOL_ERROR, f"DATA on idle stream {sid}")
            self.write(f.rst_stream(sid, f.STREAM_CLOSED))
        elif stream.remote_closed:
            self._stream_error(stream, f.STREAM_CLOSED)
        else:
            end = bool(flags & f.END_STREAM)
            if stream.received(self._unpad(flags, payload), size, end):
                stream.remote_closed = end
                stream.input_arrived()
        self.reopen_connection()  # after the stream took the data: ``buffered`` counts it

    def _headers(self, flags: int, sid: int, payload: bytes) -> None:
        if sid == 0:
            raise ConnectionError_(f.PROTOCOL_ERROR, "HEADERS on stream 0")
        payload = self._unpad(flags, payload)
        if flags & f.PRIORITY_FLAG:
            payload = payload[5:]
        if flags & f.END_HEADERS:
            self._header_block(sid, flags, payload)
        else:
            self._continuing = (sid, flags, [payload], len(payload))

    def _continuation(self, flags: int, sid: int, payload: bytes) -> None:
        cont = self._continuing
        if cont is None or cont[0] != sid:
            raise ConnectionError_(f.PROTOCOL_ERROR, "CONTINUATION without its HEADERS")
        size = cont[3] + len(payload)
        if size > 4 * self.limits.max_header_list:
            raise ConnectionError_(f.ENHANCE_YOUR_CALM,
                                   f"a header block over {4 * self.limits.max_header_list} bytes")
        cont[2].append(payload)
        if flags & f.END_HEADERS:
            self._continuing = None
            self._header_block(sid, cont[1], b"".join(cont[2]))
        else:
            self._continuing = (sid, cont[1], cont[2], size)

    def _decode(self, block: bytes) -> list[tuple[str, str]] | None:
        """The header list of ``block``, or None when it is over ``max_header_list`` (the
        block is decoded all the same: the table stays in step)."""
        try:
            headers, size = self._decoder.decode(block)
        except HPACKError as e:
            raise ConnectionError_(f.COMPRESSION_ERROR, f"a bad header block: {e}") from e
        return headers if size <= self.limits.max_header_list else None

    def _header_block(self, sid: int, flags: int, block: bytes) -> None:
        headers = self._decode(block)
        stream = self.streams.get(sid)
        if stream is not None:  # trailers from the client: only END_STREAM matters to gRPC
            if not flags & f.END_STREAM:
                raise ConnectionError_(f.PROTOCOL_ERROR, "trailers without END_STREAM")
            stream.remote_closed = True
            stream.input_arrived()
            return
        if sid % 2 == 0 or sid <= self.last_sid:
            raise ConnectionError_(f.PROTOCOL_ERROR, f"HEADERS opening stream {sid} out of order")
        self.last_sid = sid
        if self.going_away or len(self.streams) >= self.limits.max_streams:
            self.write(f.rst_stream(sid, f.REFUSED_STREAM))
            return
        stream = Stream(self, sid)
        self.streams[sid] = stream
        if headers is None:
            stream.fail(8, f"the request's header list is over {self.limits.max_header_list} "
                           "bytes")  # RESOURCE_EXHAUSTED
            return
        stream.headers = headers
        stream.remote_closed = bool(flags & f.END_STREAM)
        self.on_stream(stream)
        if stream.remote_closed:
            stream.input_arrived()

    def _settings(self, flags: int, sid: int, payload: bytes) -> None:
        if sid != 0:
            raise ConnectionError_(f.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & f.ACK:
            return
        if len(payload) % 6:
            raise ConnectionError_(f.FRAME_SIZE_ERROR, "a SETTINGS payload not in 6-byte units")
        grown = False
        for key, value in f.parse_settings(payload):
            if key == f.INITIAL_WINDOW_SIZE:
                if value > f.MAX_WINDOW:
                    raise ConnectionError_(f.FLOW_CONTROL_ERROR, f"INITIAL_WINDOW_SIZE {value}")
                delta = value - self.peer_initial_window
                self.peer_initial_window = value
                for stream in self.streams.values():
                    stream.send_window += delta
                grown = grown or delta > 0
            elif key == f.MAX_FRAME_SIZE:
                if not f.DEFAULT_MAX_FRAME_SIZE <= value <= f.MAX_ALLOWED_FRAME_SIZE:
                    raise ConnectionError_(f.PROTOCOL_ERROR, f"MAX_FRAME_SIZE {value}")
                self.peer_max_frame = value
            elif key == f.ENABLE_PUSH and value > 1:
                raise ConnectionError_(f.PROTOCOL_ERROR, f"ENABLE_PUSH {value}")
        self.write(f.SETTINGS_ACK)
        if grown:  # streams held by their own window may send now
            for stream in list(self.streams.values()):
                stream.flush()

    def _window_update(self, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ConnectionError_(f.FRAME_SIZE_ERROR, "a WINDOW_UPDATE of other than 4 bytes")
        inc = struct.unpack(">I", payload)[0] & 0x7FFFFFFF
        if sid == 0:
            if inc == 0:
                raise ConnectionError_(f.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0")
            self.send_window += inc
            if self.send_window > f.MAX_WINDOW:
                raise ConnectionError_(f.FLOW_CONTROL_ERROR, "the connection window over 2^31-1")
            if self.blocked:
                self.unblock()
            return
        stream = self.streams.get(sid)
        if stream is None:
            return
        if inc == 0:
            self._stream_error(stream, f.PROTOCOL_ERROR)
            return
        stream.send_window += inc
        if stream.send_window > f.MAX_WINDOW:
            self._stream_error(stream, f.FLOW_CONTROL_ERROR)
            return
        stream.flush()

    # -- streams and the end --------------------------------------------------------------------

    def unblock(self) -> None:
        """Sends what streams held back while a window was shut, oldest first."""
        for _ in range(len(self.blocked)):
            if self.send_window <= 0:
                return
            self.blocked.popleft().flush()

    def _stream_error(self, stream: Stream, code: int) -> None:
        self.streams.pop(stream.sid, None)
        self.write(f.rst_stream(stream.sid, code))
        stream.reset()

    def stream_done(self, stream: Stream) -> None:
        """Called by a stream both of whose ends are closed (or that was reset)."""
        self.streams.pop(stream.sid, None)
        if self.going_away and not self.streams:
            self.close()

    def shutdown(self) -> None:
        """GOAWAY(NO_ERROR): no new stream; the connection closes once its streams are done."""
        if not self.going_away:
            self.going_away = True
            self.write(f.goaway(self.last_sid, f.NO_ERROR))
        if not self.streams:
            self.close()

    def close(self) -> None:
        self.flush()
        if self.transport is not None:
            self.transport.close()

    def abort(self, code: int, message: str) -> None:
        """A connection error: GOAWAY with ``code`` and ``message``, streams reset, closed."""
        log.info("gRPC connection from %s ends: %s (HTTP/2 error %d)", self.peer, message, code)
        self.write(f.goaway(self.last_sid, code, message.encode()[:256]))
        for stream in list(self.streams.values()):
            stream.reset()
        self.streams.clear()
        self.close()

    def reopen_connection(self) -> None:
        """Grants the connection window again once half of it was used, unless handlers hold
        ``max_buffered`` request bytes."""
        if self._recv_unacked >= self.limits.connection_window // 2 \
                and self.buffered < self.limits.max_buffered:
            self.write(f.window_update(0, self._recv_unacked))
            self._recv_window += self._recv_unacked
            self._recv_unacked = 0

    def reopen(self, stream: Stream, size: int) -> None:
        """The stream's handler took ``size`` bytes: its window may open again."""
        if size and self.transport is not None and not stream.remote_closed:
            self.write(f.window_update(stream.sid, size))

    def __repr__(self) -> str:
        return f"H2Connection({self.peer}, {len(self.streams)} streams)"
