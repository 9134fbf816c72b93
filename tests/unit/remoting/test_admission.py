"""A server's connection limits at accept (``RemotingServer._admit``): past
``max_connections_per_address`` from one IP, or ``max_connections`` in all, a connection is closed
as soon as its peer is known, counted, and logged once per host; closing an admitted one frees its
slot; refused ones never take one."""

from __future__ import annotations

import pytest

from remotinghelp import FakeTransport, connect
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.limits import ConnectionLimits
from rocketlite.remoting.server import RemotingServer


def open_from(server: RemotingServer, ip: str) -> tuple[Connection, FakeTransport]:
    conn = server._make_connection()
    return conn, connect(conn, peer=ip)


async def test_connections_past_either_limit_are_closed_and_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    server = RemotingServer(limits=ConnectionLimits(max_connections=3,
                                                    max_connections_per_address=2))
    a1, t1 = open_from(server, "10.0.0.1")
    _, t2 = open_from(server, "10.0.0.1")
    refused, t3 = open_from(server, "10.0.0.1")
    assert (t1.closed, t2.closed, t3.closed) == (False, False, True)
    assert not refused.admitted and server.counts.get("connections_per_address") == 1
    _, t4 = open_from(server, "10.0.0.2")
    _, t5 = open_from(server, "10.0.0.3")
    assert not t4.closed and t5.closed and server.counts.get("connections") == 1
    for _ in range(5):  # logged once per host
        open_from(server, "10.0.0.3")
    assert sum("refused a connection from 10.0.0.3" in r.getMessage() for r in caplog.records) == 1
    assert server.counts.get("connections") == 6
    server._closed(refused)  # a refused one's close frees nothing
    assert (server.admitted, server.per_address) == (3, {"10.0.0.1": 2, "10.0.0.2": 1})
    server._closed(a1)
    assert (server.admitted, server.per_address) == (2, {"10.0.0.1": 1, "10.0.0.2": 1})
    _, t6 = open_from(server, "10.0.0.3")
    assert not t6.closed
