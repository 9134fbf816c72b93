"""Bad frames on a Connection (issue 17, part 4): whatever the decoder raises closes that
connection with one log line and never escapes ``data_received``; a bad frame inside a read does
not drop the good frames around it; warnings are rate-limited per peer host, and what was not
logged is counted in one summary line."""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest

from remotinghelp import connect, written
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.limits import BAD_FRAME_LOG_FIRST, PeerLog

LOGGER = "rocketlite.test.badframes"


def frame(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), len(header)) + header


def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(0, ext_fields={"echo": cmd.ext_fields.get("v", "")})


def request(v: str, opaque: int) -> bytes:
    cmd = RemotingCommand.request(10, {"v": v})
    cmd.opaque = opaque
    return cmd.encode()


DEEP = frame(b'{"code":10,"opaque":5,"flag":0,"extFields":{"x":' + b'{"a":' * 600 + b"1"
             + b"}" * 600 + b"}}")


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_deeply_nested_header_is_answered_and_its_neighbours_served(
        caplog: pytest.LogCaptureFixture) -> None:
    conn = Connection(echo)
    transport = connect(conn)
    conn.data_received(request("a", 1) + DEEP + request("b", 2))
    await asyncio.sleep(0)
    replies = written(transport)
    assert [(r.opaque, r.code) for r in replies] == [(1, 0), (5, ResponseCode.SYSTEM_ERROR), (2, 0)]
    assert [r.ext_fields.get("echo") for r in replies] == ["a", None, "b"]
    assert not transport.closed
    assert len(warnings(caplog)) == 1


async def test_whatever_the_decoder_raises_closes_with_one_line(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: FrameDecoder, data: bytes) -> list[object]:
        raise TypeError("Recursion limit reached")

    monkeypatch.setattr(FrameDecoder, "feed", broken)
    conn = Connection(echo)
    transport = connect(conn)
    conn.data_received(request("a", 1))  # must not raise into the event loop
    assert transport.closed
    [line] = warnings(caplog)
    assert "TypeError: Recursion limit reached" in line and "10.0.0.1:4242" in line
    assert all(r.exc_info is None for r in caplog.records)  # one line, no traceback


async def test_bad_frames_are_rate_limited_per_peer_host(caplog: pytest.LogCaptureFixture) -> None:
    # A window longer than any run of this test, however loaded the machine: the counts below
    # must not depend on how fast 2,000 frames are decoded.
    peer_log = PeerLog(logging.getLogger(LOGGER), first=5, window=600)
    conn = Connection(echo, peer_log=peer_log)
    transport = connect(conn, peer="10.0.0.1")
    bad = frame(b'{"code":"abc","opaque":7,"flag":0}')  # answerable: SYSTEM_ERROR, stays open
    for _ in range(20):
        conn.data_received(bad * 100)
    other = Connection(echo, peer_log=peer_log)
    connect(other, peer="10.0.0.2")
    other.data_received(bad * 3)
    await asyncio.sleep(0)
    assert len(written(transport)) == 2000  # every bad request is still answered
    lines = warnings(caplog)
    assert len(lines) == 5 + 3
    assert sum("10.0.0.2" in x for x in lines) == 3
    peer_log.flush()  # the window ends: one summary line with the count
    summary = warnings(caplog)[8:]
    assert summary == [summary[0]] and "10.0.0.1: 1995 more bad frames" in summary[0]


async def test_the_window_end_writes_the_summary_by_itself(caplog: pytest.LogCaptureFixture) -> None:
    peer_log = PeerLog(logging.getLogger(LOGGER), first=1, window=0.5)
    for _ in range(3):
        peer_log.warning("10.0.0.3", "bad frame from %s", "10.0.0.3")
    assert len(warnings(caplog)) == 1
    await asyncio.sleep(0.8)  # the loop's timer at the window's end
    lines = warnings(caplog)
    assert len(lines) == 2 and "10.0.0.3: 2 more bad frames" in lines[1]


async def test_many_connections_from_one_host_share_the_limit(caplog: pytest.LogCaptureFixture) -> None:
    peer_log = PeerLog(logging.getLogger(LOGGER))
    for _ in range(200):
        conn = Connection(echo, peer_log=peer_log)
        transport = connect(conn)
        conn.data_received(b"\xff\xff\xff\xff")  # a negative length: fatal, closes
        assert transport.closed
    assert len(warnings(caplog)) == BAD_FRAME_LOG_FIRST
    peer_log.flush()  # a server's close
    lines = warnings(caplog)
    assert len(lines) == BAD_FRAME_LOG_FIRST + 1
    assert f"{200 - BAD_FRAME_LOG_FIRST} more bad frames" in lines[-1]


def test_peer_log_without_a_loop_summarizes_at_the_next_window() -> None:
    seen: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger = logging.getLogger(LOGGER + ".noloop")
    logger.addHandler(Capture())
    logger.propagate = False
    peer_log = PeerLog(logger, first=1, window=0.0)  # every warning starts a new window
    for i in range(3):
        peer_log.warning("h", "bad %d", i)
    assert seen == ["bad 0", "bad 1", "bad 2"]
    peer_log = PeerLog(logger, first=1, window=3600, max_hosts=2)
    for host in ("a", "a", "b", "c"):  # "c" evicts "a", the oldest, and summarizes it
        peer_log.warning(host, "bad from %s", host)
    assert seen[3:] == ["bad from a", "bad from b", seen[5], "bad from c"]
    assert seen[5].startswith("a: 1 more bad frames")
