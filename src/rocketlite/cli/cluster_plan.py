"""The pure part of ``rocketlite cluster``: which nodes a cluster has, their ports, names,
directories and ``broker.conf`` text, and the ``cluster.json`` record of what was started.

Nothing here starts a process or touches the network; ``cluster_commands`` does.

Ports are planned from one base port, in this order, so a given command line always gets the
same ports: the NameServers on ``base .. base+namesrvs-1``, then every broker node (the groups
broker-a, broker-b, ... in order, each its master then its slaves) takes a block of
``PORTS_PER_BROKER`` ports: ``listenPort``, ``haListenPort`` = ``listenPort + 1`` (RocketMQ's
default offset) and the gRPC front's port ``listenPort + 2`` (the block keeps its size with
``--no-grpc``, so the Remoting ports do not move when the front is turned off).

A node named ``broker-a-0`` is group broker-a's master (``brokerId=0``), ``broker-a-1`` its first
slave; a NameServer is ``namesrv-0``. Each node has its own directory ``DIR/<node>`` holding its
``broker.conf``, its store (``DIR/<node>/store``) and its log (``DIR/<node>/<node>.log``).

With a controller (``controller="etcd"``: start one; ``"etcd://host:port"``: an existing one) the
controller decides who is master, so no node is master by its configuration: every broker of a
group runs in controller mode with the same ``brokerRole`` (the role it takes when elected) and a
``brokerId`` above 0 (RocketMQ 5 registers the master under 0): ``broker-a-1``, ``broker-a-2``,
... without ``haMasterAddress`` (the controller names the master). The NameServers run the
election watcher. A started etcd is the node ``etcd`` (data in ``DIR/etcd/data``, log
``DIR/etcd/etcd.log``) on the two ports after the brokers' (client, then peer), so the brokers'
ports are the same with or without it.

The web dashboard and Prometheus' ``/metrics`` come after those two ports (kept free without a
controller, so nothing after them moves): one ``dashboard`` node (``rocketlite dashboard`` over
the cluster's NameServers, loopback, read-only; DIR/dashboard/dashboard.log) on the next port, and
then each broker's ``metricsPort``, one per broker in the order above. The dashboard is one per
cluster, as rocketmq-dashboard is, and its own process: it shows every group and outlives any
broker (a failover does not take it away). Every broker's ``dashboardPort`` is 0. With the
defaults (1 NameServer, 2 groups of 2): etcd 9889/9890, the dashboard 9891, metrics 9892..9895.
``--no-metrics`` / ``--no-dashboard`` leave their ports unused and the others where they were.
"""

from __future__ import annotations

import dataclasses
import json
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "cluster.json"
STATE_VERSION = 1
PORTS_PER_BROKER = 3
HOST = "127.0.0.1"
ETCD = "etcd"  # --controller etcd: start an etcd; also the etcd node's name and kind
ETCD_PORTS = 2  # client, peer
DASHBOARD = "dashboard"  # the dashboard node's name and kind
# the key of a node's own port in cluster.json's ``ports`` (a broker's, a NameServer's: remoting)
MAIN_PORT = {ETCD: "client", DASHBOARD: "http"}
MASTER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
FLUSH_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
CLUSTER_NAME = "DefaultCluster"
# Laptop-sized files as ``rocketlite start`` makes them (server_commands.START_DEFAULTS): 64 MiB
# CommitLog segments and a 42 MB IndexFile, instead of RocketMQ's 1 GiB and ~420 MB, per node.
SMALL_FILES = {
    "mappedFileSizeCommitLog": str(64 << 20),
    "maxHashSlotNum": "500000",
    "maxIndexNum": "2000000",
}


class PlanError(ValueError):
    """A cluster that cannot be planned (a count or port out of range, a bad role)."""


class ClusterError(Exception):
    """``up`` could not bring the cluster up (the message says which node and why)."""


def group_name(index: int) -> str:
    """broker-a, broker-b, ..., broker-z, then broker-aa, broker-ab, ... (the names RocketMQ's
    example configs use for the groups of a cluster)."""
    if index < 0:
        raise PlanError(f"group index {index} is negative")
    letters = string.ascii_lowercase
    name = ""
    n = index
    while True:
        name = letters[n % 26] + name
        n = n // 26 - 1
        if n < 0:
            return f"broker-{name}"


@dataclass(frozen=True, slots=True)
class Node:
    """One process of the cluster. ``kind`` is ``namesrv``, ``broker`` or ``etcd``; for a broker
    ``role`` is its ``brokerRole`` (ASYNC_MASTER, SYNC_MASTER or SLAVE; in controller mode the
    role it takes when elected), for a NameServer ``NAMESRV``, for etcd ``ETCD``."""

    name: str
    kind: str
    role: str
    port: int  # the Remoting port: the NameServer's, or the broker's listenPort; etcd's client
    broker_name: str | None = None
    broker_id: int | None = None
    ha_port: int | None = None
    grpc_port: int | None = None  # None: the gRPC front is off
    ha_master_address: str | None = None  # a slave's master's host:haListenPort
    peer_port: int | None = None  # etcd's peer port
    metrics_port: int | None = None  # a broker's metricsPort; None: no metrics

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def is_master(self) -> bool:
        """Master by its configuration (brokerId 0); in controller mode no node is."""
        return self.kind == "broker" and self.broker_id == 0

    def ports(self) -> list[int]:
        """The ports this node binds (the HA port once replication serves it)."""
        return [p for p in (self.port, self.ha_port, self.grpc_port, self.peer_port,
                            self.metrics_port) if p is not None]



@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """Every node of a cluster: etcd if it starts one, the NameServers, then each group's master
    and its slaves (in controller mode each group's replicas). ``controller`` is the etcd URL
    the NameServers and brokers use, None without a controller."""

    dir: Path
    nodes: tuple[Node, ...]
    flush: str = "ASYNC_FLUSH"
    cluster_name: str = CLUSTER_NAME
    controller: str | None = None

    @property
    def etcd(self) -> Node | None:
        """The etcd node ``up`` starts; None without a controller or with an existing etcd."""
        return next((n for n in self.nodes if n.kind == ETCD), None)

    @property
    def dashboard(self) -> Node | None:
        """The dashboard node; None with ``--no-dashboard``."""
        return next((n for n in self.nodes if n.kind == DASHBOARD), None)

    @property
    def groups(self) -> dict[str, tuple[Node, ...]]:
        """Each group's broker nodes, by brokerName."""
        out: dict[str, list[Node]] = {}
        for n in self.brokers:
            out.setdefault(str(n.broker_name), []).append(n)
        return {k: tuple(v) for k, v in out.items()}

    @property
    def namesrvs(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind == "namesrv")

    @property
    def brokers(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind == "broker")

    @property
    def masters(self) -> tuple[Node, ...]:
        return tuple(n for n in self.brokers if n.is_master)

    @property
    def slaves(self) -> tuple[Node, ...]:
        return tuple(n for n in self.brokers if not n.is_master)

    @property
    def namesrv_addr(self) -> str:
        """``namesrvAddr``: every NameServer, ``;``-separated."""
        return ";".join(n.address for n in self.namesrvs)

    def node_dir(self, node: Node) -> Path:
        return self.dir / node.name

    def conf_path(self, node: Node) -> Path:
        return self.node_dir(node) / "broker.conf"

    def store_path(self, node: Node) -> Path:
        return self.node_dir(node) / "store"

    def log_path(self, node: Node) -> Path:
        return self.node_dir(node) / f"{node.name}.log"

    def all_ports(self) -> list[int]:
        return [p for n in self.nodes for p in n.ports()]

    def broker_properties(self, node: Node) -> dict[str, str]:
        """The broker.conf keys of a broker node, in the order they are written."""
        if node.kind != "broker" or node.broker_name is None or node.broker_id is None:
            raise PlanError(f"{node.name} is not a broker")
        props = {
            "brokerClusterName": self.cluster_name,
            "brokerName": node.broker_name,
            "brokerId": str(node.broker_id),
            "brokerRole": node.role,
            "brokerIP1": HOST,
            "listenPort": str(node.port),
            "haListenPort": str(node.ha_port),
        }
        if node.ha_master_address is not None:
            props["haMasterAddress"] = node.ha_master_address
        props["namesrvAddr"] = self.namesrv_addr
        if self.controller is not None:  # RocketMQ 5's keys: the controller decides the role
            props["enableControllerMode"] = "true"
            props["controllerAddr"] = self.controller
        props["storePathRootDir"] = str(self.store_path(node))
        props["flushDiskType"] = self.flush
        if node.grpc_port is None:
            props["enableGrpcServer"] = "false"
        else:
            props["grpcServerPort"] = str(node.grpc_port)
        # the cluster's dashboard is its own node; each broker its own metrics port (0: none)
        props["metricsPort"] = str(node.metrics_port or 0)
        props["dashboardPort"] = "0"
        props.update(SMALL_FILES)
        return props

    def conf_text(self, node: Node) -> str:
        """The broker.conf of a broker node (RocketMQ's properties format)."""
        lines = [f"# {node.name}: written by `rocketlite cluster up`; read by "
                 f"`rocketlite broker -c`"]
        lines += [f"{k}={v}" for k, v in self.broker_properties(node).items()]
        return "\n".join(lines) + "\n"

    def command(self, node: Node) -> list[str]:
        """The arguments after ``python -m rocketlite`` that start ``node``."""
        if node.kind == ETCD:
            raise PlanError("etcd is not a rocketlite command (cluster_etcd.etcd_command)")
        ctl = [] if self.controller is None else ["--controller", self.controller]
        if node.kind == DASHBOARD:
            return ["dashboard", "-n", self.namesrv_addr, "--port", str(node.port)]
        if node.kind == "namesrv":
            return ["namesrv", "--port", str(node.port),
                    "--kv-config", str(self.node_dir(node) / "kvConfig.json"), *ctl,
                    *(["--cluster", self.cluster_name] if ctl else [])]
        return ["broker", "-c", str(self.conf_path(node)), *ctl]


def controller_url(controller: str, client_port: int) -> tuple[str, bool]:
    """The etcd URL for ``--controller`` and whether ``up`` starts that etcd: ``etcd`` starts one
    on ``client_port``; ``etcd://host:port`` is an existing one."""
    if controller == ETCD:
        return f"etcd://{HOST}:{client_port}", True
    if not controller.startswith("etcd://"):
        raise PlanError(f"--controller {controller}: etcd (start one) or etcd://host:port (an "
                        "existing etcd)")
    from rocketlite.controller.etcd import parse_url  # controller mode only: loads aetcd
    from rocketlite.controller.state import ControllerError

    try:
        host, port = parse_url(controller)
    except ControllerError as e:
        raise PlanError(f"--controller {controller}: {e}") from None
    return f"etcd://{host}:{port}", False


def plan(dir: Path, *, namesrvs: int = 1, brokers: int = 2, replicas: int = 2,  # noqa: A002
         base_port: int = 9876, role: str | None = None, flush: str = "ASYNC_FLUSH",
         grpc: bool = True, controller: str | None = None, metrics: bool = True,
         dashboard: bool = True) -> ClusterPlan:
    """The nodes of a cluster of ``brokers`` groups of ``replicas`` nodes each (a master and
    ``replicas - 1`` slaves, or with ``controller`` replicas the controller elects among),
    ``namesrvs`` NameServers and (``dashboard``) the dashboard, ports from ``base_port`` on
    (``metrics``: each broker's metrics port too). ``role`` defaults to ASYNC_MASTER, with a
    controller to SYNC_MASTER (only then is nothing acknowledged lost in a failover)."""
    if role is None:
        role = "ASYNC_MASTER" if controller is None else "SYNC_MASTER"
    if namesrvs < 1:
        raise PlanError(f"--namesrvs {namesrvs}: at least 1")
    if brokers < 1:
        raise PlanError(f"--brokers {brokers}: at least 1")
    if replicas < 1:
        raise PlanError(f"--replicas {replicas}: at least 1 (the master)")
    if role not in MASTER_ROLES:
        raise PlanError(f"--role {role}: ASYNC_MASTER or SYNC_MASTER")
    if flush not in FLUSH_TYPES:
        raise PlanError(f"--flush {flush}: ASYNC_FLUSH or SYNC_FLUSH")
    first_etcd = base_port + namesrvs + brokers * replicas * PORTS_PER_BROKER
    dashboard_port = first_etcd + ETCD_PORTS
    url, start_etcd = (None, False) if controller is None else controller_url(controller,
                                                                              first_etcd)
    nodes = []
    if start_etcd:
        nodes.append(Node(ETCD, ETCD, "ETCD", first_etcd, peer_port=first_etcd + 1))
    nodes += [Node(f"namesrv-{i}", "namesrv", "NAMESRV", base_port + i) for i in range(namesrvs)]
    port = base_port + namesrvs
    metrics_port = dashboard_port + 1
    first_id = 0 if url is None else 1  # in controller mode 0 is the route's id of the master
    for g in range(brokers):
        name = group_name(g)
        master_ha: str | None = None
        for broker_id in range(first_id, first_id + replicas):
            ha = port + 1
            slave = url is None and broker_id > 0
            nodes.append(Node(
                f"{name}-{broker_id}", "broker", "SLAVE" if slave else role, port,
                broker_name=name, broker_id=broker_id, ha_port=ha,
                grpc_port=port + 2 if grpc else None,
                ha_master_address=master_ha if slave else None,
                metrics_port=metrics_port if metrics else None,
            ))
            if url is None and broker_id == 0:
                master_ha = f"{HOST}:{ha}"
            port += PORTS_PER_BROKER
            metrics_port += 1
    if dashboard:
        nodes.append(Node(DASHBOARD, DASHBOARD, "DASHBOARD", dashboard_port))
    last = max(p for n in nodes for p in n.ports())
    if base_port < 1 or last > 65535:
        raise PlanError(f"--base-port {base_port}: the cluster needs ports {base_port}..{last}, "
                        "within 1..65535")
    return ClusterPlan(dir, tuple(nodes), flush, controller=url)


# ------------------------------------------------------------------------------ cluster.json


@dataclass(slots=True)
class NodeRecord:
    """What ``cluster.json`` keeps of one started node: enough for ``status`` and ``down``.
    ``start_time`` is field 22 of ``/proc/<pid>/stat`` (clock ticks after boot): a PID whose
    process has another start time is another process, which ``down`` leaves alone."""

    name: str
    kind: str
    role: str
    address: str
    ports: dict[str, int]
    log: str
    pid: int | None = None
    start_time: int | None = None
    broker_name: str | None = None
    broker_id: int | None = None

    @classmethod
    def of(cls, plan: ClusterPlan, node: Node, pid: int | None = None,
           start_time: int | None = None) -> NodeRecord:
        ports = {MAIN_PORT.get(node.kind, "remoting"): node.port}
        if node.peer_port is not None:
            ports["peer"] = node.peer_port
        if node.ha_port is not None:
            ports["ha"] = node.ha_port
        if node.grpc_port is not None:
            ports["grpc"] = node.grpc_port
        if node.metrics_port is not None:
            ports["metrics"] = node.metrics_port
        return cls(node.name, node.kind, node.role, node.address, ports, str(plan.log_path(node)),
                   pid, start_time, node.broker_name, node.broker_id)

    @property
    def url(self) -> str | None:
        """The dashboard's address for a browser, a broker's ``/metrics`` (for Prometheus);
        None for a node with neither."""
        host = self.address.rsplit(":", 1)[0]
        if self.kind == DASHBOARD:
            return f"http://{self.address}/"
        if "metrics" in self.ports:
            return f"http://{host}:{self.ports['metrics']}/metrics"
        return None


@dataclass(slots=True)
class ClusterState:
    """``DIR/cluster.json``: the nodes (with PIDs while running), the NameServer address, the
    topics ``up`` created and the controller's etcd URL (None without a controller)."""

    namesrv_addr: str
    nodes: list[NodeRecord]
    topics: list[str] = field(default_factory=list)
    version: int = STATE_VERSION
    controller: str | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClusterState:
        data: dict[str, Any] = json.loads(text)
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"cluster.json version {data.get('version')!r}, expected "
                             f"{STATE_VERSION}")
        nodes = [NodeRecord(**n) for n in data["nodes"]]
        return cls(data["namesrv_addr"], nodes, list(data.get("topics", [])),
                   controller=data.get("controller"))

    def write(self, dir: Path) -> None:  # noqa: A002
        """Write atomically (a temporary file renamed over ``cluster.json``)."""
        tmp = dir / (STATE_FILE + ".tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        tmp.replace(dir / STATE_FILE)

    @classmethod
    def read(cls, dir: Path) -> ClusterState | None:  # noqa: A002
        path = dir / STATE_FILE
        if not path.exists():
            return None
        return cls.from_json(path.read_text(encoding="utf-8"))


def parse_proc_stat(text: str) -> tuple[str, int]:
    """The state letter and the start time (field 22) of a ``/proc/<pid>/stat`` line. The
    command name (field 2) is in parentheses and may hold spaces and parentheses itself, so the
    fields are counted from the last ``)``."""
    rest = text[text.rindex(")") + 2:].split()
    return rest[0], int(rest[19])
