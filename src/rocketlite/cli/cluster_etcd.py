"""``rocketlite cluster`` with a controller: the etcd process ``up --controller etcd`` starts, and
who is master of each group now, as the NameServer routes it and as the controller's state in
etcd records it (master, epoch, SyncStateSet).

``up`` uses ``wait_elected`` to return only once every group has a master in the route and
every replica in the group's SyncStateSet: from then on a master's death is a failover, not an
outage (only a SyncStateSet member may be elected). ``status`` uses ``group_views``.

The etcd client (``aetcd``, through ``rocketlite.controller``) is loaded only here, inside the
functions a controller cluster calls: a plain ``cluster up`` loads none of it.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from rocketlite.cli.cluster_plan import ClusterError, ClusterPlan, Node
from rocketlite.common.errors import RemotingError
from rocketlite.protocol.bodies import ClusterInfo
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

if TYPE_CHECKING:
    from rocketlite.controller.etcd import EtcdController

ETCD_PACKAGE = "etcd-server"  # the Debian package with /usr/bin/etcd
MEMBER = "rocketlite"  # the one etcd member's name


def find_etcd() -> str:
    """The ``etcd`` binary on PATH; ClusterError naming the package when there is none."""
    binary = shutil.which("etcd")
    if binary is None:
        raise ClusterError(f"--controller etcd: no etcd binary on PATH; install the Debian "
                           f"package {ETCD_PACKAGE} (apt-get install {ETCD_PACKAGE}), or give "
                           "an existing etcd as --controller etcd://host:port")
    return binary


def etcd_command(binary: str, data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    """A one-member etcd on loopback: client URL on ``client_port``, peer URL on ``peer_port``,
    its data in ``data_dir``."""
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    return [binary, "--name", MEMBER, "--data-dir", str(data_dir),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{MEMBER}={peer}"]


def etcd_healthy(url: str, timeout: float = 0.5) -> bool:
    """Whether the etcd at ``etcd://host:port`` answers its ``/health`` endpoint healthy."""
    parts = urlsplit(url)
    try:
        with urllib.request.urlopen(f"http://{parts.hostname}:{parts.port}/health",
                                    timeout=timeout) as r:
            return b'"true"' in r.read()
    except OSError:
        return False


async def route_masters(client: RemotingClient, ns: str) -> dict[str, str]:
    """Each group's master address in the NameServer ``ns``'s route (brokerId 0)."""
    r = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3.0)
    if r.code != ResponseCode.SUCCESS:
        raise ClusterError(f"the NameServer at {ns}: {r.remark}")
    table = ClusterInfo.from_json(r.body).brokerAddrTable
    return {name: bd.brokerAddrs[0] for name, bd in table.items() if 0 in bd.brokerAddrs}


@dataclass(slots=True)
class GroupStatus:
    """One group as ``status`` shows it: the master the route names (its address and node), and
    the controller's master id, epoch, SyncStateSet and live replicas; ``error`` says what could
    not be read."""

    group: str
    route_master: str | None = None
    route_master_node: str | None = None
    master_id: int | None = None
    epoch: int | None = None
    sync_state_set: list[int] = field(default_factory=list)
    live: list[int] = field(default_factory=list)
    error: str | None = None

    def describe(self) -> str:
        """One line for an operator."""
        master = (f"{self.route_master_node or '?'} ({self.route_master})" if self.route_master
                  else "none in the route")
        out = f"{self.group}: master {master}"
        if self.epoch is not None:
            out += (f"; controller: master brokerId {self.master_id}, epoch {self.epoch}, "
                    f"SyncStateSet {self.sync_state_set}, live {self.live}")
        if self.error:
            out += f"; {self.error}"
        return out


async def group_views(url: str, cluster_name: str, ns: str | None,
                      groups: dict[str, dict[str, str]], ask_etcd: bool = True
                      ) -> list[GroupStatus]:
    """``groups`` (brokerName → {Remoting address: node name}) as the NameServer ``ns`` and the
    controller at ``url`` see them now; what cannot be read is in each row's ``error``. ``ns``
    None or ``ask_etcd`` false: that one does not run, and is not asked (no wait on a timeout)."""
    from rocketlite.controller.etcd import EtcdController  # controller mode only: loads aetcd
    from rocketlite.controller.state import ControllerError

    rows = [GroupStatus(g) for g in groups]
    masters: dict[str, str] = {}
    if ns is None:
        for row in rows:
            row.error = "no NameServer runs"
    else:
        client = RemotingClient()
        try:
            masters = await route_masters(client, ns)
        except (TimeoutError, OSError, RemotingError, ClusterError) as e:
            for row in rows:
                row.error = f"NameServer {ns}: {str(e) or type(e).__name__}"
        finally:
            await client.close()
    for row in rows:
        row.route_master = masters.get(row.group)
        if row.route_master is not None:
            row.route_master_node = groups[row.group].get(row.route_master)
    if not ask_etcd:
        for row in rows:
            row.error = "; ".join(filter(None, [row.error, f"etcd {url} does not run"]))
        return rows
    etcd = EtcdController(url, timeout=2.0)
    try:
        for row in rows:
            try:
                view = await etcd.get_group(cluster_name, row.group)
            except ControllerError as e:
                row.error = "; ".join(filter(None, [row.error, str(e)]))
                continue
            row.master_id, row.epoch = view.state.master_id, view.state.master_epoch
            row.sync_state_set = sorted(view.state.sync_state_set)
            row.live = sorted(view.replicas)
    finally:
        await etcd.close()
    return rows


async def _group_ready(etcd: EtcdController, client: RemotingClient, cluster: ClusterPlan,
                       group: str, nodes: tuple[Node, ...]) -> str | None:
    """Why ``group`` is not yet ready for a failover (None when it is): no master elected, the
    route not naming it yet, or a replica not in the SyncStateSet."""
    view = await etcd.get_group(cluster.cluster_name, group)
    master = view.master
    if master is None:
        return f"{group}: no master elected (live replicas {sorted(view.replicas)})"
    routed = (await route_masters(client, cluster.namesrvs[0].address)).get(group)
    if routed != master.address:
        return (f"{group}: the controller elected brokerId {master.broker_id} "
                f"({master.address}); the route names {routed}")
    want = {n.broker_id for n in nodes}
    if set(view.state.sync_state_set) != want:
        return (f"{group}: SyncStateSet {sorted(view.state.sync_state_set)}, not yet every "
                f"replica {sorted(i for i in want if i is not None)}")
    return None


async def wait_elected(cluster: ClusterPlan, within: float) -> dict[str, str]:
    """Wait until every group has a master elected by the controller and named by the route,
    with every replica in its SyncStateSet; each group's master node name. ClusterError with
    the last reason after ``within`` seconds."""
    from rocketlite.controller.etcd import EtcdController  # controller mode only: loads aetcd
    from rocketlite.controller.state import ControllerError

    assert cluster.controller is not None
    etcd = EtcdController(cluster.controller)
    client = RemotingClient()
    deadline = time.monotonic() + within
    groups = cluster.groups
    try:
        pending = dict(groups)
        while pending:
            why = ""
            for group, nodes in list(pending.items()):
                try:
                    reason = await _group_ready(etcd, client, cluster, group, nodes)
                except (TimeoutError, ControllerError, OSError) as e:
                    reason = f"{group}: {str(e) or type(e).__name__}"
                if reason is None:
                    del pending[group]
                else:
                    why = reason
            if pending and time.monotonic() > deadline:
                raise ClusterError(f"not ready for failover within {within:g} s: {why}")
            if pending:
                await asyncio.sleep(0.2)
        masters = await route_masters(client, cluster.namesrvs[0].address)
    finally:
        await client.close()
        await etcd.close()
    by_addr = {n.address: n.name for n in cluster.brokers}
    return {g: by_addr.get(masters[g], masters[g]) for g in groups}
