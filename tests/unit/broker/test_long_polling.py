"""PullRequestHoldService: hold, wake on arrival, timeout, the arrival race, limits, shutdown,
and arrivals reported from the dispatcher's thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from rocketlite.broker.long_polling import PullRequestHoldService

KEY = ("T", 0)


class Runs:
    """Records re-runs of held pulls: (name, thread id, monotonic time)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float]] = []
        self.event = asyncio.Event()

    def run(self, name: str) -> Callable[[], None]:
        def go() -> None:
            self.calls.append((name, threading.get_ident(), time.monotonic()))
            self.event.set()
        return go

    @property
    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    async def wait(self, n: int) -> None:
        async with asyncio.timeout(2.0):
            while len(self.calls) < n:
                self.event.clear()
                await self.event.wait()


def service(max_held: int = 100) -> PullRequestHoldService:
    s = PullRequestHoldService(max_held)
    s.start(asyncio.get_running_loop())
    return s


def end(n: int) -> Callable[[], int]:
    return lambda: n


async def test_held_pull_is_woken_by_an_arrival_past_its_offset() -> None:
    s, r = service(), Runs()
    assert s.hold(KEY, 5, 10.0, r.run("a"), end(5))
    assert s.hold(KEY, 7, 10.0, r.run("b"), end(5))
    assert s.hold(("T", 1), 5, 10.0, r.run("other-queue"), end(5))
    assert s.count == 3
    s.notify(KEY, 5)  # nothing new for either
    s.notify(("U", 0), 100)
    assert r.calls == [] and s.count == 3
    s.notify(KEY, 6)
    assert r.names == ["a"] and s.count == 2
    s.notify(KEY, 9)
    assert r.names == ["a", "b"] and s.count == 1
    assert set(s.held) == {("T", 1)}
    s.release_all()


async def test_timeout_runs_the_pull_once() -> None:
    s, r = service(), Runs()
    t0 = time.monotonic()
    s.hold(KEY, 0, 0.05, r.run("a"), end(0))
    await r.wait(1)
    assert 0.04 <= r.calls[0][2] - t0 < 1.0
    s.notify(KEY, 10)  # already answered: not run again
    await asyncio.sleep(0.1)
    assert r.names == ["a"] and s.count == 0 and s.held == {}


async def test_woken_pull_does_not_also_time_out() -> None:
    s, r = service(), Runs()
    s.hold(KEY, 0, 0.05, r.run("a"), end(0))
    s.notify(KEY, 1)
    await asyncio.sleep(0.15)
    assert r.names == ["a"]


async def test_arrival_between_read_and_registration_is_not_missed() -> None:
    s, r = service(), Runs()
    # the caller saw end 3 == its offset; by the time it registers the queue holds 4
    assert s.hold(KEY, 3, 10.0, r.run("a"), end(4))
    assert r.calls == []  # run soon, not inline (the caller has not answered yet)
    await r.wait(1)
    assert s.count == 0 and s.held == {}


async def test_max_held() -> None:
    s, r = service(max_held=2), Runs()
    assert s.hold(KEY, 0, 10.0, r.run("a"), end(0))
    assert s.hold(KEY, 0, 10.0, r.run("b"), end(0))
    assert not s.hold(KEY, 0, 10.0, r.run("c"), end(0))
    s.notify(KEY, 1)
    assert r.names == ["a", "b"]
    assert s.hold(KEY, 1, 10.0, r.run("d"), end(1))
    s.release_all()


async def test_release_all_answers_every_held_pull() -> None:
    s, r = service(), Runs()
    for i in range(5):
        s.hold(("T", i % 2), 0, 10.0, r.run(str(i)), end(0))
    s.release_all()
    assert sorted(r.names) == ["0", "1", "2", "3", "4"]
    assert s.count == 0 and s.held == {}
    await asyncio.sleep(0)
    s.release_all()
    assert len(r.calls) == 5


async def test_nothing_is_held_once_shutting_down() -> None:
    s, r = service(), Runs()
    held_again: list[bool] = []

    def rehold() -> None:  # a re-run that would hold on (filtered pull): refused while closing
        held_again.append(s.hold(KEY, 1, 10.0, r.run("again"), end(1)))

    s.hold(KEY, 0, 10.0, rehold, end(0))
    s.release_all()
    assert held_again == [False] and s.count == 0
    assert not s.hold(KEY, 0, 10.0, r.run("late"), end(0))


async def test_on_dispatched_from_another_thread_wakes_on_the_loop() -> None:
    s, r = service(), Runs()
    s.hold(KEY, 2, 10.0, r.run("a"), end(2))
    s.hold(("T", 1), 0, 10.0, r.run("b"), end(0))

    def dispatcher() -> None:
        s.on_dispatched("T", 0, 2)  # not past offset 2
        s.on_dispatched("Other", 0, 100)  # nobody waits
        s.on_dispatched("T", 0, 3)
        s.on_dispatched("T", 1, 1)

    t = threading.Thread(target=dispatcher)
    t.start()
    t.join()
    await r.wait(2)
    loop_thread = threading.get_ident()
    assert sorted(r.names) == ["a", "b"]
    assert all(tid == loop_thread for _, tid, _ in r.calls)
    assert s.count == 0


async def test_many_arrivals_from_a_thread_are_drained_in_one_call() -> None:
    s, r = service(), Runs()
    for i in range(50):
        s.hold(("T", i), 0, 10.0, r.run(str(i)), end(0))
    done = threading.Event()

    def dispatcher() -> None:
        for i in range(50):
            s.on_dispatched("T", i, 1)
        done.set()

    threading.Thread(target=dispatcher).start()
    await r.wait(50)
    assert done.is_set() and sorted(int(n) for n in r.names) == list(range(50))
    # no drain left pending: a later arrival still gets through
    s.hold(KEY, 1, 10.0, r.run("late"), end(1))
    threading.Thread(target=s.on_dispatched, args=("T", 0, 2)).start()
    await r.wait(51)
    assert r.names[-1] == "late"


async def test_hold_needs_start() -> None:
    s = PullRequestHoldService()
    with pytest.raises(AssertionError, match="start"):
        s.hold(KEY, 0, 1.0, lambda: None, lambda: 0)
