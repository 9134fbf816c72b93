"""``H2Server``: the native gRPC server. It listens (asyncio ``create_server``, one
``H2Connection`` per client) and runs each stream's call: ``/<service>/<Method>`` looked up in the
methods given (unary, server-streaming or bidirectional, as the service descriptor says), the
request parsed with its protobuf class, the servicer's coroutine or async generator run in a task
with a ``CallContext``, the answer serialized and sent.

Batched unary methods (a servicer's ``batch_methods()``: method name -> handler of a list of
``(request, CallContext)``) run without a task: the calls whose requests complete in one read
are handed to the handler together at the end of the read, which answers each with a response
(written with the read's other answers, in one write) or an awaitable of it (run in a task). A
client's window of calls in flight thus costs one handler call, as a Remoting read of frames does.

``grpc-timeout`` sets the call's deadline: past it the handler is cancelled and the client gets
DEADLINE_EXCEEDED. A client's RST_STREAM cancels the handler. An unknown method is UNIMPLEMENTED, a
request that does not parse INTERNAL, a handler that raises UNKNOWN with the error (as grpc.aio
answers)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from rocketlite.proxy.h2.connection import H2Connection, Limits
from rocketlite.proxy.h2.stream import Stream
from rocketlite.remoting.limits import PeerLog
from rocketlite.remoting.tls import TlsServerConfig
from rocketlite.remoting.tls_listen import Listening, listen

log = logging.getLogger(__name__)

UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL = 2, 4, 12, 13
_TIMEOUT_UNITS: Final = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
INFO_CACHE: Final = 1024
DEADLINE_TICK: Final = 0.01  # deadlines are kept to this precision (late by at most this)
_RESERVED: Final = frozenset(("content-type", "te", "grpc-timeout", "grpc-encoding",
                              "grpc-accept-encoding"))


def parse_timeout(value: str) -> float | None:
    """Seconds of a ``grpc-timeout`` value (1-8 digits and a unit), or None if malformed."""
    if not 2 <= len(value) <= 9 or not value[:-1].isdigit():
        return None
    unit = _TIMEOUT_UNITS.get(value[-1])
    return None if unit is None else int(value[:-1]) * unit


def _request_info(headers: list[tuple[str, str]]) -> tuple[str, bool, float | None]:
    """(``:path``, POST with a gRPC content type, ``grpc-timeout`` in seconds) of a request."""
    path, method, ctype, timeout = "", "", "", None
    for k, v in headers:
        if k == ":path":
            path = v
        elif k == ":method":
            method = v
        elif k == "content-type":
            ctype = v
        elif k == "grpc-timeout":
            timeout = parse_timeout(v)
    return path, method == "POST" and ctype.startswith("application/grpc"), timeout


class CallContext:
    """What a servicer method may ask of its call, as ``grpc.aio.ServicerContext`` offers it:
    ``invocation_metadata``, ``peer``, ``time_remaining``, ``cancelled``, ``done``,
    ``add_done_callback``."""

    __slots__ = ("_metadata", "_stream")

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._metadata: tuple[tuple[str, str], ...] | None = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        if self._metadata is None:
            self._metadata = tuple((k, v) for k, v in self._stream.headers
                                   if k[0] != ":" and k not in _RESERVED)
        return self._metadata

    def peer(self) -> str:
        return self._stream.conn.peer

    def time_remaining(self) -> float | None:
        deadline = self._stream.deadline
        return None if deadline is None else max(0.0, deadline - self._stream.conn.loop.time())

    def cancelled(self) -> bool:
        return self._stream.cancelled

    def done(self) -> bool:
        return self._stream.done or self._stream.local_closed

    def add_done_callback(self, callback: Callable[[CallContext], None]) -> None:
        self._stream.callbacks.append(lambda: callback(self))


# a list of (request, CallContext) -> an answer per call: a response or an awaitable of it
BatchHandler = Callable[[list[Any]], Sequence[Any]]


@dataclass(slots=True, frozen=True, eq=False)
class Method:
    kind: str  # "unary", "server_stream", "bidi"
    handler: Callable[..., Any]
    request: Callable[[bytes], Message]
    batch: BatchHandler | None = None  # unary only (module docstring)


def service_methods(descriptor: ServiceDescriptor, servicer: object) -> dict[str, Method]:
    """``/<full service name>/<Method>`` -> ``Method`` for each method ``servicer`` has."""
    batches = getattr(servicer, "batch_methods", None)
    batched: dict[str, BatchHandler] = batches() if callable(batches) else {}
    out: dict[str, Method] = {}
    for m in descriptor.methods:
        fn = getattr(servicer, m.name, None)
        if fn is None:
            continue
        if m.client_streaming and not m.server_streaming:
            continue  # client-streaming: no such method in apache.rocketmq.v2
        kind = "bidi" if m.client_streaming else "server_stream" if m.server_streaming else "unary"
        out[f"/{descriptor.full_name}/{m.name}"] = Method(
            kind, fn, GetMessageClass(m.input_type).FromString,
            batched.get(m.name) if kind == "unary" else None)
    return out


class Deadlines:
    """Calls waiting for their deadline, in buckets of ``DEADLINE_TICK`` seconds with one timer a
    bucket (a timer per call cost more than the rest of a small call's transport). A call that
    ends leaves its bucket; a bucket's timer ends the calls still in it (DEADLINE_EXCEEDED)."""

    def __init__(self) -> None:
        self._buckets: dict[int, set[Stream]] = {}

    def add(self, stream: Stream, deadline: float) -> None:
        tick = math.ceil(deadline / DEADLINE_TICK)
        bucket = self._buckets.get(tick)
        if bucket is None:
            bucket = self._buckets[tick] = set()
            stream.conn.loop.call_at(tick * DEADLINE_TICK, self._fire, tick)
        bucket.add(stream)
        stream.bucket = bucket

    def _fire(self, tick: int) -> None:
        for stream in list(self._buckets.pop(tick, ())):
            _expire(stream)


class H2Server:
    def __init__(self, methods: dict[str, Method], limits: Limits | None = None) -> None:
        self.methods = methods
        self.limits = limits or Limits()
        self.connections: set[H2Connection] = set()
        self._server: Listening | None = None
        # a header list (the connection's cached, decoded block) -> what _request_info read
        self._infos: dict[int, tuple[list[tuple[str, str]], str, bool, float | None]] = {}
        self._deadlines = Deadlines()

    async def start(self, host: str, port: int, tls: TlsServerConfig | None = None) -> int:
        """Listens on ``host:port``, with TLS (ALPN ``h2``) as ``tls`` says (``remoting.tls_listen``:
        permissive takes plain and TLS on the port, enforcing closes plain connections); the
        port bound."""
        self._server, bound = await listen(self._connection, host, port, tls, name="gRPC front",
                                           peer_log=PeerLog(log, "refused connections", first=1),
                                           alpn=["h2"])
        return bound

    def _connection(self) -> H2Connection:
        conn = H2Connection(self._stream, self.limits, self.connections.discard, _run_ready)
        self.connections.add(conn)
        return conn

    def _stream(self, stream: Stream) -> None:
        info = self._infos.get(id(stream.headers))
        if info is None or info[0] is not stream.headers:
            if len(self._infos) >= INFO_CACHE:
                self._infos.clear()
            info = self._infos[id(stream.headers)] = (stream.headers, *_request_info(
                stream.headers))
        _, path, grpc_post, timeout = info
        if not grpc_post:
            stream.fail(INTERNAL, "not a gRPC request (POST, content-type application/grpc)")
            return
        method = self.methods.get(path)
        if method is None:
            stream.fail(UNIMPLEMENTED, f"Method not found: {path}")
            return
        if timeout is not None:
            stream.deadline = stream.conn.loop.time() + timeout
            self._deadlines.add(stream, stream.deadline)
        if method.batch is not None:
            stream.batched = method  # run by _run_ready once the request is in
            return
        if method.kind == "unary":
            coro = _unary(stream, method)
        elif method.kind == "server_stream":
            coro = _server_stream(stream, method)
        else:
            coro = _bidi(stream, method)
        stream.task = stream.conn.loop.create_task(coro)

    async def close(self, grace: float) -> None:
        """GOAWAY to every client; calls still running after ``grace`` are cancelled."""
        if self._server is not None:
            self._server.close()
        conns = list(self.connections)
        for conn in conns:
            conn.shutdown()
        if conns:
            waits = [asyncio.ensure_future(c.closed.wait()) for c in conns]
            _, pending = await asyncio.wait(waits, timeout=grace)
            for w in pending:
                w.cancel()
        for conn in list(self.connections):  # calls still running: cut off
            conn.abort(0, "the server stops")
            if conn.transport is not None:
                conn.transport.abort()  # a client that does not read cannot hold the close
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None


def _expire(stream: Stream) -> None:
    if not stream.local_closed and not stream.cancelled:
        stream.fail(DEADLINE_EXCEEDED, "Deadline Exceeded")


def _request(stream: Stream, method: Method, message: bytes | None) -> Message | None:
    if message is None:
        stream.fail(INTERNAL, "the request carries no message")
        return None
    try:
        return method.request(message)
    except DecodeError as e:
        stream.fail(INTERNAL, f"the request message does not parse: {e}")
        return None


def _failed(stream: Stream, e: Exception) -> None:
    log.exception("gRPC call %s failed", stream.sid)
    stream.fail(UNKNOWN, f"Unexpected {type(e).__name__}: {e}")


async def _unary(stream: Stream, method: Method) -> None:
    message = stream.take()
    if message is None:
        message = await stream.recv()
    request = _request(stream, method, message)
    if request is None:
        return
    try:
        response = await method.handler(request, CallContext(stream))
    except asyncio.CancelledError:
        if stream.cancelled or stream.local_closed:
            return
        raise
    except Exception as e:  # noqa: BLE001 - the client gets the error as grpc.aio gives it
        _failed(stream, e)
        return
    stream.reply(response.SerializeToString())


def _run_ready(ready: list[tuple[Stream, Any]]) -> None:
    """The batched calls whose requests completed in one read: each method's calls to its batch
    handler in one list, the answers sent (or awaited in a task)."""
    by_method: dict[int, tuple[Method, list[Stream]]] = {}
    for stream, method in ready:
        entry = by_method.get(id(method))
        if entry is None:
            by_method[id(method)] = (method, [stream])
        else:
            entry[1].append(stream)
    for method, streams in by_method.values():
        calls: list[tuple[Message, CallContext]] = []
        live: list[Stream] = []
        for stream in streams:
            if stream.done or stream.local_closed:  # reset or past its deadline meanwhile
                continue
            request = _request(stream, method, stream.take())
            if request is not None:
                calls.append((request, CallContext(stream)))
                live.append(stream)
        if not calls:
            continue
        assert method.batch is not None
        try:
            answers = method.batch(calls)
        except Exception as e:  # noqa: BLE001 - each call gets the error, as _unary's do
            for stream in live:
                _failed(stream, e)
            continue
        for stream, answer in zip(live, answers, strict=True):
            serialize = getattr(answer, "SerializeToString", None)
            if serialize is not None:  # a response (else an awaitable of one)
                stream.reply(serialize())
            else:
                stream.task = stream.conn.loop.create_task(_answer_later(stream, answer))


async def _answer_later(stream: Stream, answer: Awaitable[Message]) -> None:
    try:
        response = await answer
    except asyncio.CancelledError:
        if stream.cancelled or stream.local_closed:
            return
        raise
    except Exception as e:  # noqa: BLE001 - as _unary answers a raising handler
        _failed(stream, e)
        return
    stream.reply(response.SerializeToString())


async def _send_all(stream: Stream, responses: AsyncIterator[Message]) -> None:
    try:
        async for response in responses:
            stream.send(response.SerializeToString())
            await stream.sent()
            if stream.cancelled or stream.local_closed:
                return
    except asyncio.CancelledError:
        if stream.cancelled or stream.local_closed:
            return
        raise
    except Exception as e:  # noqa: BLE001 - as grpc.aio answers a raising handler
        _failed(stream, e)
        return
    stream.finish(0)


async def _server_stream(stream: Stream, method: Method) -> None:
    message = stream.take()
    request = _request(stream, method, message if message is not None else await stream.recv())
    if request is not None:
        await _send_all(stream, method.handler(request, CallContext(stream)))


async def _requests(stream: Stream, method: Method) -> AsyncIterator[Message]:
    while (message := await stream.recv()) is not None:
        try:
            yield method.request(message)
        except DecodeError as e:
            stream.fail(INTERNAL, f"a request message does not parse: {e}")
            return


async def _bidi(stream: Stream, method: Method) -> None:
    responses = method.handler(_requests(stream, method), CallContext(stream))
    try:
        await _send_all(stream, responses)
    finally:
        with contextlib.suppress(Exception):
            await responses.aclose()
