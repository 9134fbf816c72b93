"""The native gRPC server's HTTP/2 behaviour, driven frame by frame from a raw socket: SETTINGS
and PING acks, flow control both ways, CONTINUATION, the limits (frame size, streams, header
list, message size) and their errors, deadlines, cancellation by RST_STREAM, GOAWAY at close."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any

import hpack
import pytest

from rocketlite.proxy.h2 import frames as f
from rocketlite.proxy.h2.connection import Limits
from rocketlite.proxy.h2.server import H2Server, Method

Frame = tuple[int, int, int, bytes]


class Echo:
    """Methods on raw bytes (the request class is ``bytes``-like): echo, a slow one, a stream."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.metadata: Any = None

    async def echo(self, request: Any, context: Any) -> Any:
        self.metadata = context.invocation_metadata()
        return request

    async def slow(self, request: Any, context: Any) -> Any:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return request

    async def many(self, request: Any, context: Any) -> AsyncIterator[Any]:
        for _ in range(int(request.data)):
            yield Raw(b"x" * 1000)


class Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializeToString(self) -> bytes:
        return self.data


def methods(svc: Echo) -> dict[str, Method]:
    return {"/t.S/Echo": Method("unary", svc.echo, Raw),
            "/t.S/Slow": Method("unary", svc.slow, Raw),
            "/t.S/Many": Method("server_stream", svc.many, Raw)}


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()

    @classmethod
    async def connect(cls, port: int, settings: dict[int, int] | None = None) -> Client:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        c = cls(r, w)
        w.write(f.PREFACE + f.settings(settings or {}))
        return c

    def send(self, *raw: bytes) -> None:
        self.writer.write(b"".join(raw))

    def request_block(self, path: str, *extra: tuple[str, str]) -> bytes:
        return self.enc.encode([(":method", "POST"), (":scheme", "http"), (":path", path),
                                (":authority", "x"), ("content-type", "application/grpc"),
                                ("te", "trailers"), *extra])

    def call(self, sid: int, path: str, body: bytes, *extra: tuple[str, str]) -> None:
        self.send(f.frame(f.HEADERS, f.END_HEADERS, sid, self.request_block(path, *extra)),
                  f.frame(f.DATA, f.END_STREAM, sid, f.message(body)))

    async def frame(self) -> Frame:
        head = await asyncio.wait_for(self.reader.readexactly(9), 5)
        lt, flags, sid = f.FRAME_HEADER.unpack(head)
        payload = await self.reader.readexactly(lt >> 8)
        return lt & 0xFF, flags, sid & 0x7FFFFFFF, payload

    async def until(self, ftype: int, sid: int | None = None) -> Frame:
        while True:
            fr = await self.frame()
            if fr[0] == ftype and (sid is None or fr[2] == sid):
                return fr

    async def answer(self, sid: int) -> tuple[list[bytes], dict[str, str]]:
        """The messages and the trailers of stream ``sid``."""
        data, messages = b"", []
        while True:
            t, flags, s, payload = await self.frame()
            if s != sid:
                continue
            if t == f.DATA:
                data += payload
            elif t == f.HEADERS:
                headers = dict(self.dec.decode(payload))
                if flags & f.END_STREAM:
                    messages, _, _ = f._split_messages_py(data, 1 << 30)
                    return messages, headers
            elif t == f.RST_STREAM:
                raise AssertionError(f"stream reset: {payload!r}")

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@pytest.fixture
async def server() -> AsyncIterator[tuple[H2Server, Echo]]:
    svc = Echo()
    s = H2Server(methods(svc), Limits(max_streams=4, max_header_list=2048, max_message=10_000,
                                      stream_window=65_535, connection_window=1 << 20))
    await s.start("127.0.0.1", 0)
    yield s, svc
    await s.close(0.5)


def port(s: H2Server) -> int:
    assert s._server is not None
    return int(s._server.sockets[0].getsockname()[1])


async def test_settings_ping_and_a_unary_call(server: tuple[H2Server, Echo]) -> None:
    s, svc = server
    c = await Client.connect(port(s))
    t, _, _, payload = await c.frame()
    assert t == f.SETTINGS and (f.MAX_CONCURRENT_STREAMS, 4) in f.parse_settings(payload)
    c.send(f.frame(f.PING, 0, 0, b"abcdefgh"))
    assert (await c.until(f.PING))[1:] == (f.ACK, 0, b"abcdefgh")
    c.call(1, "/t.S/Echo", b"hi", ("x-mq-client-id", "c1"))
    assert await c.answer(1) == ([b"hi"], {"grpc-status": "0"})
    assert ("x-mq-client-id", "c1") in svc.metadata
    assert all(not k.startswith(":") and k != "content-type" for k, _ in svc.metadata)
    c.call(3, "/t.S/Echo", b"again", ("x-mq-client-id", "c1"))  # indexed headers this time
    assert await c.answer(3) == ([b"again"], {"grpc-status": "0"})
    await c.close()


async def test_continuation_and_unknown_method(server: tuple[H2Server, Echo]) -> None:
    s, _ = server
    c = await Client.connect(port(s))
    block = c.request_block("/t.S/Echo")
    c.send(f.frame(f.HEADERS, 0, 1, block[:5]), f.frame(f.CONTINUATION, 0, 1, block[5:9]),
           f.frame(f.CONTINUATION, f.END_HEADERS, 1, block[9:]),
           f.frame(f.DATA, f.END_STREAM, 1, f.message(b"cont")))
    assert await c.answer(1) == ([b"cont"], {"grpc-status": "0"})
    c.call(3, "/t.S/Nope", b"")
    messages, trailers = await c.answer(3)
    assert messages == [] and trailers["grpc-status"] == "12" and "Nope" in trailers[
        "grpc-message"]
    await c.close()


async def test_limits(server: tuple[H2Server, Echo]) -> None:
    s, _ = server
    c = await Client.connect(port(s))
    c.call(1, "/t.S/Echo", b"x" * 10_001)
    _, trailers = await c.answer(1)
    assert trailers["grpc-status"] == "8" and "10001" in trailers["grpc-message"]
    c.call(3, "/t.S/Echo", b"x", ("big", "y" * 3000))
    _, trailers = await c.answer(3)
    assert trailers["grpc-status"] == "8" and "header list" in trailers["grpc-message"]
    c.send(f.frame(f.HEADERS, f.END_HEADERS, 5, c.request_block("/t.S/Echo")),
           f.frame(f.DATA, f.END_STREAM, 5, b"\x01\x00\x00\x00\x01z"))  # compressed
    _, trailers = await c.answer(5)
    assert trailers["grpc-status"] == "12"
    for sid in (7, 9, 11, 13):  # 4 slow calls fill max_streams; the fifth is refused
        c.call(sid, "/t.S/Slow", b"")
    c.call(15, "/t.S/Slow", b"")
    _, _, _, payload = await c.until(f.RST_STREAM, 15)
    assert struct.unpack(">I", payload)[0] == f.REFUSED_STREAM
    c.send(f.frame_header(16_385, f.DATA, 0, 7) + b"z" * 16_385)
    _t, _, _, payload = await c.until(f.GOAWAY)
    assert struct.unpack_from(">I", payload, 4)[0] == f.FRAME_SIZE_ERROR
    assert await asyncio.wait_for(c.reader.read(), 5) == b""  # closed
    await c.close()


async def test_protocol_errors_end_the_connection(server: tuple[H2Server, Echo]) -> None:
    s, _ = server
    cases = [(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 10, f.PROTOCOL_ERROR, False),
             (f.frame(f.DATA, 0, 1, b"x"), f.PROTOCOL_ERROR, True),  # idle stream
             (f.frame(f.PING, 0, 0, b"short"), f.FRAME_SIZE_ERROR, True),
             (f.frame(f.WINDOW_UPDATE, 0, 0, b"\0\0\0\0"), f.PROTOCOL_ERROR, True),
             (f.frame(f.HEADERS, f.END_HEADERS, 1, b"\xff\xff\xff\xff"), f.COMPRESSION_ERROR,
              True)]
    for raw, code, preface in cases:
        r, w = await asyncio.open_connection("127.0.0.1", port(s))
        c = Client(r, w)
        c.send((f.PREFACE + f.settings({}) if preface else b"") + raw)
        _, _, _, payload = await c.until(f.GOAWAY)
        assert struct.unpack_from(">I", payload, 4)[0] == code, raw
        await c.close()


async def test_flow_control_holds_data_until_the_window_opens(
        server: tuple[H2Server, Echo]) -> None:
    s, _ = server
    c = await Client.connect(port(s), {f.INITIAL_WINDOW_SIZE: 1500})
    c.call(1, "/t.S/Many", b"3")  # 3 messages of 1005 bytes: 3015 bytes, window 1500
    got = 0
    while got < 1500:
        t, _, _, payload = await c.frame()
        if t == f.DATA:
            got += len(payload)
    assert got == 1500
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(c.until(f.DATA), 0.3)
    c.send(f.settings({f.INITIAL_WINDOW_SIZE: 2500}))  # +1000 for the open stream
    more = 0
    while more < 1000:
        t, _, _, payload = await c.frame()
        if t == f.DATA:
            more += len(payload)
    assert more == 1000
    c.send(f.window_update(1, 2000))
    rest = b""
    while True:
        t, flags, _sid, payload = await c.frame()
        if t == f.DATA:
            rest += payload
        if t == f.HEADERS and flags & f.END_STREAM:
            assert dict(c.dec.decode(payload))["grpc-status"] == "0"
            break
    assert got + more + len(rest) == 3015
    await c.close()


async def test_deadline_and_cancel(server: tuple[H2Server, Echo]) -> None:
    s, svc = server
    c = await Client.connect(port(s))
    c.call(1, "/t.S/Echo", b"e", ("grpc-timeout", "20S"))
    assert (await c.answer(1))[0] == [b"e"]
    assert not any(s._deadlines._buckets.values())  # a call that ended left its bucket
    c.call(3, "/t.S/Slow", b"", ("grpc-timeout", "100m"))
    t0 = asyncio.get_running_loop().time()
    _, trailers = await c.answer(3)
    assert trailers["grpc-status"] == "4"
    assert 0.09 <= asyncio.get_running_loop().time() - t0 < 2
    await asyncio.wait_for(svc.cancelled.wait(), 5)
    svc.cancelled.clear()
    c.call(5, "/t.S/Slow", b"")
    await asyncio.sleep(0.05)
    c.send(f.rst_stream(5, f.CANCEL))
    await asyncio.wait_for(svc.cancelled.wait(), 5)
    await c.close()


async def test_close_sends_goaway(server: tuple[H2Server, Echo]) -> None:
    s, _ = server
    c = await Client.connect(port(s))
    c.call(1, "/t.S/Echo", b"a")
    await c.answer(1)
    await s.close(0.5)
    _, _, _, payload = await c.until(f.GOAWAY)
    assert struct.unpack(">II", payload) == (1, f.NO_ERROR)
    await c.close()


async def test_the_connection_window_stays_shut_while_handlers_hold_max_buffered() -> None:
    gate = asyncio.Event()

    async def reader(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        await gate.wait()
        n = 0
        async for _ in requests:
            n += 1
        yield Raw(str(n).encode())

    s = H2Server({"/t.S/Read": Method("bidi", reader, Raw)},
                 Limits(max_message=70_000, max_buffered=70_001, stream_window=200_000,
                        connection_window=65_535))
    await s.start("127.0.0.1", 0)
    c = await Client.connect(port(s))

    def data(raw: bytes) -> list[bytes]:
        return [f.frame(f.DATA, 0, 1, raw[i:i + 16_384]) for i in range(0, len(raw), 16_384)]

    try:
        c.send(f.frame(f.HEADERS, f.END_HEADERS, 1, c.request_block("/t.S/Read")),
               *data(f.message(b"m" * 30_000) * 2))
        _, _, _, payload = await c.until(f.WINDOW_UPDATE, 0)  # half the window used, 60 kB held
        assert struct.unpack(">I", payload)[0] == 32_768
        c.send(*data(f.message(b"m" * 30_000)))  # within what is left of the window
        await asyncio.sleep(0.2)
        conn = next(iter(s.connections))
        assert conn.buffered == 90_000
        with pytest.raises(asyncio.TimeoutError):  # over max_buffered: no connection window
            await asyncio.wait_for(c.until(f.WINDOW_UPDATE, 0), 0.3)
        gate.set()
        _, _, _, payload = await c.until(f.WINDOW_UPDATE, 0)  # taken: granted again
        assert struct.unpack(">I", payload)[0] == 3 * 30_005 - 32_768
        c.send(f.frame(f.DATA, f.END_STREAM, 1, b""))
        assert await c.answer(1) == ([b"3"], {"grpc-status": "0"})
        assert conn.buffered == 0
    finally:
        await c.close()
        await s.close(0.5)


async def test_big_answers_go_in_frames_of_the_clients_max_size() -> None:
    async def big(request: Any, context: Any) -> Any:
        return Raw(b"b" * 40_000)

    s = H2Server({"/t.S/Big": Method("unary", big, Raw)})
    await s.start("127.0.0.1", 0)
    c = await Client.connect(port(s), {f.INITIAL_WINDOW_SIZE: 1 << 20})
    try:
        c.send(f.window_update(0, 1 << 20))
        c.call(1, "/t.S/Big", b"")
        sizes, data = [], b""
        while True:
            t, flags, _, payload = await c.frame()
            if t == f.DATA:
                sizes.append(len(payload))
                data += payload
            if t == f.HEADERS and flags & f.END_STREAM:
                break
        assert max(sizes) <= 16_384 and sum(sizes) == 40_005
        assert f._split_messages_py(data, 1 << 20)[0] == [b"b" * 40_000]
    finally:
        await c.close()
        await s.close(0.5)


async def test_an_endless_header_block_and_a_lost_connection(
        server: tuple[H2Server, Echo]) -> None:
    s, svc = server
    c = await Client.connect(port(s))
    c.send(f.frame(f.HEADERS, 0, 1, b"\x00" * 8000),
           *(f.frame(f.CONTINUATION, 0, 1, b"\x00" * 8000) for _ in range(2)))
    _, _, _, payload = await c.until(f.GOAWAY)
    assert struct.unpack_from(">I", payload, 4)[0] == f.ENHANCE_YOUR_CALM
    await c.close()
    c = await Client.connect(port(s))
    c.call(1, "/t.S/Slow", b"")
    await asyncio.sleep(0.05)
    await c.close()  # gone mid-call: the handler is cancelled
    await asyncio.wait_for(svc.cancelled.wait(), 5)


async def test_a_client_goaway_closes_once_its_calls_are_done(
        server: tuple[H2Server, Echo]) -> None:
    s, _ = server
    c = await Client.connect(port(s))
    c.call(1, "/t.S/Echo", b"x")
    c.send(f.goaway(1, f.NO_ERROR))
    assert (await c.answer(1))[0] == [b"x"]
    assert await asyncio.wait_for(c.reader.read(), 5) == b""
    await c.close()


async def test_rapid_reset_ends_the_connection() -> None:
    s = H2Server(methods(Echo()), Limits(max_resets_per_s=50))
    await s.start("127.0.0.1", 0)
    c = await Client.connect(port(s))
    try:
        block = c.request_block("/t.S/Slow")
        c.send(*(f.frame(f.HEADERS, f.END_HEADERS, sid, block) + f.rst_stream(sid, f.CANCEL)
                 for sid in range(1, 2 * 200, 2)))
        _, _, _, payload = await c.until(f.GOAWAY)
        assert struct.unpack_from(">I", payload, 4)[0] == f.ENHANCE_YOUR_CALM
        assert b"cancelled" in payload[8:]
    finally:
        await c.close()
        await s.close(0.5)


async def test_close_cuts_off_calls_still_running_after_the_grace() -> None:
    svc = Echo()
    s = H2Server(methods(svc))
    await s.start("127.0.0.1", 0)
    c = await Client.connect(port(s))
    try:
        c.call(1, "/t.S/Slow", b"")
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await s.close(0.2)
        assert loop.time() - t0 < 2
        await asyncio.wait_for(svc.cancelled.wait(), 5)
        _, _, _, payload = await c.until(f.GOAWAY)
        assert struct.unpack(">II", payload[:8]) == (1, f.NO_ERROR)
        assert not s.connections
    finally:
        await c.close()


class CountingTransport:
    """The server side's transport, its writes recorded (everything else passed through)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def data_frames(written: bytes) -> list[Frame]:
    frames, used, _ = f.split_frames(written, 1 << 24)
    assert used == len(written)
    return [fr for fr in frames if fr[0] == f.DATA]


async def test_a_batch_of_answers_goes_out_in_one_write(server: tuple[H2Server, Echo]) -> None:
    s, _ = server
    c = await Client.connect(port(s))
    await c.until(f.SETTINGS)
    [conn] = s.connections
    counting = CountingTransport(conn.transport)
    conn.transport = counting  # type: ignore[assignment]
    c.call(1, "/t.S/Many", b"32")  # a server stream: 32 messages of 1000 bytes
    messages, trailers = await c.answer(1)
    assert len(messages) == 32 and trailers == {"grpc-status": "0"}
    with_data = [w for w in counting.writes if data_frames(w)]
    assert len(with_data) == 1 and len(data_frames(with_data[0])) == 32
    counting.writes.clear()
    c.send(*(f.frame(f.HEADERS, f.END_HEADERS, sid, c.request_block("/t.S/Echo"))
             + f.frame(f.DATA, f.END_STREAM, sid, f.message(b"u%d" % sid))
             for sid in (3, 5, 7)))  # three unary calls read together
    for sid in (3, 5, 7):
        assert (await c.answer(sid))[0] == [b"u%d" % sid]
    with_data = [w for w in counting.writes if data_frames(w)]
    assert len(with_data) == 1 and len(data_frames(with_data[0])) == 3
    await c.close()


class Batcher:
    """A batched unary method: records each batch; answers b"ok:<req>" now, b"late:<req>" after
    a loop turn (an awaitable), or raises for a request b"boom"."""

    def __init__(self) -> None:
        self.batches: list[list[bytes]] = []

    def batch(self, calls: list[tuple[Raw, Any]]) -> list[Any]:
        self.batches.append([r.data for r, _ in calls])
        if any(r.data == b"boom" for r, _ in calls):
            raise RuntimeError("the batch failed")
        out: list[Any] = []
        for request, context in calls:
            assert context.peer().startswith("ipv4:127.0.0.1:")
            if request.data.startswith(b"later"):
                out.append(self._later(request.data))
            else:
                out.append(Raw(b"ok:" + request.data))
        return out

    async def _later(self, data: bytes) -> Raw:
        await asyncio.sleep(0)
        return Raw(b"late:" + data)

    async def unary(self, request: Raw, context: Any) -> Raw:  # the grpc.aio path, unused here
        raise AssertionError("a batched method's calls go to its batch handler")


@pytest.fixture
async def batched() -> AsyncIterator[tuple[H2Server, Batcher]]:
    b = Batcher()
    s = H2Server({"/t.S/B": Method("unary", b.unary, Raw, b.batch)},
                 Limits(max_message=10_000, stream_window=65_535, connection_window=1 << 20))
    await s.start("127.0.0.1", 0)
    yield s, b
    await s.close(0.5)


async def test_the_calls_of_one_read_go_to_the_batch_handler_together(
    batched: tuple[H2Server, Batcher],
) -> None:
    s, b = batched
    c = await Client.connect(port(s))
    await c.until(f.SETTINGS)
    [conn] = s.connections
    counting = CountingTransport(conn.transport)
    conn.transport = counting  # type: ignore[assignment]
    c.send(*(f.frame(f.HEADERS, f.END_HEADERS, sid, c.request_block("/t.S/B"))
             + f.frame(f.DATA, f.END_STREAM, sid, f.message(b"r%d" % sid))
             for sid in (1, 3, 5)))
    for sid in (1, 3, 5):
        assert await c.answer(sid) == ([b"ok:r%d" % sid], {"grpc-status": "0"})
    assert b.batches == [[b"r1", b"r3", b"r5"]]
    with_data = [w for w in counting.writes if data_frames(w)]
    assert len(with_data) == 1 and len(data_frames(with_data[0])) == 3  # one write
    # a request completed by a later read (its DATA apart from its HEADERS) is its own batch
    c.send(f.frame(f.HEADERS, f.END_HEADERS, 7, c.request_block("/t.S/B")))
    await asyncio.sleep(0.05)
    assert len(b.batches) == 1
    c.send(f.frame(f.DATA, f.END_STREAM, 7, f.message(b"later7")))
    assert await c.answer(7) == ([b"late:later7"], {"grpc-status": "0"})
    assert b.batches[1] == [b"later7"]
    await c.close()


async def test_a_failing_batch_answers_each_call_with_the_error(
    batched: tuple[H2Server, Batcher],
) -> None:
    s, b = batched
    c = await Client.connect(port(s))
    await c.until(f.SETTINGS)
    c.send(*(f.frame(f.HEADERS, f.END_HEADERS, sid, c.request_block("/t.S/B"))
             + f.frame(f.DATA, f.END_STREAM, sid, f.message(body))
             for sid, body in ((1, b"fine"), (3, b"boom"))))
    for sid in (1, 3):
        messages, trailers = await c.answer(sid)
        assert messages == [] and trailers["grpc-status"] == "2"  # UNKNOWN, as grpc.aio
        assert "RuntimeError" in trailers["grpc-message"]
    # a request without a message never reaches the handler
    c.send(f.frame(f.HEADERS, f.END_HEADERS | f.END_STREAM, 5, c.request_block("/t.S/B")))
    messages, trailers = await c.answer(5)
    assert trailers["grpc-status"] == "13" and b.batches == [[b"fine", b"boom"]]
    await c.close()
