"""The server commands as real processes: ``rocketlite start`` (NameServer and broker in one
process) answers over Remoting and stops cleanly on SIGTERM; ``rocketlite namesrv`` and
``rocketlite broker -c broker.conf`` run apart and the broker registers."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import grpc
import pytest

from brokerhelp import ServerProcess, free_port, pull_queue, send_request
from rocketlite.formats.message_id import decode_message_id
from rocketlite.protocol.bodies import ClusterInfo, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.proxy.pb import definition_pb2 as dpb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.pb.service_pb2_grpc import MessagingServiceStub
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration


async def _send_and_route(broker_addr: str, ns_addr: str) -> tuple[RemotingCommand, TopicRouteData]:
    client = RemotingClient()
    try:
        r = await client.invoke(broker_addr, send_request("CliTopic", b"over the wire", 0), 10.0)
        assert r.code == ResponseCode.SUCCESS, r.remark
        got = []
        for _ in range(500):
            got = await pull_queue(client, broker_addr, "CliTopic", 0)
            if got:
                break
            await asyncio.sleep(0.01)
        assert [m.body for m in got] == [b"over the wire"]
        route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "CliTopic"})
        for _ in range(500):
            rr = await client.invoke(ns_addr, route, 10.0)
            data = TopicRouteData.from_json(rr.body) if rr.code == 0 else None
            if data is not None and data.queueDatas[0].writeQueueNums == 4:
                return r, data
            await asyncio.sleep(0.01)
        raise AssertionError("the auto-created topic never reached the NameServer")
    finally:
        await client.close()


def test_start_serves_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ns_port, broker_port = free_port(), free_port()
    args = ["start", "--grpc-port", "0", "--store", str(store),
            "--namesrv-port", str(ns_port), "--broker-port", str(broker_port)]
    with ServerProcess(args, tmp_path / "start.log") as p:
        line = p.wait_ready()
        assert f"127.0.0.1:{ns_port}" in line and str(broker_port) in line
        assert (store / "abort").exists()
        reply, route = asyncio.run(_send_and_route(f"127.0.0.1:{broker_port}",
                                                   f"127.0.0.1:{ns_port}"))
        _, port, _ = decode_message_id(reply.ext_fields["msgId"])
        assert port == broker_port
        assert route.brokerDatas[0].brokerAddrs == {0: f"127.0.0.1:{broker_port}"}
        assert p.stop() == 0, p.log()
    assert not (store / "abort").exists()
    assert (store / "config" / "topics.json").exists()
    assert "CliTopic" in (store / "config" / "topics.json").read_text()


def test_the_ready_line_names_the_port_bound_for_port_zero(tmp_path: Path) -> None:
    ns_port = free_port()
    args = ["start", "--grpc-port", "0", "--store", str(tmp_path / "store"),
            "--namesrv-port", str(ns_port), "--broker-port", "0"]
    with ServerProcess(args, tmp_path / "start.log") as p:
        line = p.wait_ready()
        match = re.search(r"broker \S+ at [\d.]+:(\d+)", line)
        assert match is not None, line
        port = int(match.group(1))
        assert port != 0
        reply, route = asyncio.run(_send_and_route(f"127.0.0.1:{port}", f"127.0.0.1:{ns_port}"))
        assert decode_message_id(reply.ext_fields["msgId"])[1] == port
        assert route.brokerDatas[0].brokerAddrs == {0: f"127.0.0.1:{port}"}
        grpc_match = re.search(r"gRPC [\d.]+:(\d+)", line)
        assert grpc_match is not None and int(grpc_match.group(1)) != 0, line
        assert asyncio.run(_grpc_answers(int(grpc_match.group(1))))
        assert p.stop() == 0, p.log()


async def _grpc_answers(port: int) -> bool:
    """The gRPC front answers an RPC on ``port`` (with a v2 status)."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        r = await MessagingServiceStub(channel).SyncLiteSubscription(
            spb.SyncLiteSubscriptionRequest(), timeout=10)
        return r.status.code == dpb.Code.NOT_IMPLEMENTED
    finally:
        await channel.close()


def test_no_grpc_leaves_the_front_out(tmp_path: Path) -> None:
    args = ["start", "--no-grpc", "--store", str(tmp_path / "store"),
            "--namesrv-port", str(free_port()), "--broker-port", "0"]
    with ServerProcess(args, tmp_path / "start.log") as p:
        line = p.wait_ready()
        assert "gRPC" not in line, line
        assert p.stop() == 0, p.log()


async def _cluster(ns_addr: str) -> ClusterInfo:
    client = RemotingClient()
    try:
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        for _ in range(1000):
            r = await client.invoke(ns_addr, cmd, 10.0)
            info = ClusterInfo.from_json(r.body)
            if info.brokerAddrTable:
                return info
            await asyncio.sleep(0.01)
        raise AssertionError("the broker never registered")
    finally:
        await client.close()


def test_namesrv_and_broker_as_separate_processes(tmp_path: Path) -> None:
    ns_port, broker_port = free_port(), free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName=TestCluster\n"
        "brokerName=broker-x\n"
        "brokerId=0\n"
        f"namesrvAddr=127.0.0.1:{ns_port}\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
        f"listenPort={broker_port}\n"
        "mappedFileSizeCommitLog=1048576\n"
        "flushDiskType=ASYNC_FLUSH\n",
        encoding="utf-8",
    )
    with ServerProcess(["namesrv", "--port", str(ns_port)], tmp_path / "ns.log") as ns, \
            ServerProcess(["broker", "--grpc-port", "0", "-c", str(conf)], tmp_path / "broker.log") as broker:
        ns.wait_ready()
        broker.wait_ready()
        info = asyncio.run(_cluster(f"127.0.0.1:{ns_port}"))
        assert info.clusterAddrTable == {"TestCluster": {"broker-x"}}
        assert info.brokerAddrTable["broker-x"].brokerAddrs == {0: f"127.0.0.1:{broker_port}"}
        assert broker.stop() == 0, broker.log()
        assert ns.stop() == 0, ns.log()
    assert not (tmp_path / "store" / "abort").exists()


def test_a_bad_broker_conf_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerId=-1\n", encoding="utf-8")
    with ServerProcess(["broker", "--grpc-port", "0", "-c", str(conf), "--store", str(tmp_path / "s")],
                       tmp_path / "b.log") as p:
        code = p.wait(60)
    assert code != 0
    assert "brokerId" in p.log()
    assert not any("rocketlite ready" in x for x in p.lines)
