"""ClientInstance: what producers and consumers of one client share (Java's ``MQClientInstance``).

It owns the Remoting connections, the NameServer list, the topic routes and broker addresses, and
the periodic work: routes refreshed every ``poll_name_server_interval`` (30 s), heartbeats to every
broker every ``heartbeat_interval`` (30 s), consumer rebalance every ``rebalance_interval`` (20 s,
and at once on NOTIFY_CONSUMER_IDS_CHANGED), consumer offsets persisted every
``persist_offset_interval`` (5 s). A send or pull that fails in transport (the broker cannot be
connected to, the connection dropped, no answer) also refreshes its topic's route at once, in the
background and at most once a second per topic (``route_failed``): a failover, a new master
under the same broker name, is then picked up in about a second instead of at the next poll
(Java waits for the poll). Requests from brokers (NOTIFY_CONSUMER_IDS_CHANGED,
CHECK_TRANSACTION_STATE, RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_RUNNING_INFO) are routed to the
producer or consumer of their group.

Each producer or consumer makes its own instance: the client id is ``ip@instanceName`` and the
default instance name is ``pid#nanos`` (as Java 5 does), unique per client object, so two consumers
of one group in one process are two group members.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from rocketlite.acl.sign import Credentials
from rocketlite.client import running_info
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.common.errors import FormatError, RemotingError
from rocketlite.protocol.admin_bodies import ResetOffsetBody
from rocketlite.protocol.admin_headers import ResetOffsetRequestHeader
from rocketlite.protocol.bodies import (
    ConsumerData,
    HeartbeatData,
    MessageQueue,
    ProducerData,
    TopicList,
    TopicRouteData,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    GetRouteInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from rocketlite.protocol.running_info import ConsumerRunningInfo
from rocketlite.remoting.acl_gate import request_signer
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.tls import TlsOption

log = logging.getLogger(__name__)

MASTER_ID = 0
MAX_TOPICS = 10_000
ROUTE_REFRESH_GAP_S = 1.0  # at most one refresh a second per topic after failed requests


@dataclass(slots=True, kw_only=True)
class ClientConfig:
    """Settings every client shares (``ClientConfig.java``). ``namesrv_addr`` is
    ``host:port;host:port``; empty means the ``NAMESRV_ADDR`` environment variable. ``tls``
    (Java's ``tls.enable``): True connects to NameServers and brokers with TLS verified against
    the system's CAs, an ``ssl.SSLContext`` with that context (a private CA, a client certificate;
    ``remoting.tls.make_client_context``)."""

    namesrv_addr: str = ""
    instance_name: str | None = None
    client_ip: str | None = None
    request_timeout: float = 3.0
    poll_name_server_interval: float = 30.0
    heartbeat_interval: float = 30.0
    persist_offset_interval: float = 5.0
    rebalance_interval: float = 20.0
    unit_name: str | None = None
    tls: TlsOption = None
    # ACL: every request is signed with these (``SessionCredentials``); None: unsigned
    credentials: Credentials | None = None

    def namesrv_list(self) -> list[str]:
        text = self.namesrv_addr or os.environ.get("NAMESRV_ADDR", "")
        addrs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
        if not addrs:
            raise MQClientError("no NameServer address: pass namesrv_addr='host:9876' or set NAMESRV_ADDR")
        return addrs


CredentialsLike = Credentials | tuple[str, str] | tuple[str, str, str | None]
"""``(access_key, secret_key)``, ``(access_key, secret_key, security_token)`` or ``Credentials``."""


def client_config(config: ClientConfig | None, namesrv_addr: str,
                  credentials: CredentialsLike | None) -> ClientConfig:
    """A client's settings: ``config`` (else one for ``namesrv_addr``), with ``credentials``
    when given."""
    cfg = config or ClientConfig(namesrv_addr=namesrv_addr)
    if credentials is not None:
        cfg = dataclasses.replace(cfg, credentials=Credentials.of(credentials))
    return cfg


def local_ip() -> str:
    """The address other hosts would see (no packet is sent: UDP connect only picks a route)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


class ProducerPeer(Protocol):
    group: str

    def topics(self) -> Iterable[str]: ...

    def on_route(self, topic: str, route: TopicRouteData) -> None: ...

    def on_check_transaction(self, addr: str, cmd: RemotingCommand) -> None: ...


class ConsumerPeer(Protocol):
    group: str

    def topics(self) -> Iterable[str]: ...

    def on_route(self, topic: str, route: TopicRouteData) -> None: ...

    def consumer_data(self) -> ConsumerData: ...

    async def rebalance(self) -> None: ...

    async def persist_offsets(self) -> None: ...

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...

    def running_info(self) -> ConsumerRunningInfo: ...


class ClientInstance:
    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.namesrv_addrs = config.namesrv_list()
        self.client_ip = config.client_ip or local_ip()
        instance = config.instance_name or f"{os.getpid()}#{time.monotonic_ns()}"
        self.client_id = f"{self.client_ip}@{instance}" + (f"@{config.unit_name}" if config.unit_name else "")
        signer = None if config.credentials is None else request_signer(config.credentials)
        self.remoting = RemotingClient(self._on_request, connect_timeout=config.request_timeout,
                                       tls=config.tls, signer=signer)
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.producers: dict[str, ProducerPeer] = {}
        self.consumers: dict[str, ConsumerPeer] = {}
        self._ns_index = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._resets: set[asyncio.Task[None]] = set()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._rebalance_now = asyncio.Event()
        self._started = False
        self._route_lock = asyncio.Lock()
        self.route_refresh_gap = ROUTE_REFRESH_GAP_S
        self._route_refresh_at: dict[str, float] = {}  # topic -> earliest next failure refresh
        self._route_tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        c = self.config
        self._tasks = [
            asyncio.create_task(self._every(c.poll_name_server_interval, self.refresh_routes), name="routes"),
            asyncio.create_task(self._every(c.heartbeat_interval, self.send_heartbeat), name="heartbeat"),
            asyncio.create_task(self._every(c.persist_offset_interval, self._persist_all), name="persist"),
            asyncio.create_task(self._rebalance_loop(), name="rebalance"),
        ]

    async def close(self) -> None:
        """Stop the periodic work, unregister from every broker, close the connections."""
        tasks, self._tasks = [*self._tasks, *self._resets, *self._route_tasks], []
        self._resets.clear()
        self._route_tasks.clear()
        if self._heartbeat_task is not None:
            tasks.append(self._heartbeat_task)
            self._heartbeat_task = None
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await self.remoting.close()
        self._started = False

    async def _every(self, interval: float, work: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await work()
            except (MQClientError, MQBrokerError, RemotingError, FormatError) as e:
                log.warning("%s: %s", getattr(work, "__name__", "periodic work"), e)
            except Exception:
                log.exception("%s failed", getattr(work, "__name__", "periodic work"))

    async def _rebalance_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.rebalance_interval):
                    await self._rebalance_now.wait()
            self._rebalance_now.clear()
            await self.rebalance_all()

    def rebalance_soon(self) -> None:
        self._rebalance_now.set()

    async def rebalance_all(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.rebalance()
            except (MQClientError, MQBrokerError, RemotingError, FormatError) as e:
                log.warning("rebalance of %s: %s", consumer.group, e)
            except Exception:
                log.exception("rebalance of %s failed", consumer.group)

    async def _persist_all(self) -> None:
        for consumer in list(self.consumers.values()):
            await consumer.persist_offsets()

    # -- registry -------------------------------------------------------------------------------

    def register_producer(self, producer: ProducerPeer) -> None:
        if producer.group in self.producers:
            raise MQClientError(f"producer group {producer.group!r} is already registered on "
                                f"{self.client_id}")
        self.producers[producer.group] = producer

    def register_consumer(self, consumer: ConsumerPeer) -> None:
        if consumer.group in self.consumers:
            raise MQClientError(f"consumer group {consumer.group!r} is already registered on "
                                f"{self.client_id}")
        self.consumers[consumer.group] = consumer

    async def unregister(self, *, producer_group: str | None = None,
                         consumer_group: str | None = None) -> None:
        """Drop the group and tell every broker (UNREGISTER_CLIENT), as Java does at shutdown."""
        if producer_group is not None:
            self.producers.pop(producer_group, None)
        if consumer_group is not None:
            self.consumers.pop(consumer_group, None)
        header = UnregisterClientRequestHeader(
            clientID=self.client_id, producerGroup=producer_group, consumerGroup=consumer_group)
        for addr in self._all_broker_addrs():
            with contextlib.suppress(RemotingError, MQBrokerError, MQClientError):
                await self.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT,
                                                                header.to_ext()))

    # -- requests -------------------------------------------------------------------------------

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float | None = None,  # noqa: ASYNC109
                     ) -> RemotingCommand:
        """One request to ``addr``; ``RemotingError`` subclasses become ``MQClientError``."""
        try:
            return await self.remoting.invoke(addr, cmd, self.config.request_timeout if timeout is None
                                              else timeout)
        except RemotingError as e:
            raise MQClientError(str(e)) from e

    async def invoke_ok(self, addr: str, cmd: RemotingCommand, timeout: float | None = None,  # noqa: ASYNC109
                        ) -> RemotingCommand:
        """Like ``invoke`` but any code other than SUCCESS raises ``MQBrokerError``."""
        reply = await self.invoke(addr, cmd, timeout)
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, addr)
        return reply

    async def invoke_namesrv(self, cmd: RemotingCommand) -> RemotingCommand:
        """Ask the NameServers in turn, starting with the one that answered last."""
        errors = []
        n = len(self.namesrv_addrs)
        for i in range(n):
            addr = self.namesrv_addrs[(self._ns_index + i) % n]
            try:
                reply = await self.remoting.invoke(addr, cmd, self.config.request_timeout)
            except RemotingError as e:
                errors.append(f"{addr}: {e}")
                self.remoting.drop(addr)
                continue
            self._ns_index = (self._ns_index + i) % n
            return reply
        raise MQClientError("no NameServer answered: " + "; ".join(errors))

    async def connection(self, addr: str) -> Connection:
        try:
            return await self.remoting.connection(addr)
        except RemotingError as e:
            raise MQClientError(str(e)) from e

    # -- routes ---------------------------------------------------------------------------------

    async def fetch_route(self, topic: str) -> TopicRouteData | None:
        """The NameServer's route for ``topic``; None when it has none (TOPIC_NOT_EXIST)."""
        header = GetRouteInfoRequestHeader(topic=topic)
        reply = await self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  header.to_ext()))
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, "the NameServer")
        try:
            return TopicRouteData.from_json(reply.body)
        except FormatError as e:
            raise MQClientError(f"the NameServer's route for {topic!r} is malformed: {e}") from e

    async def fetch_topic_list(self) -> set[str]:
        """Every topic the NameServer knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), system ones too."""
        reply = await self.invoke_namesrv(RemotingCommand.request(
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, "the NameServer")
        try:
            return set(TopicList.from_json(reply.body).topicList)
        except FormatError as e:
            raise MQClientError(f"the NameServer's topic list is malformed: {e}") from e

    async def update_route(self, topic: str) -> TopicRouteData | None:
        """Fetch, cache and hand ``topic``'s route to the producers and consumers that use it."""
        route = await self.fetch_route(topic)
        if route is None:
            return None
        if topic not in self.routes and len(self.routes) >= MAX_TOPICS:
            raise MQClientError(f"this client already follows {MAX_TOPICS} topics")
        self.routes[topic] = route
        self.learn_brokers(route)
        for peer in self._peers():
            if topic in peer.topics():
                peer.on_route(topic, route)
        return route

    def route_failed(self, topic: str) -> None:
        """A request to a broker of ``topic`` failed in transport (cannot connect, connection
        dropped, timed out): refresh the topic's route in the background, unless that was done
        less than ``route_refresh_gap`` (1 s) ago. Costs a clock read when rate-limited; never
        waits."""
        if not self._started:
            return
        now = time.monotonic()
        refresh_at = self._route_refresh_at
        if refresh_at.get(topic, 0.0) > now:
            return
        if len(refresh_at) >= MAX_TOPICS:
            refresh_at.clear()
        refresh_at[topic] = now + self.route_refresh_gap
        task = asyncio.get_running_loop().create_task(self._refresh_route(topic),
                                                      name=f"route-{topic}")
        self._route_tasks.add(task)
        task.add_done_callback(self._route_tasks.discard)

    async def _refresh_route(self, topic: str) -> None:
        try:
            route = await self.update_route(topic)
        except (MQClientError, MQBrokerError, RemotingError, FormatError) as e:
            log.warning("route of %s after a failed request: %s", topic, e)
            return
        except Exception:
            log.exception("refreshing the route of %s after a failed request failed", topic)
            return
        if route is not None:
            log.debug("route of %s refreshed after a failed request: %s", topic,
                      {bd.brokerName: bd.brokerAddrs for bd in route.brokerDatas})

    async def route_subscriptions(self, group: str, topics: list[str]) -> None:
        """Fetch the routes of a starting consumer's topics; a topic the NameServer does not know
        is logged as a warning (a typo would otherwise mean a consumer that silently receives
        nothing): the consumer still starts and picks the topic up once it is created. The
        group's own retry topic is left out (it exists once a message is sent back)."""
        for topic in topics:
            try:
                route = await self.update_route(topic)
            except (MQClientError, MQBrokerError) as e:
                log.warning("group %s: no route for %s yet: %s", group, topic, e)
                continue
            if route is None and not topic.startswith("%RETRY%"):
                log.warning("group %s subscribes to topic %s, which does not exist (the NameServer "
                            "has no route for it): nothing arrives until it is created", group, topic)

    def learn_brokers(self, route: TopicRouteData) -> None:
        """Record the route's broker addresses; a broker not told about our groups yet gets a
        heartbeat now rather than within 30 s (so it can reach a transactional producer's
        check-back, or count a new consumer)."""
        learned = False
        for bd in route.brokerDatas:
            addrs = dict(bd.brokerAddrs)
            learned = learned or self.broker_addrs.get(bd.brokerName) != addrs
            self.broker_addrs[bd.brokerName] = addrs
        if learned:
            self._heartbeat_soon()

    async def refresh_routes(self) -> None:
        topics: set[str] = set()
        for peer in self._peers():
            topics.update(peer.topics())
        for topic in sorted(topics):
            try:
                await self.update_route(topic)
            except (MQClientError, MQBrokerError) as e:
                log.warning("route of %s: %s", topic, e)
        in_use = {bd.brokerName for r in self.routes.values() for bd in r.brokerDatas}
        for name in [n for n in self.broker_addrs if n not in in_use]:
            del self.broker_addrs[name]

    def _peers(self) -> list[ProducerPeer | ConsumerPeer]:
        return [*self.producers.values(), *self.consumers.values()]

    def broker_addr(self, broker_name: str, *, master: bool = True) -> str | None:
        """The master's address, or (``master=False``) any replica's, preferring the master."""
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        if master:
            return None
        return addrs[min(addrs)]

    def broker_addr_in_subscribe(self, broker_name: str, broker_id: int) -> tuple[str, bool] | None:
        """Where to read from (Java's ``findBrokerAddressInSubscribe`` without
        ``onlyThisBroker``): ``broker_id``'s address, else for a slave id the next id's, else
        the master's, else the lowest id's; with whether it is a slave. None: no address known."""
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        for bid in (broker_id, broker_id + 1) if broker_id != MASTER_ID else (broker_id,):
            if bid in addrs:
                return addrs[bid], bid != MASTER_ID
        bid = MASTER_ID if MASTER_ID in addrs else min(addrs)
        return addrs[bid], bid != MASTER_ID

    async def require_broker_addr(self, broker_name: str, topic: str, *, master: bool = True) -> str:
        addr = self.broker_addr(broker_name, master=master)
        if addr is None:
            await self.update_route(topic)
            addr = self.broker_addr(broker_name, master=master)
        if addr is None:
            raise MQClientError(f"broker {broker_name!r} has no {'master ' if master else ''}address "
                                f"in the route of {topic!r}")
        return addr

    def _all_broker_addrs(self) -> list[str]:
        return sorted({a for addrs in self.broker_addrs.values() for a in addrs.values()})

    # -- heartbeat ------------------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            clientID=self.client_id,
            producerDataSet=[ProducerData(groupName=g) for g in sorted(self.producers)],
            consumerDataSet=[c.consumer_data() for _, c in sorted(self.consumers.items())],
        )

    def _heartbeat_soon(self) -> None:
        if not self._started or (self._heartbeat_task is not None and not self._heartbeat_task.done()):
            return
        self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_now(),
                                                                      name="heartbeat-now")

    async def _heartbeat_now(self) -> None:
        try:
            await self.send_heartbeat()
        except Exception:
            log.exception("heartbeat failed")

    async def send_heartbeat(self) -> None:
        """HEART_BEAT to every broker (masters only when there are no consumers, like Java)."""
        if not self.producers and not self.consumers:
            return
        body = self.heartbeat_data().to_json()
        for name, addrs in list(self.broker_addrs.items()):
            for broker_id, addr in sorted(addrs.items()):
                if broker_id != MASTER_ID and not self.consumers:
                    continue
                try:
                    await self.invoke_ok(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body))
                except (MQClientError, MQBrokerError) as e:
                    log.warning("heartbeat to %s (%s): %s", name, addr, e)

    # -- requests from brokers ------------------------------------------------------------------

    def _on_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            try:
                group = NotifyConsumerIdsChangedRequestHeader.from_ext(cmd.ext_fields).consumerGroup
            except FormatError:
                group = "?"
            log.info("consumer ids of %s changed: rebalancing now", group)
            self.rebalance_soon()
            return None
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            group = cmd.ext_fields.get("PGROUP") or _property_group(cmd) or ""
            producer = self.producers.get(group)
            if producer is not None:
                producer.on_check_transaction(conn.peer, cmd)
            else:  # as Java: another group's listener must not answer for this one
                log.debug("CHECK_TRANSACTION_STATE from %s for group %r, not ours: dropped",
                          conn.peer, group)
            return None
        if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            self._on_reset_offset(conn, cmd)
            return None
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:  # mqadmin consumerStatus
            return running_info.answer(cmd, self.consumers, self.namesrv_addrs)
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            f"request code {cmd.code} is not supported by this client")

    def _on_reset_offset(self, conn: Connection, cmd: RemotingCommand) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (one-way, from a broker that reset a group's offsets):
        the consumer of that group, if this client runs one, resumes from the new offsets."""
        try:
            h = ResetOffsetRequestHeader.from_ext(cmd.ext_fields)
            offsets = ResetOffsetBody.from_json(cmd.body or b"{}").offsetTable
        except FormatError as e:
            log.warning("malformed RESET_CONSUMER_CLIENT_OFFSET from %s: %s", conn.peer, e)
            return
        consumer = self.consumers.get(h.group)
        if consumer is None:
            log.debug("RESET_CONSUMER_CLIENT_OFFSET from %s for group %r, not ours: dropped",
                      conn.peer, h.group)
            return
        log.info("broker %s reset the offsets of %s on %s (timestamp %d)", conn.peer, h.group,
                 h.topic, h.timestamp)
        task = asyncio.get_running_loop().create_task(
            consumer.reset_offset(h.topic, offsets), name=f"reset-offset {h.group}")
        self._resets.add(task)
        task.add_done_callback(self._reset_done)

    def _reset_done(self, task: asyncio.Task[None]) -> None:
        self._resets.discard(task)
        if not task.cancelled() and (e := task.exception()) is not None:
            log.error("offset reset failed: %s", e, exc_info=e)


def _property_group(cmd: RemotingCommand) -> str | None:
    """The producer group of a CHECK_TRANSACTION_STATE: the PGROUP property of its message."""
    from rocketlite.client.message import decode_messages

    try:
        msgs = decode_messages(cmd.body, verify_crc=False)
    except MQClientError:
        return None
    return msgs[0].properties.get("PGROUP") if msgs else None
