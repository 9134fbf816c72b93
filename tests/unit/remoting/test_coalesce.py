"""Connection's write coalescing: frames sent in one loop iteration share writes, but a long
run is cut every ``COALESCE_MAX`` pieces so the peer can start on it, and nothing is reordered."""

from __future__ import annotations

import asyncio
from typing import Any

from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.remoting import connection
from rocketlite.remoting.connection import Connection


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


async def test_long_runs_are_cut_and_order_is_kept() -> None:
    conn = Connection()
    transport = FakeTransport()
    conn.connection_made(transport)
    n = 3 * connection.COALESCE_MAX + 5
    for i in range(n):
        conn.send_oneway(RemotingCommand.request(10, {"i": str(i)}))
    # the full runs went out at once; the tail waits for the end of the iteration
    assert len(transport.writes) == 3
    await asyncio.sleep(0)
    assert len(transport.writes) == 4
    frames = FrameDecoder(1 << 20).feed(b"".join(transport.writes))
    assert [f.ext_fields["i"] for f in frames] == [str(i) for i in range(n)]  # type: ignore[union-attr]


async def test_a_short_run_is_one_write() -> None:
    conn = Connection()
    transport = FakeTransport()
    conn.connection_made(transport)
    for _ in range(connection.COALESCE_MAX - 1):
        conn.send_oneway(RemotingCommand.request(10, {}))
    assert transport.writes == []
    await asyncio.sleep(0)
    assert len(transport.writes) == 1
