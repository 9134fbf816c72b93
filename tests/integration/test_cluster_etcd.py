"""``rocketlite cluster up --controller etcd`` with real processes on loopback: etcd (the Debian
etcd-server binary), a NameServer running the election watcher and two groups of two replicas in
controller mode. ``status`` names one master per group; a topic spread over both groups carries
messages; after SIGKILL of one group's master (its PID from ``cluster.json``) the route and
``status`` name the other replica within 10 s, sends go on, and what was acknowledged before is
read back from the new master. ``down`` stops every recorded process, etcd included.

``--controller etcd://host:port`` uses an existing etcd: nothing else is started for it and
``down`` leaves it running. A missing etcd binary, a dead existing etcd and a bad form are
refused before any process starts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from brokerhelp import free_port
from clusterhelp import cli, cluster_base, status_json
from failoverhelp import FAILOVER_LIMIT_S, read_back, run_etcd, wait_master
from rocketlite.cli.cluster_etcd import etcd_healthy
from rocketlite.cli.cluster_plan import ClusterState
from rocketlite.cli.cluster_procs import proc_start_time
from rocketlite.cli.main import app
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.client.send_types import SendStatus
from rocketlite.remoting.client import RemotingClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
runner = CliRunner()
TOPIC = "ClusterEtcdT"
QUEUES = 2
STORED = (SendStatus.SEND_OK, SendStatus.SLAVE_NOT_AVAILABLE)  # kept by the master either way


def masters(view: dict[str, Any]) -> dict[str, str]:
    """group → the node ``status`` names master now; asserts each group has exactly one."""
    out = {}
    for group, g in view["groups"].items():
        now = [n["name"] for n in view["nodes"]
               if n["name"].startswith(group + "-") and n["now"] == "master"]
        assert now == [g["master"]], (group, view)
        out[group] = g["master"]
    return out


async def send_spread(ns: str, bodies: list[bytes], within: float) -> dict[str, set[bytes]]:
    """Send every body through the route; group → the bodies it stored. A send that fails
    (the route still naming a dead master) is sent again, until ``within`` seconds."""
    by_group: dict[str, set[bytes]] = {}
    producer = Producer("ClusterEtcdPG", config=ClientConfig(namesrv_addr=ns,
                                                             poll_name_server_interval=0.5),
                        send_timeout=5.0)
    await producer.start()
    try:
        deadline = time.monotonic() + within
        for body in bodies:
            while True:
                try:
                    r = await producer.send(Message(TOPIC, body), timeout=3.0)
                except Exception:  # noqa: BLE001 - the broker of the chosen queue is dead
                    assert time.monotonic() < deadline, f"no send of {body!r} within {within} s"
                    await asyncio.sleep(0.2)
                    continue
                assert r.status in STORED, r.status
                by_group.setdefault(r.queue.brokerName, set()).add(body)
                break
    finally:
        await producer.shutdown()
    return by_group


async def read_all(addrs: dict[str, str], stored: dict[str, set[bytes]]) -> None:
    """Every body of ``stored[group]`` is readable from the group's master ``addrs[group]``."""
    client = RemotingClient()
    try:
        for group, bodies in stored.items():
            await read_back(client, addrs[group], TOPIC, bodies, queues=QUEUES)
    finally:
        await client.close()


async def route_failover(ns: str, group: str, addr: str) -> float:
    """Seconds until the NameServer's route names ``addr`` master of ``group`` (at most the
    failover limit)."""
    began = time.monotonic()
    client = RemotingClient()
    try:
        await wait_master(client, ns, group, addr, FAILOVER_LIMIT_S)
    finally:
        await client.close()
    return time.monotonic() - began


def test_up_with_etcd_failover_and_down(tmp_path: Path) -> None:
    d = tmp_path / "c"
    base = cluster_base(brokers=2, replicas=2, controller="etcd")
    r = cli("cluster", "up", "--dir", str(d), "--brokers", "2", "--replicas", "2",
            "--controller", "etcd", "--base-port", str(base), "--topic", TOPIC,
            "--queues", str(QUEUES), "--ready-timeout", "60", timeout=240)
    state = ClusterState.read(d)
    assert state is not None
    pids = {n.name: n.pid for n in state.nodes}
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        assert "7 processes ready" in r.stdout, r.stdout
        assert all(p is not None and proc_start_time(p) is not None for p in pids.values()), pids
        etcd_url = f"etcd://127.0.0.1:{base + 13}"  # after the NameServer's and 12 broker ports
        assert state.controller == etcd_url and etcd_healthy(etcd_url)
        assert [n.name for n in state.nodes] == ["etcd", "namesrv-0", "broker-a-1", "broker-a-2",
                                                 "broker-b-1", "broker-b-2", "dashboard"]
        assert (d / "etcd" / "data").is_dir() and (d / "etcd" / "etcd.log").is_file()
        conf = (d / "broker-b-2" / "broker.conf").read_text()
        assert f"controllerAddr={etcd_url}" in conf and "brokerRole=SYNC_MASTER" in conf
        assert "haMasterAddress" not in conf

        view = status_json(str(d))
        assert view["controller"] == etcd_url
        first = masters(view)
        assert set(first) == {"broker-a", "broker-b"}
        for g in view["groups"].values():
            assert g["syncStateSet"] == [1, 2] and g["live"] == [1, 2] and g["error"] is None
        ns = view["namesrv_addr"]
        stored = asyncio.run(send_spread(ns, [b"before-%d" % i for i in range(20)], 10))
        assert set(stored) == {"broker-a", "broker-b"}
        addr = {n["name"]: n["address"] for n in view["nodes"]}
        asyncio.run(read_all({g: addr[m] for g, m in first.items()}, stored))

        victim = first["broker-a"]
        heir = "broker-a-2" if victim == "broker-a-1" else "broker-a-1"
        victim_pid = pids[victim]
        assert victim_pid is not None
        os.kill(victim_pid, signal.SIGKILL)
        took = asyncio.run(route_failover(ns, "broker-a", addr[heir]))
        after = status_json(str(d))
        assert masters(after) == {"broker-a": heir, "broker-b": first["broker-b"]}
        now = {n["name"]: (n["now"], n["running"]) for n in after["nodes"]}
        assert now[victim] == ("down", False) and now[heir] == ("master", True)
        assert after["groups"]["broker-a"]["controllerMasterId"] == int(heir[-1])
        assert after["groups"]["broker-a"]["live"] == [int(heir[-1])]
        print(f"failover: SIGKILL to the route naming {heir} master: {took:.2f} s")

        more = asyncio.run(send_spread(ns, [b"after-%d" % i for i in range(20)], 15))
        assert set(more) == {"broker-a", "broker-b"}
        masters_now = {"broker-a": addr[heir], "broker-b": addr[first["broker-b"]]}
        everything = {g: stored[g] | more[g] for g in stored}
        asyncio.run(read_all(masters_now, everything))  # nothing acknowledged lost
    finally:
        down = runner.invoke(app, ["cluster", "down", "--dir", str(d), "--timeout", "15"])
    assert down.exit_code == 0, down.output
    assert down.output.count("stopped (pid") == 6 and "already gone" in down.output, down.output
    for name, pid in pids.items():
        assert pid is not None and proc_start_time(pid) is None, f"{name} (pid {pid}) runs"
    assert not etcd_healthy(etcd_url)
    after_down = ClusterState.read(d)
    assert after_down is not None and all(n.pid is None for n in after_down.nodes)
    gone = status_json(str(d))  # nothing runs: reported, not asked
    assert [n["running"] for n in gone["nodes"]] == [False] * 7
    assert {n["now"] for n in gone["nodes"] if n["kind"] == "broker"} == {"down"}
    assert gone["groups"]["broker-a"]["master"] is None
    assert "no NameServer runs" in gone["groups"]["broker-a"]["error"]


def test_up_with_an_existing_etcd(tmp_path: Path) -> None:
    """``--controller etcd://host:port``: no etcd node; ``down`` leaves that etcd running."""
    d = tmp_path / "c"
    base = cluster_base(brokers=1, replicas=2)
    with run_etcd(tmp_path) as url:
        r = cli("cluster", "up", "--dir", str(d), "--brokers", "1", "--replicas", "2",
                "--controller", url, "--base-port", str(base), "--ready-timeout", "60",
                timeout=180)
        state = ClusterState.read(d)
        assert state is not None
        pids = [n.pid for n in state.nodes]
        try:
            assert r.returncode == 0, r.stdout + r.stderr
            assert [n.kind for n in state.nodes] == ["namesrv", "broker", "broker", "dashboard"]
            assert state.controller == url and not (d / "etcd").exists()
            view = status_json(str(d))
            assert list(masters(view)) == ["broker-a"]
            assert view["groups"]["broker-a"]["syncStateSet"] == [1, 2]
        finally:
            down = runner.invoke(app, ["cluster", "down", "--dir", str(d), "--timeout", "15"])
        assert down.exit_code == 0 and down.output.count("stopped (pid") == 4, down.output
        assert all(p is not None and proc_start_time(p) is None for p in pids)
        assert etcd_healthy(url)  # not ours to stop


def test_missing_etcd_binary_is_named(tmp_path: Path) -> None:
    r = runner.invoke(app, ["cluster", "up", "--dir", str(tmp_path / "c"), "--controller",
                            "etcd"], env={"PATH": str(tmp_path)})
    assert r.exit_code == 1, r.output
    assert "no etcd binary on PATH" in r.output and "etcd-server" in r.output
    assert not (tmp_path / "c").exists()  # nothing started, nothing written


def test_a_dead_existing_etcd_is_refused(tmp_path: Path) -> None:
    url = f"etcd://127.0.0.1:{free_port()}"
    r = runner.invoke(app, ["cluster", "up", "--dir", str(tmp_path / "c"), "--controller", url])
    assert r.exit_code == 1, r.output
    assert "no healthy etcd answers there" in r.output
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("value", ["zookeeper", "http://127.0.0.1:2379", "etcd://:2379"])
def test_bad_controller_forms(tmp_path: Path, value: str) -> None:
    r = runner.invoke(app, ["cluster", "up", "--dir", str(tmp_path / "c"), "--controller", value])
    assert r.exit_code == 2, r.output
    assert "--controller" in r.output
    assert not (tmp_path / "c").exists()
