"""``cluster_plan``: the nodes, ports, names and broker.conf text of ``rocketlite cluster up``
(no process is started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketlite.broker.config import BrokerConfig, check_role
from rocketlite.cli.cluster_etcd import etcd_command, find_etcd
from rocketlite.cli.cluster_plan import (
    PORTS_PER_BROKER,
    ClusterError,
    ClusterState,
    NodeRecord,
    PlanError,
    group_name,
    parse_proc_stat,
    plan,
)
from rocketlite.proxy.config import ProxyConfig
from rocketlite.store.config import StoreConfig, read_properties_file


def test_group_names() -> None:
    assert [group_name(i) for i in (0, 1, 25, 26, 27, 52)] == [
        "broker-a", "broker-b", "broker-z", "broker-aa", "broker-ab", "broker-ba"]
    with pytest.raises(PlanError):
        group_name(-1)


def test_two_groups_of_two_ports_and_names(tmp_path: Path) -> None:
    p = plan(tmp_path, namesrvs=1, brokers=2, replicas=2, base_port=20000)
    assert [(n.name, n.role, n.port, n.ha_port, n.grpc_port, n.metrics_port)
            for n in p.nodes] == [
        ("namesrv-0", "NAMESRV", 20000, None, None, None),
        ("broker-a-0", "ASYNC_MASTER", 20001, 20002, 20003, 20016),
        ("broker-a-1", "SLAVE", 20004, 20005, 20006, 20017),
        ("broker-b-0", "ASYNC_MASTER", 20007, 20008, 20009, 20018),
        ("broker-b-1", "SLAVE", 20010, 20011, 20012, 20019),
        ("dashboard", "DASHBOARD", 20015, None, None, None),  # 20013/20014: etcd's, kept free
    ]
    assert [n.name for n in p.masters] == ["broker-a-0", "broker-b-0"]
    assert [n.name for n in p.slaves] == ["broker-a-1", "broker-b-1"]
    assert [(n.broker_name, n.broker_id) for n in p.brokers] == [
        ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
    # each slave replicates from its own group's master's HA port
    assert p.nodes[2].ha_master_address == "127.0.0.1:20002"
    assert p.nodes[4].ha_master_address == "127.0.0.1:20008"
    assert p.nodes[1].ha_master_address is None
    ports = p.all_ports()
    assert len(ports) == len(set(ports)) == 18
    assert p.namesrv_addr == "127.0.0.1:20000"
    assert p.dashboard is not None and p.dashboard.kind == "dashboard"


def test_ports_are_deterministic_and_no_grpc_keeps_them(tmp_path: Path) -> None:
    a = plan(tmp_path, namesrvs=2, brokers=3, replicas=3, base_port=30000)
    b = plan(tmp_path, namesrvs=2, brokers=3, replicas=3, base_port=30000)
    assert a == b
    off = plan(tmp_path, namesrvs=2, brokers=3, replicas=3, base_port=30000, grpc=False)
    assert [n.port for n in off.nodes] == [n.port for n in a.nodes]
    assert all(n.grpc_port is None for n in off.nodes)
    assert a.namesrv_addr == "127.0.0.1:30000;127.0.0.1:30001"
    assert len(a.brokers) == 9 and a.brokers[-1].port == 30002 + 8 * PORTS_PER_BROKER
    after = 30002 + 9 * PORTS_PER_BROKER + 2  # etcd's two ports, kept free without etcd
    assert a.dashboard is not None and a.dashboard.port == after
    assert [n.metrics_port for n in a.brokers] == list(range(after + 1, after + 10))
    assert max(a.all_ports()) == after + 9
    bare = plan(tmp_path, namesrvs=2, brokers=3, replicas=3, base_port=30000, metrics=False,
                dashboard=False)
    assert [n.ports() for n in bare.nodes] == [
        [p for p in n.ports() if p != n.metrics_port] for n in a.nodes if n.kind != "dashboard"]
    assert bare.dashboard is None and all(n.metrics_port is None for n in bare.nodes)


def test_conf_text_is_read_back_by_the_broker(tmp_path: Path) -> None:
    p = plan(tmp_path, base_port=20000, role="SYNC_MASTER", flush="SYNC_FLUSH")
    for node in p.brokers:
        conf = tmp_path / f"{node.name}.conf"
        conf.write_text(p.conf_text(node), encoding="utf-8")
        props = read_properties_file(conf)
        assert props == p.broker_properties(node)
        bcfg, scfg = BrokerConfig.from_properties(props), StoreConfig.from_properties(props)
        assert (bcfg.broker_name, bcfg.broker_id) == (node.broker_name, node.broker_id)
        assert bcfg.namesrv_addr == "127.0.0.1:20000"
        assert bcfg.broker_cluster_name == "DefaultCluster"
        assert scfg.listen_port == node.port and scfg.broker_ip1 == "127.0.0.1"
        assert scfg.store_path_root_dir == tmp_path / node.name / "store"
        assert scfg.flush_disk_type == "SYNC_FLUSH"
        assert scfg.mapped_file_size_commit_log == 64 << 20
        assert ProxyConfig.from_properties(props).grpc_server_port == node.grpc_port
        # its own metrics port; the cluster's dashboard is its own node, not in a broker
        assert bcfg.metrics_port == node.metrics_port and bcfg.dashboard_port == 0
        # the replication keys, for the brokers that know them
        assert props["haListenPort"] == str(node.port + 1)
        if node.broker_id == 0:
            assert props["brokerRole"] == "SYNC_MASTER" and "haMasterAddress" not in props
        else:
            assert props["brokerRole"] == "SLAVE"
            master = next(m for m in p.masters if m.broker_name == node.broker_name)
            assert props["haMasterAddress"] == f"127.0.0.1:{master.ha_port}"


def test_no_grpc_conf(tmp_path: Path) -> None:
    p = plan(tmp_path, base_port=20000, grpc=False)
    props = p.broker_properties(p.masters[0])
    assert props["enableGrpcServer"] == "false" and "grpcServerPort" not in props
    assert not ProxyConfig.from_properties(props).enable_grpc_server


def test_no_metrics_conf(tmp_path: Path) -> None:
    p = plan(tmp_path, base_port=20000, metrics=False)
    props = p.broker_properties(p.masters[0])
    assert props["metricsPort"] == "0" and BrokerConfig.from_properties(props).metrics_port == 0
    assert NodeRecord.of(p, p.masters[0]).url is None


def test_paths_and_commands(tmp_path: Path) -> None:
    p = plan(tmp_path, base_port=20000, replicas=1)
    ns, a = p.namesrvs[0], p.masters[0]
    assert p.log_path(a) == tmp_path / "broker-a-0" / "broker-a-0.log"
    assert p.command(a) == ["broker", "-c", str(tmp_path / "broker-a-0" / "broker.conf")]
    assert p.command(ns) == ["namesrv", "--port", "20000", "--kv-config",
                             str(tmp_path / "namesrv-0" / "kvConfig.json")]
    assert p.slaves == ()
    with pytest.raises(PlanError):
        p.broker_properties(ns)
    assert p.dashboard is not None and p.dashboard.port == 20009  # after 2 brokers and etcd's 2
    assert p.command(p.dashboard) == ["dashboard", "-n", "127.0.0.1:20000", "--port", "20009"]
    assert p.log_path(p.dashboard) == tmp_path / "dashboard" / "dashboard.log"
    assert NodeRecord.of(p, p.dashboard).url == "http://127.0.0.1:20009/"
    assert NodeRecord.of(p, a).url == "http://127.0.0.1:20010/metrics"
    assert NodeRecord.of(p, ns).url is None


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"namesrvs": 0}, "--namesrvs"), ({"brokers": 0}, "--brokers"),
    ({"replicas": 0}, "--replicas"), ({"role": "SLAVE"}, "--role"),
    ({"flush": "NEVER"}, "--flush"), ({"base_port": 0}, "--base-port"),
    ({"base_port": 65530}, "65549"),
])
def test_refused_plans(tmp_path: Path, kwargs: dict[str, object], word: str) -> None:
    with pytest.raises(PlanError, match=word):
        plan(tmp_path, **kwargs)  # type: ignore[arg-type]


def test_state_round_trip(tmp_path: Path) -> None:
    p = plan(tmp_path, base_port=20000)
    state = ClusterState(p.namesrv_addr, [NodeRecord.of(p, n, 100 + i, 5000 + i)
                                          for i, n in enumerate(p.nodes)], ["T"])
    state.write(tmp_path)
    back = ClusterState.read(tmp_path)
    assert back == state
    assert back is not None and back.nodes[1].ports == {"remoting": 20001, "ha": 20002,
                                                        "grpc": 20003, "metrics": 20016}
    assert back.nodes[0].ports == {"remoting": 20000}
    assert back.nodes[-1].ports == {"http": 20015}
    assert ClusterState.read(tmp_path / "nothing") is None
    (tmp_path / "cluster.json").write_text('{"version": 99}', encoding="utf-8")
    with pytest.raises(ValueError, match="version 99"):
        ClusterState.read(tmp_path)


def test_parse_proc_stat() -> None:
    # a command name with spaces and a parenthesis: fields are counted from the last ')'
    fields = " ".join(str(i) for i in range(4, 53))
    line = f"4242 (python (x) y) S {fields}\n"
    assert parse_proc_stat(line) == ("S", 22)
    with open("/proc/self/stat") as f:
        state, start = parse_proc_stat(f.read())
    assert state == "R" and start > 0


def test_default_ports_are_the_documented_ones(tmp_path: Path) -> None:
    """examples/cluster/README.md's table."""
    p = plan(tmp_path)
    assert [(n.name, n.port, n.ha_port, n.grpc_port, n.metrics_port) for n in p.nodes] == [
        ("namesrv-0", 9876, None, None, None), ("broker-a-0", 9877, 9878, 9879, 9892),
        ("broker-a-1", 9880, 9881, 9882, 9893), ("broker-b-0", 9883, 9884, 9885, 9894),
        ("broker-b-1", 9886, 9887, 9888, 9895), ("dashboard", 9891, None, None, None)]
    assert [n.role for n in p.brokers] == ["ASYNC_MASTER", "SLAVE"] * 2
    etcd = plan(tmp_path, controller="etcd").etcd
    assert etcd is not None and etcd.ports() == [9889, 9890]


# ------------------------------------------------------------------------------ controller


def test_controller_plan_starts_etcd_after_the_broker_ports(tmp_path: Path) -> None:
    p = plan(tmp_path, brokers=2, replicas=2, base_port=20000, controller="etcd")
    assert [(n.name, n.kind, n.role, n.port, n.broker_id) for n in p.nodes] == [
        ("etcd", "etcd", "ETCD", 20013, None),
        ("namesrv-0", "namesrv", "NAMESRV", 20000, None),
        ("broker-a-1", "broker", "SYNC_MASTER", 20001, 1),
        ("broker-a-2", "broker", "SYNC_MASTER", 20004, 2),
        ("broker-b-1", "broker", "SYNC_MASTER", 20007, 1),
        ("broker-b-2", "broker", "SYNC_MASTER", 20010, 2),
        ("dashboard", "dashboard", "DASHBOARD", 20015, None),
    ]
    assert p.etcd is not None and p.etcd.peer_port == 20014 and p.etcd.ports() == [20013, 20014]
    assert p.controller == "etcd://127.0.0.1:20013"
    # the brokers' ports are those of the plain plan: etcd only adds two after them
    plain = plan(tmp_path, brokers=2, replicas=2, base_port=20000)
    assert [n.ports() for n in p.brokers] == [n.ports() for n in plain.brokers]
    assert sorted(p.all_ports()) == list(range(20000, 20020))
    assert p.masters == () and {g: [n.name for n in ns] for g, ns in p.groups.items()} == {
        "broker-a": ["broker-a-1", "broker-a-2"], "broker-b": ["broker-b-1", "broker-b-2"]}
    assert all(n.ha_master_address is None for n in p.brokers)
    assert p.log_path(p.etcd) == tmp_path / "etcd" / "etcd.log"


def test_controller_conf_and_commands(tmp_path: Path) -> None:
    p = plan(tmp_path, brokers=1, replicas=2, base_port=20000, controller="etcd")
    url = "etcd://127.0.0.1:20007"
    for node in p.brokers:
        conf = tmp_path / f"{node.name}.conf"
        conf.write_text(p.conf_text(node), encoding="utf-8")
        props = read_properties_file(conf)
        assert props["enableControllerMode"] == "true" and props["controllerAddr"] == url
        assert "haMasterAddress" not in props
        bcfg, scfg = BrokerConfig.from_properties(props), StoreConfig.from_properties(props)
        check_role(bcfg, scfg)  # the broker accepts it: brokerId above 0, a fixed HA port
        assert bcfg.enable_controller_mode and bcfg.broker_id == node.broker_id
        assert p.command(node) == ["broker", "-c", str(p.conf_path(node)), "--controller", url]
    assert p.command(p.namesrvs[0]) == [
        "namesrv", "--port", "20000", "--kv-config", str(tmp_path / "namesrv-0" / "kvConfig.json"),
        "--controller", url, "--cluster", "DefaultCluster"]
    assert p.etcd is not None
    with pytest.raises(PlanError, match="etcd_command"):
        p.command(p.etcd)
    assert p.etcd.peer_port is not None
    argv = etcd_command("/usr/bin/etcd", p.node_dir(p.etcd) / "data", p.etcd.port,
                        p.etcd.peer_port)
    assert argv[0] == "/usr/bin/etcd"
    assert argv[argv.index("--data-dir") + 1] == str(tmp_path / "etcd" / "data")
    assert argv[argv.index("--listen-client-urls") + 1] == "http://127.0.0.1:20007"
    assert argv[argv.index("--initial-cluster") + 1] == "rocketlite=http://127.0.0.1:20008"


def test_an_existing_etcd_is_not_planned(tmp_path: Path) -> None:
    p = plan(tmp_path, brokers=1, replicas=3, base_port=20000, controller="etcd://10.0.0.5",
             role="ASYNC_MASTER")
    assert p.etcd is None and p.controller == "etcd://10.0.0.5:2379"
    assert [(n.name, n.role) for n in p.brokers] == [
        ("broker-a-1", "ASYNC_MASTER"), ("broker-a-2", "ASYNC_MASTER"),
        ("broker-a-3", "ASYNC_MASTER")]
    assert 20010 not in p.all_ports() and 20011 not in p.all_ports()  # no etcd ports


@pytest.mark.parametrize("value", ["zk", "http://127.0.0.1:2379", "etcd://", "etcd://h:x"])
def test_refused_controllers(tmp_path: Path, value: str) -> None:
    with pytest.raises(PlanError, match="--controller"):
        plan(tmp_path, controller=value)


def test_etcd_ports_count_in_the_range(tmp_path: Path) -> None:
    kw = {"brokers": 1, "replicas": 1, "base_port": 65531, "metrics": False,
          "dashboard": False}
    plan(tmp_path, **kw)  # type: ignore[arg-type]  # 65531..65534
    with pytest.raises(PlanError, match=r"65531\.\.65536"):
        plan(tmp_path, **kw, controller="etcd")  # type: ignore[arg-type]


def test_state_keeps_the_controller(tmp_path: Path) -> None:
    p = plan(tmp_path, brokers=1, replicas=2, base_port=20000, controller="etcd")
    state = ClusterState(p.namesrv_addr, [NodeRecord.of(p, n) for n in p.nodes],
                         controller=p.controller)
    state.write(tmp_path)
    back = ClusterState.read(tmp_path)
    assert back == state and back is not None
    assert back.nodes[0].ports == {"client": 20007, "peer": 20008}
    # a cluster.json written before controllers: no controller
    plain = ClusterState(p.namesrv_addr, []).to_json().replace('"controller": null', '"x": 0')
    assert '"controller"' not in plain
    (tmp_path / "cluster.json").write_text(plain.replace(',\n  "x": 0', ""), encoding="utf-8")
    old = ClusterState.read(tmp_path)
    assert old is not None and old.controller is None


def test_find_etcd_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterError, match="apt-get install etcd-server"):
        find_etcd()
    fake = tmp_path / "etcd"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert find_etcd() == str(fake)
