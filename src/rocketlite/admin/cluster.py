"""Clusters and brokers: ``clusterList``, ``brokerStatus`` and ``haStatus``.

``cluster_list``: every broker the NameServer registered (GET_BROKER_CLUSTER_INFO), each with the
figures of its GET_BROKER_RUNTIME_INFO (version, put/get tps, today's counts, CommitLog max
offset), as mqadmin's ``clusterList`` shows them. A registered broker that does not answer is
listed with the reason instead of its figures: one dead replica must not hide the others.

``broker_status``: the whole runtime-info table of a broker, or of every master of a cluster.

``ha_status``: the replication state of a broker or of each master of a cluster, from
GET_BROKER_HA_STATUS (907, ``HARuntimeInfo``, see ``broker/admin.py``). For a master, each
connected slave's address, acked offset (its CommitLog max offset as last reported), lag in bytes
(the master's max offset - acked: ``HAConnectionRuntimeInfo.diff``, mqadmin's ``#Diff``), lag in
seconds and whether it is in sync (lag below haMaxGapNotInSync). RocketMQ has no lag in time;
rocketlite's is the time since the slave was last known to hold everything the master held
(``lagMillis``, defined in ``broker/ha/server.py``): 0 once it caught up, growing by the second
while it applies nothing. For a slave: the HA address it replicates from and its max offset.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rocketlite.admin.errors import AdminError
from rocketlite.admin.session import AdminSession
from rocketlite.common.errors import FormatError
from rocketlite.protocol.bodies import KVTable
from rocketlite.protocol.codes import RequestCode


@dataclasses.dataclass(slots=True)
class BrokerEntry:
    """One registered broker (``clusterList``'s row); ``error`` set when it did not answer."""

    cluster: str
    broker_name: str
    broker_id: int
    address: str
    role: str = ""
    version: str = ""
    put_tps: float = 0.0
    get_tps: float = 0.0
    msg_put_today: int = 0
    msg_get_today: int = 0
    commit_log_max_offset: int = 0
    runtime: str = ""
    error: str | None = None


@dataclasses.dataclass(slots=True)
class BrokerStatus:
    """A broker's GET_BROKER_RUNTIME_INFO table (``brokerStatus``), keys sorted."""

    broker: str
    table: dict[str, str]


@dataclasses.dataclass(slots=True)
class HaSlave:
    address: str | None
    acked_offset: int | None
    lag_bytes: int | None
    lag_seconds: float
    in_sync: bool | None
    transfer_from_where: int | None


@dataclasses.dataclass(slots=True)
class HaMasterView:
    broker: str
    master: bool
    max_offset: int
    in_sync_slaves: int
    slaves: list[HaSlave]


@dataclasses.dataclass(slots=True)
class HaSlaveView:
    broker: str
    master: bool
    master_ha_address: str | None
    max_offset: int
    last_read_timestamp: int


def _int(table: dict[str, str], key: str) -> int:
    try:
        return int(table.get(key, "0"))
    except ValueError:
        return 0


def _float(table: dict[str, str], key: str) -> float:
    try:
        return float(table.get(key, "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


async def runtime_info(session: AdminSession, addr: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO (28) of the broker at ``addr``: its key/value table."""
    reply = await session.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    try:
        return dict(sorted(KVTable.from_json(reply.body or b"{}").table.items()))
    except FormatError as e:
        raise AdminError(f"broker {addr} answered a malformed runtime info: {e}") from e


async def cluster_list(session: AdminSession, cluster: str | None = None) -> list[BrokerEntry]:
    """Every broker of every cluster (or of ``cluster``), sorted by cluster, name and id."""
    ci = await session.cluster_info()
    clusters = sorted(ci.clusterAddrTable)
    if cluster is not None:
        if cluster not in ci.clusterAddrTable:
            raise AdminError(f"cluster {cluster!r} does not exist (known: "
                             f"{', '.join(clusters) or 'none'})")
        clusters = [cluster]
    out: list[BrokerEntry] = []
    for c in clusters:
        for name in sorted(ci.clusterAddrTable[c]):
            bd = ci.brokerAddrTable.get(name)
            for bid, addr in sorted((bd.brokerAddrs if bd is not None else {}).items()):
                entry = BrokerEntry(c, name, bid, addr)
                try:
                    t = await runtime_info(session, addr)
                except AdminError as e:
                    entry.error = str(e)
                else:
                    entry.role = t.get("brokerRole", "")
                    entry.version = t.get("brokerVersionDesc", "")
                    entry.put_tps, entry.get_tps = _float(t, "putTps"), _float(t, "getTransferedTps")
                    entry.msg_put_today = _int(t, "msgPutTotalTodayNow")
                    entry.msg_get_today = _int(t, "msgGetTotalTodayNow")
                    entry.commit_log_max_offset = _int(t, "commitLogMaxOffset")
                    entry.runtime = t.get("runtime", "")
                out.append(entry)
    return out


async def broker_status(session: AdminSession, broker_addr: str | None = None,
                        cluster: str | None = None) -> list[BrokerStatus]:
    """The runtime-info table of ``broker_addr`` or of each master of ``cluster``."""
    return [BrokerStatus(addr, await runtime_info(session, addr))
            for addr in await session.targets(broker_addr, cluster)]


def _ha_view(addr: str, info: dict[str, Any]) -> HaMasterView | HaSlaveView:
    """One broker's figures from its ``HARuntimeInfo``."""
    if info.get("master"):
        return HaMasterView(
            addr, True, info.get("masterCommitLogMaxOffset", 0), info.get("inSyncSlaveNums", 0),
            [HaSlave(c.get("addr"), c.get("slaveAckOffset"), c.get("diff"),
                     round(int(c.get("lagMillis", 0)) / 1000, 3), c.get("inSync"),
                     c.get("transferFromWhere"))
             for c in info.get("haConnectionInfo") or []])
    client = info.get("haClientRuntimeInfo") or {}
    return HaSlaveView(addr, False, client.get("masterAddr"), client.get("maxOffset", 0),
                       client.get("lastReadTimestamp", 0))


async def ha_status(session: AdminSession, broker_addr: str | None = None,
                    cluster: str | None = None) -> list[HaMasterView | HaSlaveView]:
    """The replication figures of ``broker_addr``, or of each master of ``cluster``."""
    out: list[HaMasterView | HaSlaveView] = []
    for addr in await session.targets(broker_addr, cluster):
        reply = await session.call(addr, RequestCode.GET_BROKER_HA_STATUS)
        try:
            info = json.loads(reply.body or b"")
        except ValueError as e:
            raise AdminError(f"broker {addr} answered GET_BROKER_HA_STATUS with a body that is "
                             f"not JSON: {e}") from e
        out.append(_ha_view(addr, info))
    return out
