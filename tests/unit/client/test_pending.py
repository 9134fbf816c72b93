"""The client's pending table (``remoting/pending.py``): replies reach their waiter once, deadlines
per timeout value expire in order, answered requests leave the FIFOs, a close fails the rest."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from rocketlite.common.errors import RemotingError, RemotingTimeoutError
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.pending import FutureWaiter, PendingTable, next_opaque


class Recorder:
    def __init__(self) -> None:
        self.got: list[RemotingCommand | BaseException] = []

    def reply_received(self, result: RemotingCommand | BaseException) -> None:
        self.got.append(result)


def reply(opaque: int) -> RemotingCommand:
    return RemotingCommand(0, opaque=opaque, flag=1)


def test_a_reply_reaches_its_waiter_once() -> None:
    table = PendingTable()
    a, b = Recorder(), Recorder()
    table.add(1, a, 3.0, 100.0, 310)
    table.add(2, b, 3.0, 100.0, 310)
    table.complete(reply(2))
    table.complete(reply(2))  # a duplicate, or a late reply: nobody waits
    table.complete(reply(9))
    assert [r.opaque for r in b.got] == [2] and not a.got  # type: ignore[union-attr]
    assert len(table) == 1


def test_deadlines_expire_per_timeout_in_order_and_answered_ones_leave() -> None:
    table = PendingTable()
    short, long_, answered = Recorder(), Recorder(), Recorder()
    table.add(1, answered, 1.0, 100.0, 310)
    table.add(2, short, 1.0, 100.5, 310)
    table.add(3, long_, 5.0, 100.0, 11)
    table.complete(reply(1))
    assert table.sweep(101.0, "peer")  # opaque 1 answered: dropped; 2 not yet due
    assert list(table.fifos[1.0]) == [(101.5, 2, 310)]
    assert table.sweep(101.5, "peer")
    assert len(short.got) == 1 and isinstance(short.got[0], RemotingTimeoutError)
    assert "request 310 within 1.000 s" in str(short.got[0])
    assert 1.0 not in table.fifos and not long_.got
    assert not table.sweep(105.0, "peer")
    assert isinstance(long_.got[0], RemotingTimeoutError) and len(table) == 0 and not table.fifos
    assert [r.opaque for r in answered.got] == [1]  # type: ignore[union-attr]  # its reply, no timeout


def test_a_close_fails_every_waiter() -> None:
    table = PendingTable()
    ws = [Recorder() for _ in range(3)]
    for i, w in enumerate(ws):
        table.add(i + 1, w, float(i + 1), 0.0, 310)
    err = RemotingError("closed")
    table.fail_all(err)
    assert all(w.got == [err] for w in ws)
    assert len(table) == 0 and not table.fifos


async def test_future_waiter() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[RemotingCommand] = loop.create_future()
    FutureWaiter(fut).reply_received(reply(5))
    assert (await fut).opaque == 5
    failed: asyncio.Future[RemotingCommand] = loop.create_future()
    FutureWaiter(failed).reply_received(RemotingTimeoutError("late"))
    with pytest.raises(RemotingTimeoutError):
        await failed
    cancelled: asyncio.Future[RemotingCommand] = loop.create_future()
    cancelled.cancel()
    FutureWaiter(cancelled).reply_received(reply(6))  # ignored, no InvalidStateError
    assert cancelled.cancelled()


def test_opaques_are_positive_int32_and_distinct() -> None:
    got = [next_opaque() for _ in range(1000)]
    assert len(set(got)) == 1000 and all(0 <= o <= 0x7FFFFFFF for o in got)


def test_answered_requests_behind_a_slow_one_are_dropped() -> None:
    table = PendingTable()
    slow = Recorder()
    table.add(1, slow, 3.0, 0.0, 310)
    for o in range(2, 3002):
        table.add(o, Recorder(), 3.0, 0.0, 310)
        table.complete(reply(o))
    assert len(table.fifos[3.0]) == 3001
    assert table.sweep(1.0, "peer")
    assert list(table.fifos[3.0]) == [(3.0, 1, 310)] and not slow.got


def test_a_wrapped_opaque_skips_ids_still_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketlite.remoting import pending

    table = PendingTable()
    long_wait, other = Recorder(), Recorder()
    table.add(1, long_wait, 3600.0, 0.0, 11)  # e.g. a long poll sent 2^31 requests ago
    table.add(3, other, 3600.0, 0.0, 11)
    monkeypatch.setattr(pending, "_opaques", itertools.count(0x7FFFFFFE))
    got = [next_opaque() for _ in range(4)]
    # 0x7FFFFFFE, 0x7FFFFFFF, then the counter wraps: 0 is never an id, 1 and 3 still wait
    assert got == [0x7FFFFFFE, 0x7FFFFFFF, 2, 4]
    table.complete(reply(1))  # answered: its id is free again
    monkeypatch.setattr(pending, "_opaques", itertools.count(0x80000001))
    assert next_opaque() == 1
    table.add(1, Recorder(), 3.0, 0.0, 310)
    table.complete(reply(3))
    assert len(long_wait.got) == 1 and not isinstance(long_wait.got[0], BaseException)
    assert len(other.got) == 1  # each waiter got its own reply, none was overwritten


def test_distinct_timeouts_share_a_fifo_per_millisecond() -> None:
    table = PendingTable()
    ws = [Recorder() for _ in range(1000)]
    for i, w in enumerate(ws):  # a sync send's remaining budget: a new float each time
        table.add(i + 1, w, 3.0 - i * 1e-7, 100.0, 310)
    table.add(1001, Recorder(), 1.0, 100.0, 310)
    assert sorted(table.fifos) == [1.0, 3.0]
    assert table.sweep(102.9999, "peer")  # the earliest deadline is 102.9999001: none is due
    assert not any(w.got for w in ws)
    table.complete(reply(1001))
    assert not table.sweep(103.0, "peer")
    assert all(len(w.got) == 1 and isinstance(w.got[0], RemotingTimeoutError) for w in ws)
    assert "request 310 within 3.000 s" in str(ws[-1].got[0])
    assert len(table) == 0 and not table.fifos


def test_a_failing_waiter_is_logged_and_stops_nothing(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def reply_received(self, result: RemotingCommand | BaseException) -> None:
            raise RuntimeError("bug in a callback")

    table = PendingTable()
    ok = Recorder()
    table.add(1, Broken(), 3.0, 0.0, 310)
    table.add(2, ok, 3.0, 0.0, 310)
    table.add(3, Broken(), 3.0, 0.0, 310)
    table.complete(reply(1))  # raises nothing into the reading connection
    table.sweep(5.0, "peer")  # nor into the sweep: the waiter behind it still times out
    assert len(ok.got) == 1 and isinstance(ok.got[0], RemotingTimeoutError)
    assert sum("a reply waiter (Broken) failed" in r.getMessage() for r in caplog.records) == 2
    assert len(table) == 0
