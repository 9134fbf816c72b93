"""RouteInfo: registration, routes, slaves, expiry, unregistering, TBW102 fallback."""

from __future__ import annotations

from rocketlite.namesrv.route_info import RouteInfo
from rocketlite.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper


def wrapper(*topics: str, counter: int = 1, queues: int = 4) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topicConfigTable={t: TopicConfig(topicName=t, readQueueNums=queues, writeQueueNums=queues)
                          for t in topics},
        dataVersion=DataVersion(counter=counter, timestamp=1),
    )


def register(r: RouteInfo, name: str, addr: str, bid: int, w: TopicConfigSerializeWrapper | None,
             now: int = 0, cluster: str = "C") -> tuple[str | None, str | None]:
    return r.register_broker(cluster=cluster, broker_addr=addr, broker_name=name, broker_id=bid,
                             ha_server_addr=addr.replace("109", "119"), topics=w, now_ms=now)


def test_master_topics_make_routes() -> None:
    r = RouteInfo(auto_create_route=False)
    register(r, "a", "h:10911", 0, wrapper("T1", "T2"))
    register(r, "b", "h:10921", 0, wrapper("T1", queues=8))
    route = r.pick_route("T1")
    assert route is not None
    assert [q.brokerName for q in route.queueDatas] == ["a", "b"]
    assert [q.writeQueueNums for q in route.queueDatas] == [4, 8]
    assert [b.brokerAddrs for b in route.brokerDatas] == [{0: "h:10911"}, {0: "h:10921"}]
    assert r.pick_route("nope") is None
    assert r.topic_list().topicList == {"T1", "T2"}
    info = r.cluster_info()
    assert info.clusterAddrTable == {"C": {"a", "b"}}


def test_slave_learns_its_master_and_does_not_change_topics() -> None:
    r = RouteInfo(auto_create_route=False)
    register(r, "a", "h:10911", 0, wrapper("T1"))
    master, ha = register(r, "a", "s:10911", 1, wrapper("Other"))
    assert master == "h:10911" and ha == "h:11911"
    route = r.pick_route("T1")
    assert route is not None and route.brokerDatas[0].brokerAddrs == {0: "h:10911", 1: "s:10911"}
    assert r.pick_route("Other") is None and "Other" not in r.topic_queues


def test_new_data_version_replaces_topics() -> None:
    r = RouteInfo(auto_create_route=False)
    register(r, "a", "h:10911", 0, wrapper("T1", "T2", counter=1))
    register(r, "a", "h:10911", 0, wrapper("T2", counter=2))
    assert r.pick_route("T1") is None and r.pick_route("T2") is not None


def test_silent_broker_expires_with_its_queues() -> None:
    r = RouteInfo(auto_create_route=False)
    register(r, "a", "h:10911", 0, wrapper("T1"), now=0)
    register(r, "b", "h:10921", 0, wrapper("T1"), now=0)
    assert r.scan_inactive(100_000) == []
    r.heartbeat("h:10921", 100_000)
    assert r.scan_inactive(120_001) == ["h:10911"]
    route = r.pick_route("T1")
    assert route is not None and [b.brokerName for b in route.brokerDatas] == ["b"]
    assert r.cluster_info().clusterAddrTable == {"C": {"b"}}
    assert r.scan_inactive(300_000) == ["h:10921"]
    assert r.pick_route("T1") is None and r.topic_queues == {} and r.clusters == {}


def test_unregister_and_auto_create_route() -> None:
    r = RouteInfo(auto_create_route=True)
    register(r, "a", "h:10911", 0, wrapper("TBW102", "T1", queues=8))
    fallback = r.pick_route("BrandNew")
    assert fallback is not None and fallback.brokerDatas[0].brokerName == "a"
    # write-only (consumers see no queue), as many queues as a producer asks the broker to make
    assert [(q.perm, q.readQueueNums, q.writeQueueNums) for q in fallback.queueDatas] == [(2, 0, 4)]
    assert r.topic_queues["TBW102"]["a"].writeQueueNums == 8  # the template is left as it was
    assert r.pick_route("%RETRY%G") is None and r.pick_route("%DLQ%G") is None
    r.unregister_broker("C", "h:10911", "a", 0)
    assert r.pick_route("T1") is None and r.pick_route("BrandNew") is None
    assert r.brokers == {} and r.live == {}


def bound(r: RouteInfo, name: str, addr: str, bid: int, w: TopicConfigSerializeWrapper | None,
          channel: object) -> None:
    r.register_broker(cluster="C", broker_addr=addr, broker_name=name, broker_id=bid,
                      ha_server_addr="", topics=w, now_ms=0, channel=channel)


def test_a_closed_channel_removes_its_master_and_the_slave_keeps_the_queues() -> None:
    r = RouteInfo(auto_create_route=False)
    m_conn, s_conn, other = object(), object(), object()
    bound(r, "a", "m:1", 0, wrapper("T1"), m_conn)
    bound(r, "a", "s:1", 1, wrapper("T1"), s_conn)
    assert r.channel_closed(other) == []  # a client's connection: nothing bound to it
    assert r.channel_closed(m_conn) == ["m:1"]
    route = r.pick_route("T1")
    assert route is not None and route.brokerDatas[0].brokerAddrs == {1: "s:1"}
    assert [q.brokerName for q in route.queueDatas] == ["a"]  # consumers read from the slave
    assert set(r.live) == {"s:1"} and r.channel_closed(m_conn) == []
    assert r.channel_closed(s_conn) == ["s:1"]  # the last address: group, queues, cluster go
    assert r.pick_route("T1") is None
    assert r.brokers == {} and r.clusters == {} and r.topic_queues == {} and r.by_channel == {}


def test_a_closed_slave_channel_leaves_the_master_route() -> None:
    r = RouteInfo(auto_create_route=False)
    m_conn, s_conn = object(), object()
    bound(r, "a", "m:1", 0, wrapper("T1"), m_conn)
    bound(r, "a", "s:1", 1, None, s_conn)
    assert r.channel_closed(s_conn) == ["s:1"]
    route = r.pick_route("T1")
    assert route is not None and route.brokerDatas[0].brokerAddrs == {0: "m:1"}
    assert r.cluster_info().clusterAddrTable == {"C": {"a"}}


def test_a_broker_registered_again_on_a_new_channel_stays_when_the_old_one_closes() -> None:
    r = RouteInfo(auto_create_route=False)
    old, new, hb = object(), object(), object()
    bound(r, "a", "m:1", 0, wrapper("T1"), old)
    bound(r, "b", "n:1", 0, wrapper("T1"), old)  # two brokers on one channel (one process)
    bound(r, "a", "m:1", 0, wrapper("T1"), new)
    assert r.channel_closed(old) == ["n:1"]
    route = r.pick_route("T1")
    assert route is not None and [b.brokerName for b in route.brokerDatas] == ["a"]
    # a heartbeat moves the binding too; a registration without a channel keeps it
    assert r.heartbeat("m:1", 5, hb)
    register(r, "a", "m:1", 0, wrapper("T1"), now=6)
    assert r.channel_closed(new) == []
    assert r.channel_closed(hb) == ["m:1"] and r.live == {} and r.by_channel == {}


def test_unregister_and_expiry_unbind_the_channel() -> None:
    r = RouteInfo(auto_create_route=False)
    conn = object()
    bound(r, "a", "m:1", 0, wrapper("T1"), conn)
    r.unregister_broker("C", "m:1", "a", 0)
    assert r.by_channel == {}
    bound(r, "a", "m:1", 0, wrapper("T1"), conn)
    assert r.scan_inactive(10**9) == ["m:1"]
    assert r.by_channel == {} and r.channel_closed(conn) == []
    bound(r, "a", "m:1", 0, wrapper("T1"), conn)  # back: bound again, removed by the close
    assert r.channel_closed(conn) == ["m:1"] and r.pick_route("T1") is None
