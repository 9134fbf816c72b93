"""The NameServer on loopback: a broker registers (plain and compressed), clients get routes in
the JSON form their version expects, KV config, unknown codes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketlite.namesrv.server import NameServer
from rocketlite.protocol import headers as h
from rocketlite.protocol.bodies import (
    ClusterInfo,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration


def register_cmd(compressed: bool) -> RemotingCommand:
    body = RegisterBrokerBody(topicConfigSerializeWrapper=TopicConfigSerializeWrapper(
        topicConfigTable={"TopicTest": TopicConfig(topicName="TopicTest", readQueueNums=4,
                                                   writeQueueNums=4)}))
    hdr = h.RegisterBrokerRequestHeader(
        brokerName="broker-a", brokerAddr="127.0.0.1:10911", clusterName="DefaultCluster",
        haServerAddr="127.0.0.1:10912", brokerId=0, compressed=compressed)
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, hdr.to_ext(),
                                   body=body.encode(compressed=compressed))


@pytest.mark.parametrize("compressed", [False, True])
async def test_register_then_route_in_both_json_forms(
    ns: tuple[NameServer, RemotingClient, str], compressed: bool
) -> None:
    _, client, addr = ns
    r = await client.invoke(addr, register_cmd(compressed), 5)
    assert r.code == ResponseCode.SUCCESS
    old = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    old.version = 121  # ali-ons
    r = await client.invoke(addr, old, 5)
    assert r.code == ResponseCode.SUCCESS and b'{0:"127.0.0.1:10911"}' in r.body
    new = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    new.version = 479
    r = await client.invoke(addr, new, 5)
    assert b'{"0":"127.0.0.1:10911"}' in r.body
    route = TopicRouteData.from_json(r.body)
    assert route.queueDatas[0].writeQueueNums == 4
    r = await client.invoke(addr, RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Missing"}), 5)
    assert r.code == ResponseCode.TOPIC_NOT_EXIST and "Missing" in (r.remark or "")
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
    assert ClusterInfo.from_json(r.body).clusterAddrTable == {"DefaultCluster": {"broker-a"}}


async def test_bad_register_header_is_an_error_reply(ns: tuple[NameServer, RemotingClient, str]) -> None:
    _, client, addr = ns
    r = await client.invoke(addr, RemotingCommand.request(
        RequestCode.REGISTER_BROKER, {"brokerName": "x", "brokerId": "zero"}), 5)
    remark = r.remark or ""
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert "brokerAddr" in remark or "brokerId" in remark
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC), 5)
    assert r.code == ResponseCode.SYSTEM_ERROR and "topic" in (r.remark or "")


async def test_kv_config_persists(ns: tuple[NameServer, RemotingClient, str], tmp_path: Path) -> None:
    _, client, addr = ns
    put = h.PutKVConfigRequestHeader(namespace="ORDER_TOPIC_CONFIG", key="T", value="broker-a:4")
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, put.to_ext()), 5)
    assert r.code == ResponseCode.SUCCESS
    get = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_KV_CONFIG, get), 5)
    assert r.ext_fields["value"] == "broker-a:4"
    again = NameServer("127.0.0.1", 0, kv_config_path=tmp_path / "kvConfig.json")
    again._load_kv()
    assert again.kv == {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}}
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, get), 5)
    assert r.code == ResponseCode.SUCCESS
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_KV_CONFIG, get), 5)
    assert r.code == ResponseCode.QUERY_NOT_FOUND


async def test_close_stops_the_scan_and_a_cancelled_close_stays_cancelled() -> None:
    server = NameServer("127.0.0.1", 0, scan_interval_s=60)
    await server.start()
    closing = asyncio.ensure_future(server.close())
    await asyncio.sleep(0)  # close() is now awaiting the cancelled scan task
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    await server.close()  # a second close finishes the job
    assert server._scan_task is not None and server._scan_task.done()


async def test_delete_topic_in_namesrv_of_one_cluster_then_all(
    ns: tuple[NameServer, RemotingClient, str]
) -> None:
    _, client, addr = ns
    for name, cluster, port in (("broker-a", "C1", 10911), ("broker-b", "C2", 10921)):
        body = RegisterBrokerBody(topicConfigSerializeWrapper=TopicConfigSerializeWrapper(
            topicConfigTable={t: TopicConfig(topicName=t) for t in ("TopicTest", "Kept")}))
        hdr = h.RegisterBrokerRequestHeader(
            brokerName=name, brokerAddr=f"127.0.0.1:{port}", clusterName=cluster,
            haServerAddr=f"127.0.0.1:{port + 1}", brokerId=0, compressed=False)
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.REGISTER_BROKER, hdr.to_ext(), body=body.encode(compressed=False)), 5)
        assert r.code == ResponseCode.SUCCESS

    async def route(topic: str) -> TopicRouteData | None:
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)
        return TopicRouteData.from_json(r.body) if r.code == ResponseCode.SUCCESS else None

    async def delete(ext: dict[str, str]) -> None:
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.DELETE_TOPIC_IN_NAMESRV, ext), 5)
        assert r.code == ResponseCode.SUCCESS

    await delete({"topic": "TopicTest", "clusterName": "C2"})
    got = await route("TopicTest")
    assert got is not None and [q.brokerName for q in got.queueDatas] == ["broker-a"]
    await delete({"topic": "TopicTest"})
    assert await route("TopicTest") is None
    await delete({"topic": "TopicTest"})  # unknown: SUCCESS all the same, as Java
    kept = await route("Kept")
    assert kept is not None and sorted(q.brokerName for q in kept.queueDatas) == [
        "broker-a", "broker-b"]
