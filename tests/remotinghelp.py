"""A fake transport for unit tests of ``Connection`` (not a test module): it records writes and
read pauses, and keeps a write buffer with water marks the way asyncio's transports do, so a
test can play a peer that stops reading (``pause_writing``) and starts again (``consume``)."""

from __future__ import annotations

import asyncio
from typing import Any

from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.remoting.connection import Connection


class FakeTransport(asyncio.Transport):
    def __init__(self, protocol: asyncio.Protocol | None = None, *, peer: str = "10.0.0.1") -> None:
        super().__init__()
        self.protocol = protocol
        self.peer = peer
        self.writes: list[bytes] = []
        self.buffered = 0  # bytes the peer has not read yet
        self.high = 64 * 1024
        self.low = 16 * 1024
        self.writing_paused = False
        self.reading = True
        self.closed = False
        self.aborted = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))
        self.buffered += len(data)
        if self.buffered > self.high and not self.writing_paused and self.protocol is not None:
            self.writing_paused = True
            self.protocol.pause_writing()

    def consume(self, n: int | None = None) -> None:
        """The peer reads ``n`` buffered bytes (all if None)."""
        self.buffered = max(0, self.buffered - (self.buffered if n is None else n))
        if self.writing_paused and self.buffered <= self.low and self.protocol is not None:
            self.writing_paused = False
            self.protocol.resume_writing()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = 64 * 1024 if high is None else high
        self.low = self.high // 4 if low is None else low

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self.peer, 4242) if name == "peername" else default


def connect(conn: Connection, peer: str = "10.0.0.1") -> FakeTransport:
    transport = FakeTransport(conn, peer=peer)
    conn.connection_made(transport)
    return transport


def written(transport: FakeTransport) -> list[RemotingCommand]:
    """Every command written so far, in order."""
    items = FrameDecoder().feed(b"".join(transport.writes))
    assert all(isinstance(i, RemotingCommand) for i in items)
    return items  # type: ignore[return-value]
