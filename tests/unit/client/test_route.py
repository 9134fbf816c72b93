"""Route → publish/subscribe queues (Java topicRouteData2TopicPublishInfo / SubscribeInfo), round robin."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.client.errors import MQClientError
from rocketlite.client.route import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    NoRouteError,
    RouteError,
    broker_addresses,
    is_readable,
    is_writeable,
    master_address,
    publish_info,
    subscribe_queues,
)
from rocketlite.common.errors import RocketliteError
from rocketlite.protocol.bodies import BrokerData, MessageQueue, QueueData, TopicRouteData

RW = PERM_READ | PERM_WRITE


def route(*queues: tuple[str, int, int, int], masters: dict[str, dict[int, str]] | None = None,
          order: str | None = None) -> TopicRouteData:
    """queues: (broker, read, write, perm); every broker gets a master unless ``masters`` says otherwise."""
    if masters is None:
        masters = {b: {0: f"{b}:10911"} for b, *_ in queues}
    return TopicRouteData(
        queueDatas=[QueueData(brokerName=b, readQueueNums=r, writeQueueNums=w, perm=p)
                    for b, r, w, p in queues],
        brokerDatas=[BrokerData(brokerName=b, cluster="C", brokerAddrs=a) for b, a in masters.items()],
        orderTopicConf=order,
    )


def ids(qs: tuple[MessageQueue, ...] | list[MessageQueue]) -> list[tuple[str, int]]:
    return [(q.brokerName, q.queueId) for q in qs]


def test_perm_name() -> None:
    assert (PERM_READ, PERM_WRITE, PERM_INHERIT) == (4, 2, 1)
    assert is_readable(6) and is_writeable(6)
    assert is_readable(4) and not is_writeable(4)
    assert not is_readable(2) and is_writeable(2)
    assert not is_readable(1) and not is_writeable(1)


def test_publish_queues_sorted_by_broker_then_id() -> None:
    info = publish_info("T", route(("c", 4, 2, RW), ("a", 4, 3, RW), ("b", 1, 1, RW)))
    assert ids(info.queues) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("c", 0), ("c", 1)]
    assert all(q.topic == "T" for q in info.queues)
    assert info.ok and not info.ordered


def test_publish_sort_is_javas_utf16_order_and_route_is_not_modified() -> None:
    # U+FF5E sorts before U+1F600 by code point but after it by UTF-16 code unit (0xFF5E > 0xD83D)
    r = route(("\U0001f600", 1, 1, RW), ("\uff5e", 1, 1, RW), ("A", 1, 1, RW))
    info = publish_info("T", r)
    assert [q.brokerName for q in info.queues] == ["A", "\U0001f600", "\uff5e"]
    assert [q.brokerName for q in r.queueDatas] == ["\U0001f600", "\uff5e", "A"]


def test_publish_skips_unwriteable_and_masterless_brokers() -> None:
    r = route(("a", 4, 4, PERM_READ), ("b", 4, 2, RW), ("c", 4, 2, RW), ("d", 4, 2, PERM_WRITE),
              ("e", 4, 2, RW),
              masters={"a": {0: "a:1"}, "b": {0: "b:1"}, "c": {1: "c:slave"}, "d": {0: "d:1", 1: "d:2"}})
    info = publish_info("T", r)  # c has only a slave, e has no broker data, a is read-only
    assert ids(info.queues) == [("b", 0), ("b", 1), ("d", 0), ("d", 1)]


def test_publish_without_usable_queues_is_not_ok() -> None:
    info = publish_info("T", route(("a", 4, 4, PERM_READ)))
    assert not info.ok and info.queues == ()
    with pytest.raises(NoRouteError) as exc:
        info.select_one()
    assert isinstance(exc.value, MQClientError) and isinstance(exc.value, RocketliteError)
    assert not publish_info("T", TopicRouteData()).ok


def test_order_topic_conf_branch() -> None:
    # listed order kept, no perm / master checks, queue data ignored
    r = route(("a", 8, 8, PERM_READ), masters={}, order="b:2;a:3;")
    info = publish_info("T", r)
    assert info.ordered and info.ok
    assert ids(info.queues) == [("b", 0), ("b", 1), ("a", 0), ("a", 1), ("a", 2)]
    assert info.route is r
    assert not publish_info("T", route(("a", 1, 1, RW), order="")).ordered


@pytest.mark.parametrize("conf", ["a", "a:x", ":4", "a:b:4", "a:4;b"])
def test_bad_order_topic_conf(conf: str) -> None:
    with pytest.raises(RouteError, match="orderTopicConf"):
        publish_info("T", route(order=conf))


def test_absurd_queue_count_is_refused() -> None:
    with pytest.raises(RouteError, match="queues"):
        publish_info("T", route(("a", 1, 10**9, RW)))
    with pytest.raises(RouteError, match="queues"):
        publish_info("T", route(order="a:1000000000"))


def test_round_robin_starts_after_start_and_wraps() -> None:
    info = publish_info("T", route(("a", 2, 2, RW), ("b", 1, 1, RW)), start=0)
    assert ids([info.select_one() for _ in range(4)]) == [("a", 1), ("b", 0), ("a", 0), ("a", 1)]


def test_counter_does_not_wrap_at_31_bits() -> None:
    # Java masks to 31 bits, which skews the rotation once every 2**31 sends; this counter keeps counting
    info = publish_info("T", route(("a", 3, 3, RW)), start=0x7FFFFFFE)
    assert [info.next_index() for _ in range(3)] == [0x7FFFFFFF, 0x80000000, 0x80000001]


@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.integers(0, 2**31), st.integers(1, 4))
def test_round_robin_visits_every_queue_evenly(sizes: list[int], start: int, rounds: int) -> None:
    info = publish_info("T", route(*((f"b{i}", n, n, RW) for i, n in enumerate(sizes))), start=start)
    n = len(info.queues)
    seen = Counter(info.select_one() for _ in range(n * rounds))
    assert set(seen) == set(info.queues)
    assert set(seen.values()) == {rounds}


def test_random_start() -> None:
    r = route(("a", 16, 16, RW))
    firsts = {publish_info("T", r).select_one().queueId for _ in range(50)}
    assert len(firsts) > 1


def test_last_broker_is_avoided_when_another_exists() -> None:
    info = publish_info("T", route(("a", 4, 4, RW), ("b", 1, 1, RW)))
    for _ in range(20):
        assert info.select_one("a").brokerName == "b"
        assert info.select_one("b").brokerName == "a"
    assert info.select_one("unknown").brokerName in {"a", "b"}


def test_last_broker_used_when_it_is_the_only_one() -> None:
    info = publish_info("T", route(("a", 3, 3, RW)), start=0)
    assert ids([info.select_one("a") for _ in range(3)]) == [("a", 1), ("a", 2), ("a", 0)]


def test_broker_names_and_queues() -> None:
    info = publish_info("T", route(("b", 1, 2, RW), ("a", 1, 1, RW)))
    assert info.broker_names() == ("a", "b")
    assert ids(info.broker_queues("b")) == [("b", 0), ("b", 1)]
    assert info.broker_queues("x") == ()
    assert "ordered=False" in repr(info)


def test_reset_index_keeps_round_robin_working() -> None:
    info = publish_info("T", route(("a", 4, 4, RW)))
    info.reset_index()
    assert Counter(info.select_one() for _ in range(8)) == dict.fromkeys(info.queues, 2)


def test_subscribe_queues() -> None:
    r = route(("b", 2, 8, RW), ("a", 3, 1, PERM_READ), ("c", 4, 4, PERM_WRITE), ("b", 1, 1, RW),
              masters={"a": {1: "a:slave"}})
    # readable only, readQueueNums each, masterless brokers kept, duplicates merged, sorted
    assert ids(subscribe_queues("T", r)) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    assert subscribe_queues("T", route(("a", 2, 2, RW), order="a:9")) == [
        MessageQueue("T", "a", 0), MessageQueue("T", "a", 1)]
    assert subscribe_queues("T", TopicRouteData()) == []


def test_addresses() -> None:
    r = route(("a", 1, 1, RW), masters={"a": {0: "h:1", 1: "h:2"}, "s": {1: "h:3"}})
    assert broker_addresses(r) == {"a": {0: "h:1", 1: "h:2"}, "s": {1: "h:3"}}
    broker_addresses(r)["a"][0] = "changed"
    assert master_address(r, "a") == "h:1"
    assert master_address(r, "s") is None
    assert master_address(r, "nope") is None
