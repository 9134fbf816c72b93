"""A Connection whose peer does not read its replies (issue 17, part 3): past the write-buffer
high mark it stops reading and holds back the requests it has read, synchronous handlers'
included; once the peer reads down to the low mark they run, in order, none lost. A client's
connection keeps reading. The shared budget for partial frames closes the largest holders."""

from __future__ import annotations

import asyncio
import logging

from remotinghelp import FakeTransport, connect, written
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting import connection
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.limits import ConnectionLimits, FrameBudget, PeerLog

REPLY = 10_000  # bytes of body per reply: 7 fit under the fake transport's 64 KiB high mark


def big_reply(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(0, ext_fields={"i": cmd.ext_fields["i"]}, body=b"r" * REPLY)


def requests(first: int, n: int) -> bytes:
    out = []
    for i in range(first, first + n):
        cmd = RemotingCommand.request(10, {"i": str(i)})
        cmd.opaque = i + 1
        out.append(cmd.encode())
    return b"".join(out)


def answered(transport: FakeTransport) -> list[int]:
    return [int(r.ext_fields["i"]) for r in written(transport)]


async def test_sync_handlers_stop_at_the_high_mark_and_resume_in_order() -> None:
    conn = Connection(big_reply)
    transport = connect(conn)
    transport.set_write_buffer_limits(high=64 * 1024, low=16 * 1024)
    conn.data_received(requests(0, 200))  # one read, 200 requests of 10 KB replies each
    await asyncio.sleep(0)
    # stopped after the first coalesced run that passed the mark: the rest wait unread
    done = answered(transport)
    assert done == list(range(len(done))) and len(done) <= 16 + 7
    assert not transport.reading and conn._holding
    conn.data_received(requests(200, 10))  # already in flight when reading stopped: queued behind
    await asyncio.sleep(0)
    assert len(answered(transport)) == len(done)
    rounds = 0
    while transport.buffered or not transport.reading:
        transport.consume()  # the peer reads everything written so far
        await asyncio.sleep(0)
        rounds += 1
        assert transport.buffered <= 64 * 1024 + 16 * (REPLY + 200)  # high mark + one run
    assert answered(transport) == list(range(210))  # nothing lost, nothing reordered
    assert rounds > 5 and transport.reading and not conn._held


async def test_work_that_waits_for_the_buffer_runs_after_the_held_requests() -> None:
    run = connection.COALESCE_MAX // 2  # replies per coalesced write (head and body: 2 pieces)
    conn = Connection(big_reply)
    transport = connect(conn)
    transport.set_write_buffer_limits(high=1, low=0)  # every write passes the mark
    ran: list[str] = []
    conn.when_writable(lambda: ran.append("now"))  # not blocked: at once
    conn.data_received(requests(0, 2 * run + 4))
    assert conn._holding and answered(transport) == list(range(run))
    conn.when_writable(lambda: ran.append("later"))  # a held pull woken while blocked
    assert ran == ["now"]
    transport.consume()
    await asyncio.sleep(0)
    assert ran == ["now"] and answered(transport) == list(range(2 * run))  # blocked again
    transport.consume()
    await asyncio.sleep(0)
    assert ran == ["now", "later"] and answered(transport) == list(range(2 * run + 4))
    transport.consume()
    assert transport.reading and not conn._holding


async def test_closing_drops_what_was_held_back() -> None:
    conn = Connection(big_reply)
    transport = connect(conn)
    transport.set_write_buffer_limits(high=1, low=0)
    conn.data_received(requests(0, 50))
    assert conn._held
    conn.abort()
    assert transport.aborted and not conn._held and not conn._out
    conn.connection_lost(None)
    transport.consume()  # a late resume_writing runs nothing
    await asyncio.sleep(0)
    assert answered(transport) == list(range(connection.COALESCE_MAX // 2))


async def test_in_flight_and_write_pauses_both_hold_reading() -> None:
    gate = asyncio.Event()

    async def slow(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        await gate.wait()
        return big_reply(conn, cmd)

    conn = Connection(slow, limits=ConnectionLimits(max_inflight=4))
    transport = connect(conn)
    transport.set_write_buffer_limits(high=15_000, low=0)
    conn.data_received(requests(0, 4))
    assert not transport.reading  # four coroutines in flight
    gate.set()
    for _ in range(5):
        await asyncio.sleep(0)
    # the coroutines finished (reading may resume for them) but their replies passed the mark
    assert answered(transport) == [0, 1, 2, 3] and not transport.reading
    transport.consume()
    assert transport.reading


async def test_a_client_connection_keeps_reading_while_its_writes_wait() -> None:
    conn = Connection(big_reply, limits=ConnectionLimits.for_client())
    transport = connect(conn)
    transport.set_write_buffer_limits(high=1, low=0)
    conn.data_received(requests(0, 30))
    await asyncio.sleep(0)
    assert answered(transport) == list(range(30)) and transport.reading
    drained = asyncio.ensure_future(conn.drain())  # its own requests wait for the buffer
    await asyncio.sleep(0)
    assert not drained.done()
    transport.consume()
    await asyncio.sleep(0)
    assert drained.done()


def test_limits_are_set_on_the_transport_and_checked() -> None:
    conn = Connection(limits=ConnectionLimits(write_high=5000, write_low=1000))
    transport = FakeTransport(conn)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_make(conn, transport))
    finally:
        loop.close()
    assert (transport.high, transport.low) == (5000, 1000)
    for bad in ({"write_high": 10, "write_low": 20}, {"max_inflight": 0}, {"max_idle_s": -1}):
        try:
            ConnectionLimits(**bad)  # type: ignore[arg-type]
        except ValueError:
            continue
        raise AssertionError(f"{bad} accepted")


async def _make(conn: Connection, transport: FakeTransport) -> None:
    conn.connection_made(transport)


async def test_the_frame_budget_closes_the_largest_partial_frames(caplog: object) -> None:
    budget = FrameBudget(3000, PeerLog(logging.getLogger("rocketlite.test.budget")))
    conns = [Connection(frame_budget=budget) for _ in range(4)]
    transports = [connect(c, peer=f"10.0.0.{i}") for i, c in enumerate(conns)]
    head = (100_000).to_bytes(4, "big")  # a frame of 100 KB, never finished
    conns[0].data_received(head + b"x" * 1500)
    conns[1].data_received(head + b"x" * 500)
    conns[2].data_received(head + b"x" * 800)
    assert budget.total == 1504 + 504 + 804 and not any(t.closed for t in transports)
    conns[3].data_received(head + b"x" * 400)  # 3616 > 3000: the largest (conns[0]) goes
    assert [t.aborted for t in transports] == [True, False, False, False]
    assert budget.total == 504 + 804 + 404 and conns[0].decoder.buffered == 0
    conns[1].data_received(b"x" * 2000)  # now conns[1] holds the most: it goes itself
    assert [t.aborted for t in transports] == [True, True, False, False]
    assert budget.total == 804 + 404
    conns[2].connection_lost(None)  # a peer that goes away leaves the budget
    assert budget.total == 404 and set(budget.holders) == {conns[3]}
    conns[3].data_received(b"x" * (100_000 - 400))  # the frame completes: nothing held
    assert budget.total == 0 and not budget.holders
