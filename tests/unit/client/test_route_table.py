"""A client instance's route table (``client/route_table.py``): a route replaces a broker's
address map only when it changed (and says so, so the instance heartbeats the new broker), the
lookups requests are addressed by (master only, any replica, where to pull from), brokers no
route names are forgotten, a failed request's refresh is allowed once per gap and topic, and a
client follows at most ``MAX_TOPICS`` topics."""

from __future__ import annotations

import pytest

from rocketlite.client import route_table
from rocketlite.client.errors import MQClientError
from rocketlite.client.route_table import RouteTable
from rocketlite.protocol.bodies import BrokerData, TopicRouteData


def route(**brokers: dict[int, str]) -> TopicRouteData:
    return TopicRouteData(brokerDatas=[BrokerData(brokerName=n, cluster="C", brokerAddrs=a)
                                       for n, a in brokers.items()])


def test_learning_replaces_a_changed_map_and_says_so() -> None:
    t = RouteTable()
    assert t.put("T", route(a={0: "m:1", 1: "s:1"}))
    held = t.broker_addrs["a"]
    assert not t.learn_brokers(route(a={0: "m:1", 1: "s:1"}))  # the same addresses: no news
    assert t.learn_brokers(route(a={0: "m:2", 1: "s:1"}))  # a failover: news, and a new map
    assert t.broker_addrs["a"] is not held and t.broker_addr("a") == "m:2"
    assert t.routes == {"T": route(a={0: "m:1", 1: "s:1"})}  # learn_brokers follows no topic


def test_lookups_by_role() -> None:
    t = RouteTable()
    t.learn_brokers(route(a={0: "m", 1: "s1", 2: "s2"}, b={1: "s1b", 3: "s3b"}))
    assert t.broker_addr("a") == "m" and t.broker_addr("a", master=False) == "m"
    assert t.broker_addr("b") is None and t.broker_addr("b", master=False) == "s1b"
    assert t.broker_addr("x") is None and t.broker_addr_in_subscribe("x", 0) is None
    assert t.broker_addr_in_subscribe("a", 0) == ("m", False)
    assert t.broker_addr_in_subscribe("a", 1) == ("s1", True)
    assert t.broker_addr_in_subscribe("b", 2) == ("s3b", True)  # the next id
    assert t.broker_addr_in_subscribe("a", 5) == ("m", False)  # else the master
    assert t.broker_addr_in_subscribe("b", 7) == ("s1b", True)  # else the lowest id
    assert t.all_broker_addrs() == ["m", "s1", "s1b", "s2", "s3b"]


def test_brokers_no_route_names_are_forgotten() -> None:
    t = RouteTable()
    t.put("T", route(a={0: "m:1"}))
    t.learn_brokers(route(gone={0: "m:9"}))
    t.forget_unused_brokers()
    assert set(t.broker_addrs) == {"a"}


def test_a_refresh_is_due_once_per_gap_and_topic() -> None:
    t = RouteTable()
    assert t.refresh_due("T", 10.0, 1.0)
    assert not t.refresh_due("T", 10.5, 1.0)
    assert t.refresh_due("U", 10.5, 1.0)
    assert t.refresh_due("T", 11.0, 1.0)
    assert not t.refresh_due("T", 11.9, 1.0)


def test_at_most_max_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(route_table, "MAX_TOPICS", 2)
    t = RouteTable()
    t.put("T1", route(a={0: "m"}))
    t.put("T2", route(a={0: "m"}))
    t.put("T1", route(a={0: "m2"}))  # a followed topic's route is replaced
    with pytest.raises(MQClientError, match="already follows 2 topics"):
        t.put("T3", route(a={0: "m"}))
    assert set(t.routes) == {"T1", "T2"}
