"""End-of-read work (``Connection.at_read_end``): a processor that batches the requests of one
read runs once after all of them, before their replies are written, and ``send_frames`` puts
its replies in one write."""

from __future__ import annotations

import asyncio

from remotinghelp import connect, written
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection


def _frames(n: int) -> bytes:
    out = []
    for i in range(n):
        cmd = RemotingCommand.request(10, {"i": str(i)})
        cmd.opaque = 100 + i
        out.append(cmd.encode())
    return b"".join(out)


class Batcher:
    """Holds the requests of a read and answers them all at its end."""

    def __init__(self) -> None:
        self.held: list[RemotingCommand] = []
        self.runs: list[int] = []  # requests answered per end-of-read run
        self.writes_before: list[int] = []

    def __call__(self, conn: Connection, cmd: RemotingCommand) -> None:
        if not self.held:
            conn.at_read_end(lambda: self.end(conn))
        self.held.append(cmd)

    def end(self, conn: Connection) -> None:
        held, self.held = self.held, []
        self.runs.append(len(held))
        assert conn.transport is not None
        self.writes_before.append(len(conn.transport.writes))  # type: ignore[attr-defined]
        conn.send_frames([c.response(0, f"ok {c.ext_fields['i']}").encode() for c in held])


async def test_one_run_and_one_write_per_read() -> None:
    batcher = Batcher()
    conn = Connection(batcher)
    transport = connect(conn)
    conn.data_received(_frames(50))  # more than COALESCE_MAX replies
    assert batcher.runs == [50]
    assert batcher.writes_before == [0]  # nothing was written before the read's end
    assert len(transport.writes) == 1
    replies = written(transport)
    assert [r.opaque for r in replies] == [100 + i for i in range(50)]
    assert [r.remark for r in replies] == [f"ok {i}" for i in range(50)]
    conn.data_received(_frames(3))
    assert batcher.runs == [50, 3]
    assert len(transport.writes) == 2


async def test_a_failing_hook_does_not_stop_the_others() -> None:
    ran: list[str] = []

    def boom() -> None:
        ran.append("boom")
        raise RuntimeError("boom")

    def handler(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        conn.at_read_end(boom)
        conn.at_read_end(lambda: ran.append("next"))
        return cmd.response(0)

    conn = Connection(handler)
    transport = connect(conn)
    conn.data_received(_frames(1))
    assert ran == ["boom", "next"]
    assert [r.opaque for r in written(transport)] == [100]  # the plain reply still went out


async def test_outside_a_read_it_runs_at_the_end_of_the_iteration() -> None:
    conn = Connection()
    transport = connect(conn)
    ran: list[int] = []
    conn.at_read_end(lambda: ran.append(1))
    assert ran == []
    await asyncio.sleep(0)
    assert ran == [1]
    conn.send_frames([RemotingCommand.request(10, {}).encode()] * 3)  # at once: no read to end
    assert len(transport.writes) == 1
