"""``cluster_plan``: the nodes, ports, names and broker.conf text of ``rocketlite cluster up``
(no process is started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketlite.broker.config import BrokerConfig
from rocketlite.cli.cluster_plan import (
    PORTS_PER_BROKER,
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
    assert [(n.name, n.role, n.port, n.ha_port, n.grpc_port) for n in p.nodes] == [
        ("namesrv-0", "NAMESRV", 20000, None, None),
        ("broker-a-0", "ASYNC_MASTER", 20001, 20002, 20003),
        ("broker-a-1", "SLAVE", 20004, 20005, 20006),
        ("broker-b-0", "ASYNC_MASTER", 20007, 20008, 20009),
        ("broker-b-1", "SLAVE", 20010, 20011, 20012),
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
    assert len(ports) == len(set(ports)) == 13
    assert p.namesrv_addr == "127.0.0.1:20000"


def test_ports_are_deterministic_and_no_grpc_keeps_them(tmp_path: Path) -> None:
    a = plan(tmp_path, namesrvs=2, brokers=3, replicas=3, base_port=30000)
    b = plan(tmp_path, namesrvs=2, brokers=3, replicas=3, base_port=30000)
    assert a == b
    off = plan(tmp_path, namesrvs=2, brokers=3, replicas=3, base_port=30000, grpc=False)
    assert [n.port for n in off.nodes] == [n.port for n in a.nodes]
    assert all(n.grpc_port is None for n in off.nodes)
    assert a.namesrv_addr == "127.0.0.1:30000;127.0.0.1:30001"
    assert len(a.brokers) == 9 and a.brokers[-1].port == 30002 + 8 * PORTS_PER_BROKER
    assert max(a.all_ports()) == 30001 + 9 * PORTS_PER_BROKER


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


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"namesrvs": 0}, "--namesrvs"), ({"brokers": 0}, "--brokers"),
    ({"replicas": 0}, "--replicas"), ({"role": "SLAVE"}, "--role"),
    ({"flush": "NEVER"}, "--flush"), ({"base_port": 0}, "--base-port"),
    ({"base_port": 65530}, "65542"),
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
                                                        "grpc": 20003}
    assert back.nodes[0].ports == {"remoting": 20000}
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
    assert [(n.name, n.port, n.ha_port, n.grpc_port) for n in p.nodes] == [
        ("namesrv-0", 9876, None, None), ("broker-a-0", 9877, 9878, 9879),
        ("broker-a-1", 9880, 9881, 9882), ("broker-b-0", 9883, 9884, 9885),
        ("broker-b-1", 9886, 9887, 9888)]
    assert [n.role for n in p.brokers] == ["ASYNC_MASTER", "SLAVE"] * 2
