"""Per-connection limits of the broker's transport crossed over loopback sockets, on an in-process
``RemotingServer`` with small limits (the broker process's are crossed in
``test_abuse_limits.py`` and ``test_remoting_limits.py``):

* ``max_inflight`` (``maxInflightRequests``): once that many coroutine requests of one connection
  run, the server reads no more of it (the requests sent meanwhile wait in the socket, unrun);
  they all run once the first finish; each pause is counted (``inflight``);
* ``write_high`` and ``max_idle_s`` (pending reply bytes): a peer that never reads its replies is
  cut off once they have waited above the high mark for the idle time, counted
  (``pending_bytes``), while another connection is served throughout.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from rocketlite.protocol.command import RemotingCommand, decode_frame
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.limits import ConnectionLimits
from rocketlite.remoting.server import RemotingServer

pytestmark = pytest.mark.integration

SLOW, BIG, ECHO = 300, 301, 302


async def read_reply(reader: asyncio.StreamReader) -> RemotingCommand:
    (length,) = struct.unpack(">i", await reader.readexactly(4))
    return decode_frame(await reader.readexactly(length))


async def test_in_flight_requests_past_the_limit_wait_unread() -> None:
    release, four = asyncio.Event(), asyncio.Event()
    started: list[int] = []

    async def slow(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        started.append(int(cmd.ext_fields["i"]))
        if len(started) == 4:
            four.set()
        await release.wait()
        return cmd.response(0, ext_fields={"i": cmd.ext_fields["i"]})

    server = RemotingServer("127.0.0.1", 0, limits=ConnectionLimits(max_inflight=4))
    server.register(SLOW, slow)
    await server.start()
    writer = None
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)

        def send(i: int) -> None:
            cmd = RemotingCommand.request(SLOW, {"i": str(i)})
            cmd.opaque = i + 1
            writer.write(cmd.encode())

        for i in range(4):
            send(i)
        async with asyncio.timeout(10):
            await four.wait()
        for i in range(4, 10):  # sent while 4 run: not read
            send(i)
        await writer.drain()
        await asyncio.sleep(0.3)
        assert started == [0, 1, 2, 3]
        assert server.counts.get("inflight") == 1
        release.set()
        async with asyncio.timeout(10):
            replies = [await read_reply(reader) for _ in range(10)]
        assert sorted(int(r.ext_fields["i"]) for r in replies) == list(range(10))
        assert sorted(started) == list(range(10))
    finally:
        if writer is not None:
            writer.close()
        await server.close()


async def test_a_peer_that_never_reads_is_cut_off_and_others_are_served() -> None:
    def big(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(0, body=b"r" * 256 * 1024)

    def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(0, ext_fields=dict(cmd.ext_fields))

    limits = ConnectionLimits(write_high=256 * 1024, write_low=64 * 1024, max_idle_s=1.0)
    server = RemotingServer("127.0.0.1", 0, limits=limits)
    server.register(BIG, big)
    server.register(ECHO, echo)
    await server.start()
    client = RemotingClient()
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, ("127.0.0.1", server.port))
        request = RemotingCommand.request(BIG, {}).encode()
        await loop.sock_sendall(sock, request * 200)  # 50 MiB of replies asked for, none read
        addr = f"127.0.0.1:{server.port}"
        async with asyncio.timeout(20):
            while server.counts.get("pending_bytes") == 0:
                r = await client.invoke(addr, RemotingCommand.request(ECHO, {"k": "v"}), 5)
                assert r.code == 0 and r.ext_fields == {"k": "v"}
                await asyncio.sleep(0.05)
        # the cut-off peer finds its connection ended (closed or reset) after a few replies
        got = 0
        async with asyncio.timeout(10):
            try:
                while chunk := await loop.sock_recv(sock, 1 << 20):
                    got += len(chunk)
            except ConnectionResetError:
                pass
        assert got < 100 * 256 * 1024
        assert server.counts.get("pending_bytes") == 1
        r = await client.invoke(addr, RemotingCommand.request(ECHO, {"k": "w"}), 5)
        assert r.ext_fields == {"k": "w"}
    finally:
        sock.close()
        await client.close()
        await server.close()
