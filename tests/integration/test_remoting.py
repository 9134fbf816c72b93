"""The Remoting transport on real loopback sockets: request/response, oneway, unknown codes,
handler errors, timeouts, malformed input, peer-initiated requests, closing."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import AsyncIterator

import pytest

from rocketlite.common.errors import RemotingError, RemotingTimeoutError
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand, decode_frame
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.limits import BAD_FRAME_LOG_FIRST, ConnectionLimits
from rocketlite.remoting.server import RemotingServer

pytestmark = pytest.mark.integration

ECHO, SLOW, FAIL, ONEWAY, ASK_BACK = 9001, 9002, 9003, 9004, 9005


class Fixture:
    def __init__(self, server: RemotingServer, client: RemotingClient) -> None:
        self.server = server
        self.client = client
        self.addr = f"127.0.0.1:{server.port}"
        self.oneway_seen: list[RemotingCommand] = []


@pytest.fixture
async def fx() -> AsyncIterator[Fixture]:
    server = RemotingServer("127.0.0.1", 0, name="test")
    seen: list[RemotingCommand] = []

    def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(0, ext_fields={"echo": cmd.ext_fields.get("v", "")}, body=cmd.body)

    async def slow(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(float(cmd.ext_fields["s"]))
        return cmd.response(0)

    def fail(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        raise ValueError("the handler broke")

    def oneway(conn: Connection, cmd: RemotingCommand) -> None:
        seen.append(cmd)

    async def ask_back(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        # the server asks the client something on the same connection, then answers
        answer = await conn.request(RemotingCommand.request(40, {"q": "who"}), 2.0)
        return cmd.response(0, ext_fields={"client_said": answer.ext_fields.get("a", "")})

    for code, fn in ((ECHO, echo), (SLOW, slow), (FAIL, fail), (ONEWAY, oneway),
                     (ASK_BACK, ask_back)):
        server.register(code, fn)  # type: ignore[arg-type]
    await server.start()

    def client_handler(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(0, ext_fields={"a": "client-" + cmd.ext_fields["q"]})

    client = RemotingClient(client_handler)
    f = Fixture(server, client)
    f.oneway_seen = seen
    try:
        yield f
    finally:
        await client.close()
        await server.close()


async def test_request_response_and_concurrency(fx: Fixture) -> None:
    reqs = [RemotingCommand.request(ECHO, {"v": str(i)}, body=b"x" * i) for i in range(200)]
    replies = await asyncio.gather(*(fx.client.invoke(fx.addr, r, 5) for r in reqs))
    assert [r.ext_fields["echo"] for r in replies] == [str(i) for i in range(200)]
    assert [len(r.body) for r in replies] == list(range(200))
    assert all(r.is_response and r.code == 0 for r in replies)


async def test_unknown_code_and_failing_handler(fx: Fixture) -> None:
    r = await fx.client.invoke(fx.addr, RemotingCommand.request(4242), 5)
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "4242" in (r.remark or "")
    r = await fx.client.invoke(fx.addr, RemotingCommand.request(FAIL), 5)
    assert r.code == ResponseCode.SYSTEM_ERROR and "the handler broke" in (r.remark or "")
    r = await fx.client.invoke(fx.addr, RemotingCommand.request(ECHO, {"v": "still up"}), 5)
    assert r.ext_fields["echo"] == "still up"


async def test_timeout_then_connection_still_usable(fx: Fixture) -> None:
    with pytest.raises(RemotingTimeoutError):
        await fx.client.invoke(fx.addr, RemotingCommand.request(SLOW, {"s": "0.5"}), 0.05)
    r = await fx.client.invoke(fx.addr, RemotingCommand.request(ECHO, {"v": "1"}), 5)
    assert r.ext_fields["echo"] == "1"


async def test_request_futures_time_out_and_leave_nothing_behind(fx: Fixture) -> None:
    conn = await fx.client.connection(fx.addr)
    loop = asyncio.get_running_loop()
    started = loop.time()
    slow = conn.request_future(RemotingCommand.request(SLOW, {"s": "0.5"}), 0.1)
    fast = conn.request_future(RemotingCommand.request(ECHO, {"v": "f"}), 5)
    cancelled = conn.request_future(RemotingCommand.request(SLOW, {"s": "0.3"}), 5)
    cancelled.cancel()
    assert (await fast).ext_fields["echo"] == "f"
    with pytest.raises(RemotingTimeoutError, match=r"within 0\.100 s"):
        await slow
    assert 0.1 <= loop.time() - started < 1.0
    for _ in range(100):  # the sweep forgets answered, expired and cancelled requests
        if not conn._pending and not conn._deadlines:
            break
        await asyncio.sleep(0.05)
    assert not conn._pending and not conn._deadlines


async def test_oneway_gets_no_reply(fx: Fixture) -> None:
    await fx.client.invoke_oneway(fx.addr, RemotingCommand.request(ONEWAY, {"n": "1"}))
    await fx.client.invoke(fx.addr, RemotingCommand.request(ECHO), 5)  # ordered after it
    assert [c.ext_fields["n"] for c in fx.oneway_seen] == ["1"]


async def test_server_initiated_request_reaches_client_handler(fx: Fixture) -> None:
    r = await fx.client.invoke(fx.addr, RemotingCommand.request(ASK_BACK), 5)
    assert r.ext_fields["client_said"] == "client-who"


async def raw_exchange(addr: str, payload: bytes) -> bytes:
    """Send raw bytes; return what comes back before the server closes (or 5 s pass)."""
    host, port = addr.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(payload)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()


def frame(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), len(header)) + header


async def test_malformed_input_is_answered_or_closed_never_crashes(fx: Fixture) -> None:
    # a header that parses, with its opaque, but a wrong field type: answered SYSTEM_ERROR
    reply = await raw_exchange(fx.addr, frame(b'{"code":"abc","opaque":7,"flag":0}'))
    cmd = decode_frame(reply[4:])
    assert cmd.opaque == 7 and cmd.is_response and cmd.code == ResponseCode.SYSTEM_ERROR
    assert "code" in (cmd.remark or "")
    # a header that does not parse at all: nothing to answer to, the connection closes
    assert await raw_exchange(fx.addr, frame(b'{"code":9001,"opaque":7,')) == b""
    # an absurd frame length: closed before anything is buffered
    assert await raw_exchange(fx.addr, struct.pack(">ii", 1 << 30, 10)) == b""
    # an unknown serialize type
    assert await raw_exchange(fx.addr, struct.pack(">ii", 6, (7 << 24) | 2) + b"{}") == b""
    r = await fx.client.invoke(fx.addr, RemotingCommand.request(ECHO, {"v": "ok"}), 5)
    assert r.ext_fields["echo"] == "ok"


async def test_pending_requests_fail_when_the_server_goes_away(fx: Fixture) -> None:
    task = asyncio.ensure_future(
        fx.client.invoke(fx.addr, RemotingCommand.request(SLOW, {"s": "5"}), 10)
    )
    await asyncio.sleep(0.1)
    await fx.server.close()
    with pytest.raises(RemotingError):
        await task
    with pytest.raises(RemotingError):
        await fx.client.invoke(fx.addr, RemotingCommand.request(ECHO), 1)


async def test_deeply_nested_header_among_good_frames_on_a_socket(
        fx: Fixture, caplog: pytest.LogCaptureFixture) -> None:
    # issue 17.4: a header nested 600 levels escaped the decoder as TypeError; asyncio printed a
    # traceback, closed the connection and dropped the good frames of the same read
    def request(v: str, opaque: int) -> bytes:
        cmd = RemotingCommand.request(ECHO, {"v": v})
        cmd.opaque = opaque
        return cmd.encode()

    deep = frame(b'{"code":9001,"opaque":5,"flag":0,"extFields":{"x":' + b'{"a":' * 600 + b"1"
                 + b"}" * 600 + b"}}")
    host, port = fx.addr.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request("a", 1) + deep + request("b", 2))
        replies = []
        for _ in range(3):
            (length,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
            replies.append(decode_frame(await reader.readexactly(length)))
        assert [(r.opaque, r.code) for r in replies] == [(1, 0), (5, ResponseCode.SYSTEM_ERROR), (2, 0)]
        writer.write(request("c", 3))  # the connection is still usable
        (length,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
        assert decode_frame(await reader.readexactly(length)).ext_fields["echo"] == "c"
    finally:
        writer.close()
    assert not any(r.exc_info for r in caplog.records)
    assert sum("bad request" in r.getMessage() for r in caplog.records) == 1


async def test_a_flood_of_bad_frames_writes_a_bounded_log(
        fx: Fixture, caplog: pytest.LogCaptureFixture) -> None:
    # issue 17.4: every bad frame wrote a WARNING (26,000 lines in the probe)
    bad = frame(b'{"code":"abc","opaque":7,"flag":0}')
    for _ in range(30):  # 30 connections from one host, 100 bad requests each, then garbage
        host, port = fx.addr.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(bad * 100)
        for _ in range(100):  # each one answered SYSTEM_ERROR
            (length,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
            assert decode_frame(await reader.readexactly(length)).code == ResponseCode.SYSTEM_ERROR
        writer.write(b"\xff\xff\xff\xff")  # then a length that breaks the stream: closed
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
    await fx.server.close()  # the summary of what was not logged
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == BAD_FRAME_LOG_FIRST + 1
    assert "127.0.0.1: 3020 more bad frames" in lines[-1]


async def test_idle_connections_are_closed_and_busy_ones_kept(caplog: pytest.LogCaptureFixture) -> None:
    # issue 17.3: idle is neither a read nor a write for max_idle_s (serverChannelMaxIdleTimeSeconds);
    # a client that sends something more often (heartbeats every 30 s against 120 s) stays
    caplog.set_level(logging.INFO, logger="rocketlite.remoting.server")
    server = RemotingServer("127.0.0.1", 0, name="idle", limits=ConnectionLimits(max_idle_s=0.6))
    server.register(ECHO, lambda conn, cmd: cmd.response(0))
    await server.start()
    addr = f"127.0.0.1:{server.port}"
    busy, silent = RemotingClient(), RemotingClient()
    try:
        await busy.invoke(addr, RemotingCommand.request(ECHO), 5)
        quiet = await silent.connection(addr)
        for _ in range(12):  # 1.8 s: three idle timeouts
            await asyncio.sleep(0.15)
            await busy.invoke(addr, RemotingCommand.request(ECHO), 5)
        assert not quiet.is_open and busy.cached(addr) is not None
        assert len(server.connections) == 1
        assert any("closed 1 connection(s) idle" in r.getMessage() for r in caplog.records)
        # the client reconnects on its next request
        assert (await silent.invoke(addr, RemotingCommand.request(ECHO), 5)).code == 0
    finally:
        await busy.close()
        await silent.close()
        await server.close()


async def test_an_idle_connection_with_unread_replies_below_the_high_mark_is_aborted() -> None:
    """Replies the peer never reads, fewer than the high mark: the connection is idle, and a
    graceful close would wait for them to drain, for ever; it is aborted instead."""
    limits = ConnectionLimits(max_idle_s=0.5, write_high=64 << 20, write_low=0)
    server = RemotingServer("127.0.0.1", 0, name="unread", limits=limits)
    server.register(ECHO, lambda conn, cmd: cmd.response(0, body=b"z" * 100_000))
    await server.start()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, ("127.0.0.1", server.port))
        req = RemotingCommand.request(ECHO)
        req.opaque = 1
        await loop.sock_sendall(sock, req.encode() * 200)  # 20 MB of replies, never read
        await asyncio.sleep(0.3)
        [conn] = server.connections
        assert conn.blocked_since == 0 and conn.transport is not None \
            and conn.transport.get_write_buffer_size() > 0  # below the mark, not draining
        for _ in range(40):
            await asyncio.sleep(0.1)
            if not server.connections:
                break
        assert not server.connections
    finally:
        sock.close()
        await server.close()


async def test_a_connection_stuck_above_the_high_mark_is_aborted() -> None:
    limits = ConnectionLimits(max_idle_s=0.5, write_high=64 * 1024, write_low=0)
    server = RemotingServer("127.0.0.1", 0, name="stuck", limits=limits)
    server.register(ECHO, lambda conn, cmd: cmd.response(0, body=b"z" * 100_000))
    await server.start()
    host, port = "127.0.0.1", server.port
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, (host, port))
        req = RemotingCommand.request(ECHO)
        req.opaque = 1
        await loop.sock_sendall(sock, req.encode() * 200)  # 20 MB of replies, never read
        for _ in range(40):
            await asyncio.sleep(0.1)
            if not server.connections:
                break
        assert not server.connections  # aborted: its buffered replies are dropped
    finally:
        sock.close()
        await server.close()
