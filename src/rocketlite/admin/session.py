"""``AdminSession``: one connection pool and the NameServer list, shared by the admin functions of
one command (or, later, by a dashboard for its lifetime), and the ACL credentials its requests
are signed with.

Every request goes through :meth:`AdminSession.call`, which turns what can go wrong on the wire
(no connection, no answer in time, an error code) into an :class:`AdminError` naming the peer and
the request: the CLI prints that line, the dashboard shows it.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Self, TypeVar

from rocketlite.acl.sign import Credentials
from rocketlite.admin.errors import AdminError, TopicNotFoundError, UnreachableError
from rocketlite.common.errors import FormatError, RemotingError
from rocketlite.protocol.bodies import BrokerData, ClusterInfo, JsonBody, TopicList, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import GetRouteInfoRequestHeader, Header
from rocketlite.remoting.acl_gate import request_signer
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.tls import TlsOption

B = TypeVar("B", bound=JsonBody)

DEFAULT_TIMEOUT_S = 5.0
MASTER_ID = 0
PERM_WRITE = 2


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return "UNKNOWN"


def _request_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


def split_namesrv(namesrv: str | None) -> list[str]:
    """``host:port[;host:port]`` (RocketMQ's ``namesrvAddr``) as a list; empty entries dropped."""
    return [a.strip() for a in (namesrv or "").split(";") if a.strip()]


class AdminSession:
    """The client side of the admin functions: a ``RemotingClient``, the NameServers to ask (in
    order, the next one when one cannot be reached) and a per-request timeout; ``tls`` as
    ``RemotingClient``'s (True, or an ``ssl.SSLContext``)."""

    def __init__(self, namesrv: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 tls: TlsOption = None, credentials: Credentials | None = None) -> None:
        self.namesrv = namesrv or ""
        self.namesrvs = split_namesrv(namesrv)
        self.timeout_s = timeout_s
        # ACL: every request is signed with these (and the producers and consumers the admin
        # functions start take them too)
        self.credentials = credentials
        self.client = RemotingClient(
            connect_timeout=min(3.0, timeout_s), tls=tls,
            signer=None if credentials is None else request_signer(credentials))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self.client.close()

    # -- requests ------------------------------------------------------------------------------

    async def call(self, addr: str, code: RequestCode, header: Header | None = None,
                   body: bytes = b"", *, what: str = "broker",
                   accept: Iterable[int] = (ResponseCode.SUCCESS,),
                   timeout_s: float | None = None) -> RemotingCommand:
        """Send one request to ``addr`` (a ``what``: "broker", "NameServer") and return the reply
        when its code is in ``accept``; AdminError otherwise or when ``addr`` cannot be asked."""
        cmd = RemotingCommand.request(code, header.to_ext() if header is not None else None, body)
        try:
            reply = await self.client.invoke(addr, cmd, timeout_s or self.timeout_s)
        except (RemotingError, OSError, TimeoutError) as e:
            self.client.drop(addr)
            raise UnreachableError(f"cannot reach {what} {addr}: {str(e) or type(e).__name__}") from e
        if reply.code not in set(accept):
            raise AdminError(f"{what} {addr} refused {_request_name(code)}: "
                             f"{_code_name(reply.code)} ({reply.code}) {reply.remark or ''}".rstrip())
        return reply

    async def namesrv_call(self, code: RequestCode, header: Header | None = None, *,
                           accept: Iterable[int] = (ResponseCode.SUCCESS,)
                           ) -> tuple[str, RemotingCommand]:
        """``call`` the first NameServer that can be reached; (its address, the reply)."""
        if not self.namesrvs:
            raise AdminError("no NameServer address: give -n/--namesrv host:port")
        unreachable: list[str] = []
        for addr in self.namesrvs:
            try:
                return addr, await self.call(addr, code, header, what="NameServer", accept=accept)
            except UnreachableError as e:
                unreachable.append(str(e))
        raise UnreachableError("; ".join(unreachable))

    # -- NameServer lookups ----------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: the clusters and the brokers registered in them."""
        addr, reply = await self.namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO)
        try:
            return ClusterInfo.from_json(reply.body or b"{}")
        except FormatError as e:
            raise AdminError(f"NameServer {addr} answered a malformed cluster info: {e}") from e

    async def route(self, topic: str) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC; AdminError "topic ... does not exist" when no broker serves it."""
        header = GetRouteInfoRequestHeader(topic=topic, acceptStandardJsonOnly=True)
        addr, reply = await self.namesrv_call(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, header,
            accept=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotFoundError(f"topic {topic!r} does not exist (no route at NameServer {addr})")
        try:
            route = TopicRouteData.from_json(reply.body or b"{}")
        except FormatError as e:
            raise AdminError(f"NameServer {addr} answered a malformed route of {topic!r}: {e}") from e
        if all(qd.readQueueNums == 0 and qd.perm == PERM_WRITE for qd in route.queueDatas) \
                and topic not in await self.topics():
            # rocketlite's NameServer answers an unknown topic with TBW102's queues, write-only
            # and unreadable, so that a producer's first send creates it (autoCreateTopicEnable)
            raise TopicNotFoundError(f"topic {topic!r} does not exist (not created on any "
                                     f"broker known to NameServer {addr})")
        return route

    async def topics(self) -> set[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic some broker registered."""
        addr, reply = await self.namesrv_call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        try:
            return TopicList.from_json(reply.body or b"{}").topicList
        except FormatError as e:
            raise AdminError(f"NameServer {addr} answered a malformed topic list: {e}") from e

    async def master_addrs(self, cluster: str) -> dict[str, str]:
        """Broker name -> master address of each group of ``cluster`` (a group without a master
        registered is left out); AdminError when the NameServer knows no such cluster."""
        ci = await self.cluster_info()
        names = ci.clusterAddrTable.get(cluster)
        if not names:
            raise AdminError(f"cluster {cluster!r} does not exist (known: "
                             f"{', '.join(sorted(ci.clusterAddrTable)) or 'none'})")
        return {name: addr for name in sorted(names)
                if (bd := ci.brokerAddrTable.get(name)) is not None
                and (addr := bd.brokerAddrs.get(MASTER_ID)) is not None}


    async def all_masters(self) -> dict[str, str]:
        """Broker name -> master address of every group of every cluster the NameServer knows."""
        ci = await self.cluster_info()
        return {name: addr for name, bd in sorted(ci.brokerAddrTable.items())
                if (addr := bd.brokerAddrs.get(MASTER_ID)) is not None}

    async def targets(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        """``broker_addr``, or the master address of each group of ``cluster`` (exactly one
        given): the brokers a ``-b``/``-c`` command acts on."""
        if (broker_addr is None) == (cluster is None):
            raise AdminError("give exactly one of a broker address and a cluster")
        if broker_addr is not None:
            return [broker_addr]
        assert cluster is not None
        addrs = sorted((await self.master_addrs(cluster)).values())
        if not addrs:
            raise AdminError(f"cluster {cluster!r} has no master registered")
        return addrs


def decode(cls: type[B], reply: RemotingCommand, addr: str, what: str) -> B:
    """``reply``'s body as a ``cls``; AdminError naming the broker and the request (``what``)
    when it cannot be read."""
    try:
        return cls.from_json(reply.body or b"{}")
    except FormatError as e:
        raise AdminError(f"broker {addr} answered a malformed {what}: {e}") from e


def route_masters(route: TopicRouteData) -> dict[str, str]:
    """Broker name -> master address of each broker group in ``route`` (one without a master
    left out)."""
    return {bd.brokerName: addr for bd in sorted(route.brokerDatas, key=lambda b: b.brokerName)
            if (addr := bd.brokerAddrs.get(MASTER_ID)) is not None}


def broker_addr(route: TopicRouteData, broker_name: str, *, master: bool = True) -> str:
    """The address of ``broker_name`` in ``route``: its master, or (``master=False`` or when it has
    none) its lowest-id replica; AdminError when the route does not name it."""
    bd: BrokerData | None = next((b for b in route.brokerDatas if b.brokerName == broker_name), None)
    if bd is None or not bd.brokerAddrs:
        known = sorted(b.brokerName for b in route.brokerDatas)
        raise AdminError(f"broker {broker_name!r} is not in the route (brokers: "
                         f"{', '.join(known) or 'none'})")
    if master and MASTER_ID in bd.brokerAddrs:
        return bd.brokerAddrs[MASTER_ID]
    return bd.brokerAddrs[min(bd.brokerAddrs)]
