"""ProcessQueue: offset order, the offset to commit, counters, orderly take/commit, expiry."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from rocketlite.client.process_queue import (
    PULL_MAX_IDLE_TIME,
    REBALANCE_LOCK_MAX_LIVE_TIME,
    ProcessQueue,
)


@dataclass(frozen=True)
class Msg:
    queue_offset: int
    body: bytes = b"x"


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def consuming(pq: ProcessQueue[Msg]) -> bool:
    return pq.is_consuming  # read through a call: mypy would keep an earlier assert's narrowing


def locked(pq: ProcessQueue[Msg]) -> bool:
    return pq.locked


def msgs(*offsets: int, size: int = 1) -> list[Msg]:
    return [Msg(o, b"x" * size) for o in offsets]


# -- put / remove ------------------------------------------------------------------------------


def test_put_counts_sizes_and_dispatches_once() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    assert pq.put([Msg(5, b"abc"), Msg(3, b"de")]) is True
    assert pq.is_consuming
    assert pq.put([Msg(7, b"")]) is False  # a consume task is already marked running
    assert (pq.msg_count, pq.msg_size) == (3, 5)
    assert (pq.min_offset, pq.max_offset, pq.queue_offset_max) == (3, 7, 7)
    assert pq.span() == 4
    assert pq.first() == Msg(3, b"de")


def test_duplicate_offsets_are_not_counted_twice() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put(msgs(1, 2, size=4))
    pq.put(msgs(2, 3, size=4))
    assert (pq.msg_count, pq.msg_size) == (3, 12)


def test_put_of_nothing_does_not_dispatch() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    assert pq.put([]) is False
    assert not pq.is_consuming
    assert pq.span() == 0
    assert (pq.min_offset, pq.max_offset) == (-1, -1)
    assert pq.first() is None


def test_remove_returns_smallest_in_flight_then_max_plus_one() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put(msgs(10, 11, 12, 13, size=2))
    assert pq.remove(msgs(11, 12)) == 10
    assert (pq.msg_count, pq.msg_size) == (2, 4)
    assert pq.remove(msgs(10)) == 13
    assert pq.remove(msgs(13)) == 14
    assert (pq.msg_count, pq.msg_size) == (0, 0)
    assert not pq.has_messages()
    assert pq.remove(msgs(13)) == -1  # already empty: nothing to commit


def test_remove_before_any_put_is_minus_one() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    assert pq.remove(msgs(0)) == -1


def test_remove_of_unknown_offsets_changes_nothing() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put(msgs(4, 5))
    assert pq.remove(msgs(99)) == 4
    assert pq.msg_count == 2
    assert pq.contains(Msg(5)) and not pq.contains(Msg(99))


def test_remove_uses_the_stored_body_size() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put([Msg(1, b"12345")])
    pq.remove([Msg(1, b"")])
    assert pq.msg_size == 0


def test_out_of_order_put_keeps_offset_order() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put(msgs(20, 5, 12, 7))
    assert [m.queue_offset for m in pq.take(10)] == [5, 7, 12, 20]


@given(
    offsets=st.lists(st.integers(0, 10_000), min_size=1, max_size=60, unique=True),
    data=st.data(),
)
def test_remove_never_commits_past_an_unfinished_message(offsets: list[int], data: st.DataObject) -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pulled = sorted(offsets)
    pq.put([Msg(o, b"y" * (o % 7)) for o in pulled])
    order = data.draw(st.permutations(pulled))
    done: set[int] = set()
    i = 0
    while i < len(order):
        n = data.draw(st.integers(1, 5))
        chunk = order[i:i + n]
        i += n
        done.update(chunk)
        result = pq.remove([Msg(o) for o in chunk])
        pending = [o for o in pulled if o not in done]
        assert result == (min(pending) if pending else max(pulled) + 1)
        assert pq.msg_count == len(pending)
        assert pq.msg_size == sum(o % 7 for o in pending)
        assert pq.span() == (max(pending) - min(pending) if pending else 0)


def test_clear_resets_everything() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put(msgs(1, 2, 3))
    pq.take(1)
    pq.clear()
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max, pq.taken_count) == (0, 0, 0, 0)
    assert pq.remove(msgs(2)) == -1
    assert pq.commit() == -1


# -- orderly -----------------------------------------------------------------------------------


def test_take_and_commit() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put(msgs(0, 1, 2, 3, 4, size=3))
    batch = pq.take(2)
    assert [m.queue_offset for m in batch] == [0, 1]
    assert pq.taken_count == 2
    assert pq.msg_count == 5  # taken messages still count until committed
    assert pq.min_offset == 2
    assert pq.commit() == 2
    assert (pq.msg_count, pq.msg_size, pq.taken_count) == (3, 9, 0)
    assert pq.commit() == -1  # nothing taken
    assert [m.queue_offset for m in pq.take(32)] == [2, 3, 4]
    assert pq.commit() == 5
    assert (pq.msg_count, pq.msg_size) == (0, 0)


def test_empty_take_ends_the_consume_task() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    assert pq.put(msgs(0)) is True
    pq.take(1)
    assert pq.commit() == 1
    assert pq.is_consuming
    assert pq.take(1) == []
    assert not consuming(pq)
    assert pq.put(msgs(1)) is True  # the next put dispatches a new task


def test_make_available_again_retries_in_order() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put(msgs(0, 1, 2, 3))
    batch = pq.take(3)
    pq.make_available_again(batch[1:])
    assert pq.taken_count == 1
    assert pq.msg_count == 4
    assert pq.commit() == 1
    assert [m.queue_offset for m in pq.take(10)] == [1, 2, 3]


def test_rollback_returns_the_whole_batch() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put(msgs(5, 6, 7, size=2))
    pq.take(2)
    pq.rollback()
    assert (pq.taken_count, pq.msg_count, pq.msg_size) == (0, 3, 6)
    assert [m.queue_offset for m in pq.take(3)] == [5, 6, 7]


def test_put_ignores_offsets_being_consumed() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    pq.put(msgs(0, 1))
    pq.take(2)
    pq.put(msgs(1, 2))
    assert pq.msg_count == 3
    assert pq.commit() == 2
    assert [m.queue_offset for m in pq.take(5)] == [2]


# -- state -------------------------------------------------------------------------------------


def test_lock_expiry() -> None:
    clock = FakeClock()
    pq: ProcessQueue[Msg] = ProcessQueue(clock=clock)
    assert not locked(pq)
    pq.mark_locked()
    assert locked(pq) and not pq.is_lock_expired()
    clock.t += REBALANCE_LOCK_MAX_LIVE_TIME
    assert not pq.is_lock_expired()  # strictly more than the live time
    clock.t += 0.001
    assert pq.is_lock_expired()
    pq.mark_locked()
    assert not pq.is_lock_expired()


def test_pull_expiry() -> None:
    clock = FakeClock()
    pq: ProcessQueue[Msg] = ProcessQueue(clock=clock)
    clock.t += PULL_MAX_IDLE_TIME + 1
    assert pq.is_pull_expired()
    pq.mark_pulled()
    assert not pq.is_pull_expired()
    assert pq.now() == clock.t


def test_consume_time_moves_on_remove_and_take() -> None:
    clock = FakeClock()
    pq: ProcessQueue[Msg] = ProcessQueue(clock=clock)
    clock.t += 5
    pq.remove([])
    assert pq.last_consume_time == clock.t
    clock.t += 5
    pq.take(1)
    assert pq.last_consume_time == clock.t


def test_try_unlock_times_and_flags() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    assert pq.try_unlock_times == 0
    assert pq.inc_try_unlock_times() == 1
    assert pq.inc_try_unlock_times() == 2
    assert not pq.dropped
    pq.dropped = True
    assert "dropped=True" in repr(pq)


async def test_consume_lock_is_an_asyncio_lock() -> None:
    pq: ProcessQueue[Msg] = ProcessQueue()
    async with pq.consume_lock:
        assert pq.consume_lock.locked()
    assert not pq.consume_lock.locked()
