"""Connection's write coalescing: frames sent in one loop iteration share writes, but a long
run is cut every ``COALESCE_MAX`` pieces so the peer can start on it, and nothing is reordered."""

from __future__ import annotations

import asyncio

from remotinghelp import connect
from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.remoting import connection
from rocketlite.remoting.connection import Connection


async def test_long_runs_are_cut_and_order_is_kept() -> None:
    conn = Connection()
    transport = connect(conn)
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
    transport = connect(conn)
    for _ in range(connection.COALESCE_MAX - 1):
        conn.send_oneway(RemotingCommand.request(10, {}))
    assert transport.writes == []
    await asyncio.sleep(0)
    assert len(transport.writes) == 1


async def test_a_large_body_is_written_alone_between_joined_small_pieces() -> None:
    conn = Connection()
    transport = connect(conn)
    big = bytes(range(256)) * (connection.WRITE_ALONE // 256)
    conn.send_oneway(RemotingCommand.request(10, {"i": "0"}))
    conn.send_oneway(RemotingCommand.request(11, {"i": "1"}, big))
    conn.send_oneway(RemotingCommand.request(10, {"i": "2"}))
    await asyncio.sleep(0)
    assert any(w is big for w in transport.writes)  # the body object itself, not a joined copy
    assert len(transport.writes) == 3  # [frame 0 + head of 1], [body of 1], [frame 2]
    frames = FrameDecoder(1 << 20).feed(b"".join(transport.writes))
    assert [f.ext_fields["i"] for f in frames] == ["0", "1", "2"]  # type: ignore[union-attr]
    assert frames[1].body == big  # type: ignore[union-attr]
    conn.send_oneway(RemotingCommand.request(10, {"i": "3"}))
    conn.send_oneway(RemotingCommand.request(10, {"i": "4"}))
    await asyncio.sleep(0)
    assert len(transport.writes) == 4  # small ones are joined again afterwards


async def test_a_large_request_is_written_alone_too() -> None:
    from rocketlite.remoting.pending import FutureWaiter, next_opaque

    conn = Connection()
    transport = connect(conn)
    loop = asyncio.get_running_loop()
    big = RemotingCommand.request(320, {"i": "1"}, b"b" * connection.WRITE_ALONE)
    big.opaque = next_opaque()
    frame = big.encode()  # a template frame: the body inside the head
    conn.send_oneway(RemotingCommand.request(10, {"i": "0"}))
    conn.send_request(frame, b"", big.opaque, 320, 5.0, FutureWaiter(loop.create_future()))
    await asyncio.sleep(0)
    assert len(transport.writes) == 2 and any(w is frame for w in transport.writes)
    conn.abort()
