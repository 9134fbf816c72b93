"""Send-latency fault tolerance (Java MQFaultStrategy + LatencyFaultToleranceImpl) on a fake clock."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.client.fault import (
    ISOLATION_LATENCY_MS_5,
    LATENCY_MAX_MS,
    LATENCY_MAX_MS_5,
    NOT_AVAILABLE_DURATION_MS,
    NOT_AVAILABLE_DURATION_MS_5,
    LatencyFaultTolerance,
    select_queue,
)
from rocketlite.client.route import PERM_READ, PERM_WRITE, NoRouteError, TopicPublishInfo, publish_info
from rocketlite.protocol.bodies import BrokerData, QueueData, TopicRouteData


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms / 1000.0


def make(clock: Clock, max_items: int = 1024) -> LatencyFaultTolerance:
    return LatencyFaultTolerance(clock=clock, max_items=max_items)


def info(*brokers: tuple[str, int], start: int | None = None) -> TopicPublishInfo:
    r = TopicRouteData(
        queueDatas=[QueueData(brokerName=b, readQueueNums=n, writeQueueNums=n, perm=PERM_READ | PERM_WRITE)
                    for b, n in brokers],
        brokerDatas=[BrokerData(brokerName=b, brokerAddrs={0: f"{b}:1"}) for b, _ in brokers],
    )
    return publish_info("T", r, start=start)


def test_tables_are_javas_4x_and_5x() -> None:
    assert LATENCY_MAX_MS == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert NOT_AVAILABLE_DURATION_MS == (0, 0, 30000, 60000, 120000, 180000, 600000)
    assert LATENCY_MAX_MS_5 == (50, 100, 550, 1800, 3000, 5000, 15000)
    assert NOT_AVAILABLE_DURATION_MS_5 == (0, 0, 2000, 5000, 6000, 10000, 30000)


@pytest.mark.parametrize(("latency", "duration"), [
    (0, 0), (49, 0), (50, 0), (99, 0), (100, 0), (549, 0), (550, 30000), (999, 30000), (1000, 60000),
    (1999, 60000), (2000, 120000), (2999, 120000), (3000, 180000), (14999, 180000), (15000, 600000),
    (10**9, 600000),
])
def test_duration_per_bucket(latency: int, duration: int) -> None:
    clock = Clock()
    f = make(clock)
    assert f.not_available_duration(latency) == duration
    f.update("a", latency, False)
    assert "a" in f
    if duration:
        assert not f.is_available("a")
        clock.advance(duration - 1)
        assert not f.is_available("a")
    clock.advance(1)
    assert f.is_available("a")  # available again once the duration has passed


def test_unknown_broker_is_available() -> None:
    assert make(Clock()).is_available("x")


def test_isolation_counts_as_the_isolation_latency() -> None:
    clock = Clock()
    f = make(clock)
    f.update("a", 3, True)  # Java 4.x: isolation ? 30000 -> the 15000 bucket -> 600 s
    clock.advance(599_999)
    assert not f.is_available("a")
    clock.advance(1)
    assert f.is_available("a")
    f5 = LatencyFaultTolerance(clock=clock, latency_max=LATENCY_MAX_MS_5,
                               not_available_duration=NOT_AVAILABLE_DURATION_MS_5,
                               isolation_latency_ms=ISOLATION_LATENCY_MS_5)
    f5.update("a", 3, True)  # 5.x: 10000 -> the 5000 bucket -> 10 s
    clock.advance(9_999)
    assert not f5.is_available("a")
    clock.advance(1)
    assert f5.is_available("a")


def test_a_later_report_replaces_the_deadline() -> None:
    clock = Clock()
    f = make(clock)
    f.update("a", 20000, False)
    assert not f.is_available("a")
    f.update("a", 10, False)  # a fast send: available at once (Java 4.x overwrites startTimestamp)
    assert f.is_available("a")


def test_remove() -> None:
    clock = Clock()
    f = make(clock)
    f.update("a", 20000, True)
    f.remove("a")
    f.remove("never")
    assert f.is_available("a") and len(f) == 0


def test_bad_tables_are_refused() -> None:
    with pytest.raises(ValueError, match="length"):
        LatencyFaultTolerance(latency_max=(1, 2), not_available_duration=(1,))
    with pytest.raises(ValueError, match="ascending"):
        LatencyFaultTolerance(latency_max=(2, 1), not_available_duration=(1, 1))
    with pytest.raises(ValueError, match="max_items"):
        LatencyFaultTolerance(max_items=0)


def test_table_is_bounded_and_drops_the_least_recently_reported() -> None:
    clock = Clock()
    f = make(clock, max_items=3)
    for b in "abc":
        f.update(b, 20000, False)
    f.update("a", 20000, False)  # a is now the newest; b the oldest
    f.update("d", 20000, False)
    assert len(f) == 3
    assert "b" not in f and f.is_available("b")
    assert all(x in f for x in "acd")
    assert "max_items=3" in repr(f)


@given(st.lists(st.text(min_size=1, max_size=3), max_size=60))
def test_table_never_exceeds_its_bound(names: list[str]) -> None:
    f = make(Clock(), max_items=8)
    for n in names:
        f.update(n, 600, False)
        assert len(f) <= 8
    recent = list(dict.fromkeys(reversed(names)))[:8]  # the 8 most recently reported brokers
    assert len(f) == len(recent) and all(n in f for n in recent)


def test_pick_one_at_least() -> None:
    clock = Clock()
    f = make(clock)
    assert f.pick_one_at_least() is None
    f.update("a", 20000, False)
    assert f.pick_one_at_least() == "a"  # a single broker is returned as is
    f.update("b", 600, False)
    f.update("c", 1000, False)
    f.update("d", 5000, False)
    # sorted: b(600) c(1000) d(5000) a(20000); picks rotate over the better half
    assert {f.pick_one_at_least() for _ in range(10)} == {"b", "c"}
    clock.advance(600_000)
    f.update("a", 20000, False)  # the others are available again now and sort first
    f.update("b", 20000, False)
    assert {f.pick_one_at_least() for _ in range(10)} == {"c", "d"}
    assert f.pick_one_at_least(among={"a", "b"}) in {"a", "b"}
    assert f.pick_one_at_least(among=("x",)) is None


def test_without_fault_select_queue_is_round_robin_avoiding_last_broker() -> None:
    i = info(("a", 2), ("b", 2))
    assert {select_queue(i, "a", None).brokerName for _ in range(10)} == {"b"}
    assert Counter(select_queue(i, None, None) for _ in range(8)) == dict.fromkeys(i.queues, 2)


def test_select_queue_skips_an_unavailable_broker() -> None:
    clock = Clock()
    f = make(clock)
    i = info(("a", 2), ("b", 2), ("c", 2))
    f.update("b", 20000, False)
    picks = Counter(select_queue(i, None, f) for _ in range(60))
    # every queue of a and c equally often: the queue after b's gets no extra share
    assert picks == dict.fromkeys(i.broker_queues("a") + i.broker_queues("c"), 15)
    clock.advance(600_000)
    assert {select_queue(i, None, f).brokerName for _ in range(60)} == {"a", "b", "c"}


def test_select_queue_all_available_visits_evenly() -> None:
    f = make(Clock())
    i = info(("a", 3), ("b", 1))
    f.update("a", 10, False)
    assert Counter(select_queue(i, None, f) for _ in range(12)) == dict.fromkeys(i.queues, 3)


def test_select_queue_prefers_another_available_broker_to_last_broker() -> None:
    f = make(Clock())
    i = info(("a", 2), ("b", 2), ("c", 2))
    f.update("c", 20000, True)
    f.update("a", 120, False)  # a failed fast: still available, but it was the last attempt's broker
    assert {select_queue(i, "a", f).brokerName for _ in range(20)} == {"b"}


def test_select_queue_uses_last_broker_when_it_is_the_only_available_one() -> None:
    f = make(Clock())
    i = info(("a", 2), ("b", 2))
    f.update("b", 20000, True)
    assert {select_queue(i, "a", f).brokerName for _ in range(20)} == {"a"}


def test_select_queue_when_every_broker_is_out_uses_the_least_bad() -> None:
    f = make(Clock())
    i = info(("a", 3), ("b", 2))
    f.update("a", 20000, False)
    f.update("b", 600, False)
    f.update("zz", 1, False)  # another topic's broker: available, but never chosen for this topic
    picks = Counter(select_queue(i, "b", f) for _ in range(20))
    assert {q.brokerName for q in picks} == {"b"}  # b (600 ms) beats a (20 s), even as last broker
    assert picks == dict.fromkeys(i.broker_queues("b"), 10)  # round robin among b's queues
    assert "zz" in f  # not forgotten, unlike Java's remove()


def test_select_queue_without_queues() -> None:
    empty = publish_info("T", TopicRouteData())
    with pytest.raises(NoRouteError):
        select_queue(empty, None, make(Clock()))
    with pytest.raises(NoRouteError):
        select_queue(empty, None, None)
