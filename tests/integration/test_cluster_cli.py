"""``rocketlite cluster up|status|down`` with real processes: a NameServer, two broker groups
of a master and a slave each and the dashboard on loopback; a topic routed to both groups carries
messages; each broker's ``/metrics`` on its own port shows its own traffic under its own name;
``down`` stops exactly the recorded processes, and leaves alone a PID whose start time differs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from brokerhelp import scrape_metrics
from clusterhelp import cli, cluster_base, status_json
from rocketlite.cli.cluster_commands import proc_start_time
from rocketlite.cli.cluster_plan import ClusterState, NodeRecord, plan
from rocketlite.cli.main import app
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.protocol.bodies import ClusterInfo, ConsumeFromWhere, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import GetRouteInfoRequestHeader
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration
runner = CliRunner()
TOPIC = "ClusterT"
N = 12



async def namesrv_view(ns: str, topic: str) -> tuple[ClusterInfo, TopicRouteData]:
    client = RemotingClient()
    try:
        r = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert r.code == ResponseCode.SUCCESS, r.remark
        info = ClusterInfo.from_json(r.body)
        r = await client.invoke(ns, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext()))
        assert r.code == ResponseCode.SUCCESS, r.remark
        return info, TopicRouteData.from_json(r.body)
    finally:
        await client.close()


async def send_and_receive(ns: str) -> tuple[set[str], list[bytes]]:
    """N messages through the route; the groups they went to and the bodies read back."""
    sent_to: set[str] = set()
    async with Producer("ClusterPG", namesrv_addr=ns) as p:
        for i in range(N):
            r = await p.send(Message(TOPIC, b"m%d" % i))
            sent_to.add(r.queue.brokerName)
    got: list[bytes] = []
    c = LitePullConsumer("ClusterCG", namesrv_addr=ns,
                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(TOPIC)
    await c.start()
    try:
        deadline = time.monotonic() + 20
        while len(got) < N and time.monotonic() < deadline:
            got += [m.body for m in await c.poll(1.0)]
    finally:
        await c.shutdown()
    return sent_to, got


def admin_json(*args: str) -> Any:
    r = runner.invoke(app, ["admin", *args, "--json"])
    assert r.exit_code == 0, (args, r.output)
    return json.loads(r.stdout)


def admin_over_two_groups(ns: str) -> None:
    """``rocketlite admin`` across both groups: every broker listed with its role, a topic's
    messages read from both, a key found on both brokers, each master's slave."""
    entries = admin_json("clusterList", "-n", ns)
    assert {(e["brokerName"], e["brokerId"]): e["role"] for e in entries} == {
        ("broker-a", 0): "ASYNC_MASTER", ("broker-a", 1): "SLAVE",
        ("broker-b", 0): "ASYNC_MASTER", ("broker-b", 1): "SLAVE"}
    assert all(e["error"] is None for e in entries)
    msgs = admin_json("printMsg", "-n", ns, "-t", TOPIC, "--body", "text")
    assert sorted(m["body"] for m in msgs) == sorted(f"m{i}" for i in range(N))
    assert {m["brokerName"] for m in msgs} == {"broker-a", "broker-b"}
    for broker in ("broker-a", "broker-b"):
        sent = admin_json("sendMessage", "-n", ns, "-t", TOPIC, "-p", broker, "-k", "dup",
                          "-b", broker, "-i", "1")
        assert (sent["brokerName"], sent["queueId"]) == (broker, 1)
    deadline = time.monotonic() + 20
    while len(found := admin_json("queryMsgByKey", "-n", ns, "-t", TOPIC, "-k", "dup")) < 2:
        assert time.monotonic() < deadline, found  # the index is written just after the send
        time.sleep(0.1)
    assert sorted(m["brokerName"] for m in found) == ["broker-a", "broker-b"]
    while True:  # each slave connects to its master's HA port
        views = admin_json("haStatus", "-n", ns, "-c", "DefaultCluster")
        if [(v["master"], len(v["slaves"])) for v in views] == [(True, 1), (True, 1)]:
            break
        assert time.monotonic() < deadline, views
        time.sleep(0.1)


def up(d: Path, brokers: int, replicas: int) -> tuple[int, subprocess.CompletedProcess[str]]:
    """``cluster up`` of ``brokers`` groups of ``replicas`` in ``d`` with the topic TOPIC on
    free ports: the base port and the command's outcome."""
    base = cluster_base(brokers=brokers, replicas=replicas)
    return base, cli("cluster", "up", "--dir", str(d), "--brokers", str(brokers), "--replicas",
                     str(replicas), "--base-port", str(base), "--topic", TOPIC, "--queues", "2",
                     "--ready-timeout", "30")


def test_cluster_up_route_messages_down(tmp_path: Path) -> None:
    d = tmp_path / "c"
    began = time.monotonic()
    base, r = up(d, 2, 2)
    took = time.monotonic() - began
    state = ClusterState.read(d)
    assert state is not None
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        assert "6 processes ready" in r.stdout, r.stdout
        pids = [n.pid for n in state.nodes]
        assert all(pid is not None and proc_start_time(pid) is not None for pid in pids)
        assert len(set(pids)) == 6
        assert state.nodes[-1].name == "dashboard"
        ns = f"127.0.0.1:{base}"
        assert state.namesrv_addr == ns and state.topics == [TOPIC]

        info, route = asyncio.run(namesrv_view(ns, TOPIC))
        assert info.clusterAddrTable == {"DefaultCluster": {"broker-a", "broker-b"}}
        assert {name: sorted(b.brokerAddrs) for name, b in info.brokerAddrTable.items()} == {
            "broker-a": [0, 1], "broker-b": [0, 1]}
        assert info.brokerAddrTable["broker-a"].brokerAddrs[1] == f"127.0.0.1:{base + 4}"
        assert {(q.brokerName, q.writeQueueNums) for q in route.queueDatas} == {
            ("broker-a", 2), ("broker-b", 2)}
        for node in ("broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1"):
            assert (d / node / "store").is_dir() and (d / node / f"{node}.log").is_file()
        conf = (d / "broker-b-1" / "broker.conf").read_text()
        assert "brokerRole=SLAVE" in conf and f"haMasterAddress=127.0.0.1:{base + 8}" in conf

        sent_to, got = asyncio.run(send_and_receive(ns))
        assert sent_to == {"broker-a", "broker-b"}
        assert sorted(got) == sorted(b"m%d" % i for i in range(N))
        admin_over_two_groups(ns)

        status = runner.invoke(app, ["cluster", "status", "--dir", str(d), "--json"])
        assert status.exit_code == 0, status.output
        view = json.loads(status.output)
        assert [n["running"] for n in view["nodes"]] == [True] * 6
        assert [n["pid"] for n in view["nodes"]] == pids

        again = cli("cluster", "up", "--dir", str(d), "--base-port", str(base + 100))
        assert again.returncode == 1, again.stderr
        assert again.stderr.startswith("error: ") and "running cluster" in again.stderr
    finally:
        down = runner.invoke(app, ["cluster", "down", "--dir", str(d), "--timeout", "15"])
    assert down.exit_code == 0, down.output
    assert down.output.count("stopped (pid") == 6, down.output
    for pid in pids:
        assert proc_start_time(pid) is None, f"pid {pid} still runs"
    after = ClusterState.read(d)
    assert after is not None and all(n.pid is None for n in after.nodes)
    assert (d / "broker-a-0" / "store").is_dir()  # stores and logs stay
    assert "broker unregistered" in (d / "namesrv-0" / "namesrv-0.log").read_text()
    again = runner.invoke(app, ["cluster", "down", "--dir", str(d)])
    assert again.exit_code == 0 and again.output.count("not running") == 6
    status = runner.invoke(app, ["cluster", "status", "--dir", str(d), "--json"])
    assert [n["running"] for n in json.loads(status.output)["nodes"]] == [False] * 6
    print(f"cluster up of 6 processes: {took:.1f} s (command included)")


def _messages_in(port: int) -> dict[str, tuple[str, float]]:
    """topic -> (node_id, rocketmq_messages_in_total) on the broker's ``/metrics`` at ``port``."""
    return {dict(labels)["topic"]: (dict(labels)["node_id"], value)
            for (name, labels), value in scrape_metrics(port).items()
            if name == "rocketmq_messages_in_total"}


def test_each_broker_serves_its_own_metrics_and_one_dashboard(tmp_path: Path) -> None:
    """Two masters on one machine: each broker's ``/metrics`` answers on the port ``up`` and
    ``status`` print for it, labelled with its own broker name and counting what that broker
    stored; the cluster's one dashboard (its own process) lists both brokers."""
    d = tmp_path / "c"
    _, r = up(d, 2, 1)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        view = status_json(str(d))
        nodes = {n["name"]: n for n in view["nodes"]}
        assert list(nodes) == ["namesrv-0", "broker-a-0", "broker-b-0", "dashboard"]
        ports = {name: nodes[name]["ports"]["metrics"] for name in ("broker-a-0", "broker-b-0")}
        assert len(set(ports.values())) == 2
        for name, port in ports.items():  # where up printed them, as Prometheus targets
            assert nodes[name]["url"] == f"http://127.0.0.1:{port}/metrics"
            assert f"127.0.0.1:{port}" in r.stdout.split("/metrics on ")[1], r.stdout
        dash = nodes["dashboard"]["url"]
        assert f"dashboard {dash}" in r.stdout, r.stdout

        sent_to, got = asyncio.run(send_and_receive(view["namesrv_addr"]))
        assert sent_to == {"broker-a", "broker-b"} and len(got) == N
        per_broker = {name: _messages_in(port)[TOPIC] for name, port in ports.items()}
        assert {n: label for n, (label, _) in per_broker.items()} == {
            "broker-a-0": "broker-a", "broker-b-0": "broker-b"}
        assert all(count > 0 for _, count in per_broker.values()), per_broker
        assert sum(count for _, count in per_broker.values()) == N  # no broker counts another's

        with urllib.request.urlopen(dash + "api/cluster", timeout=10) as resp:
            brokers = json.loads(resp.read())["brokers"]
        assert sorted(b["brokerName"] for b in brokers) == ["broker-a", "broker-b"]
        table = runner.invoke(app, ["cluster", "status", "--dir", str(d)], env={"COLUMNS": "200"})
        assert table.exit_code == 0 and "metrics" in table.output, table.output
        assert f"dashboard {dash}" in table.output, table.output
    finally:
        down = runner.invoke(app, ["cluster", "down", "--dir", str(d), "--timeout", "15"])
    assert down.exit_code == 0 and down.output.count("stopped (pid") == 4, down.output


def _record(tmp_path: Path, pid: int, start_time: int) -> Path:
    p = plan(tmp_path, namesrvs=1, brokers=1, replicas=1, base_port=40000)
    recs = [NodeRecord.of(p, p.namesrvs[0]), NodeRecord.of(p, p.masters[0], pid, start_time)]
    ClusterState(p.namesrv_addr, recs).write(tmp_path)
    return tmp_path


def test_down_leaves_a_reused_pid_alone(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "30"])
    try:
        start = proc_start_time(other.pid)
        assert start is not None
        d = _record(tmp_path, other.pid, start + 1)  # the PID, but another process's start time
        r = runner.invoke(app, ["cluster", "down", "--dir", str(d), "--timeout", "2"])
        assert r.exit_code == 0, r.output
        assert "another process now" in r.output
        time.sleep(0.2)
        assert other.poll() is None and proc_start_time(other.pid) == start
        st = runner.invoke(app, ["cluster", "status", "--dir", str(d), "--json"])
        assert [n["running"] for n in json.loads(st.output)["nodes"]] == [False, False]
    finally:
        other.kill()
        other.wait(10)


def test_down_kills_after_the_timeout(tmp_path: Path) -> None:
    """A recorded process that ignores SIGTERM gets SIGKILL after --timeout."""
    stubborn = subprocess.Popen([sys.executable, "-c",
                                 "import signal, time\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                 "print('ready', flush=True)\ntime.sleep(30)\n"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
        start = proc_start_time(stubborn.pid)
        assert start is not None
        d = _record(tmp_path, stubborn.pid, start)
        r = runner.invoke(app, ["cluster", "down", "--dir", str(d), "--timeout", "0.5"])
        assert r.exit_code == 0, r.output
        assert "killed after 0.5 s" in r.output
        assert proc_start_time(stubborn.pid) is None  # down reaped it: it is our child
    finally:
        if stubborn.poll() is None:
            stubborn.kill()
        stubborn.wait(10)
        if stubborn.stdout is not None:
            stubborn.stdout.close()


def test_up_failure_stops_what_it_started(tmp_path: Path) -> None:
    d = tmp_path / "c"
    r = cli("cluster", "up", "--dir", str(d), "--replicas", "1", "--brokers", "1",
            "--base-port", str(cluster_base(brokers=1, replicas=1)), "--ready-timeout", "0.01",
            timeout=30)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "namesrv-0 was not ready within 0.01 s" in r.stdout
    state = ClusterState.read(d)
    assert state is not None and all(n.pid is None for n in state.nodes)
    marker = str(d)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            assert marker not in cmdline or proc_start_time(int(entry.name)) is None, cmdline


def test_status_without_a_cluster(tmp_path: Path) -> None:
    r = runner.invoke(app, ["cluster", "status", "--dir", str(tmp_path)])
    assert r.exit_code == 1 and "no cluster.json" in r.output


def _same_commitlog(master: Path, slave: Path, top: int) -> bool:
    """Whether every CommitLog segment the master wrote into (below ``top``) is byte-identical
    on the slave."""
    names = sorted(p.name for p in master.iterdir() if int(p.name) < top)
    return bool(names) and all(
        (slave / n).is_file() and (slave / n).read_bytes() == (master / n).read_bytes()
        for n in names)


def test_cluster_up_slave_replicates(tmp_path: Path) -> None:
    """``cluster up --brokers 1 --replicas 2``: the slave's CommitLog ends identical to the
    master's after sends, and ``admin haStatus`` shows it caught up (lag 0)."""
    d = tmp_path / "c"
    base, r = up(d, 1, 2)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        ns = f"127.0.0.1:{base}"
        sent_to, got = asyncio.run(send_and_receive(ns))
        assert sent_to == {"broker-a"} and len(got) == N
        master_addr = f"127.0.0.1:{base + 1}"
        deadline = time.monotonic() + 30
        while True:
            st = cli("admin", "haStatus", "-b", master_addr, "--json")
            assert st.returncode == 0, st.stdout + st.stderr
            (view,) = json.loads(st.stdout)
            top = view["maxOffset"]
            if (top > 0 and [(s["ackedOffset"], s["lagBytes"]) for s in view["slaves"]] == [(top, 0)]
                    and _same_commitlog(d / "broker-a-0" / "store" / "commitlog",
                                        d / "broker-a-1" / "store" / "commitlog", top)):
                break
            assert time.monotonic() < deadline, (view, st.stdout)
            time.sleep(0.2)
        slave = cli("admin", "haStatus", "-b", f"127.0.0.1:{base + 4}", "--json")
        assert slave.returncode == 0, slave.stdout + slave.stderr
        (sview,) = json.loads(slave.stdout)
        assert sview["master"] is False and sview["maxOffset"] == top
        assert sview["masterHaAddress"] == f"127.0.0.1:{base + 2}"
        by_cluster = cli("admin", "haStatus", "-n", ns, "-c", "DefaultCluster", "--json")
        assert [v["broker"] for v in json.loads(by_cluster.stdout)] == [master_addr]
    finally:
        down = runner.invoke(app, ["cluster", "down", "--dir", str(d), "--timeout", "15"])
    assert down.exit_code == 0, down.output
