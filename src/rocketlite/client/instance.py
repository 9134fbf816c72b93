"""ClientInstance: what producers and consumers of one client share (Java's ``MQClientInstance``).

It owns the Remoting connections and the periodic work, and ties together the parts each owned
elsewhere: the NameServers (``namesrv_client``), the topic routes and broker addresses
(``route_table``), the requests from brokers (``broker_requests``). The periodic work: routes
refreshed every ``poll_name_server_interval`` (30 s), heartbeats to every broker every
``heartbeat_interval`` (30 s), consumer rebalance every ``rebalance_interval`` (20 s, and at once
on NOTIFY_CONSUMER_IDS_CHANGED), consumer offsets persisted every ``persist_offset_interval``
(5 s). A send or pull that fails in transport (the broker cannot be connected to, the connection
dropped, no answer) also refreshes its topic's route at once, in the background and at most once
a second per topic (``route_failed``): a failover, a new master under the same broker name, is
then picked up in about a second instead of at the next poll (Java waits for the poll).

Each producer or consumer makes its own instance: the client id is ``ip@instanceName`` and the
default instance name is ``pid#nanos`` (as Java 5 does), unique per client object, so two consumers
of one group in one process are two group members. ``ClientConfig`` and ``client_config`` (from
``client.config``) are importable from here too, where most callers take them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable

from rocketlite.client.broker_requests import BrokerRequests
from rocketlite.client.config import ClientConfig, CredentialsLike, client_config, local_ip
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.namesrv_client import NameServers
from rocketlite.client.peers import ConsumerPeer, ProducerPeer
from rocketlite.client.route import MASTER_ID
from rocketlite.client.route_table import RouteTable
from rocketlite.common.errors import FormatError, RemotingError
from rocketlite.protocol.bodies import HeartbeatData, ProducerData, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import UnregisterClientRequestHeader
from rocketlite.remoting.acl_gate import request_signer
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection

__all__ = ["ClientConfig", "ClientInstance", "CredentialsLike", "client_config"]

log = logging.getLogger(__name__)

ROUTE_REFRESH_GAP_S = 1.0  # at most one refresh a second per topic after failed requests


class ClientInstance:
    """One client's connections, registries and periodic work (module doc). ``namesrv`` asks the
    NameServers; ``route_table`` holds the routes and broker addresses, which ``routes`` and
    ``broker_addrs`` name too (the same dicts: the send path reads ``broker_addrs`` per message)."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.namesrv_addrs = config.namesrv_list()
        self.client_ip = config.client_ip or local_ip()
        instance = config.instance_name or f"{os.getpid()}#{time.monotonic_ns()}"
        self.client_id = f"{self.client_ip}@{instance}" + (f"@{config.unit_name}" if config.unit_name else "")
        self.producers: dict[str, ProducerPeer] = {}
        self.consumers: dict[str, ConsumerPeer] = {}
        self.broker_requests = BrokerRequests(self.producers, self.consumers, self.namesrv_addrs,
                                              self.rebalance_soon)
        signer = None if config.credentials is None else request_signer(config.credentials)
        self.remoting = RemotingClient(self.broker_requests.on_request,
                                       connect_timeout=config.request_timeout, tls=config.tls,
                                       signer=signer)
        self.namesrv = NameServers(self.namesrv_addrs, self.remoting, config.request_timeout)
        self.route_table = RouteTable()
        self.routes = self.route_table.routes
        self.broker_addrs = self.route_table.broker_addrs
        self._tasks: list[asyncio.Task[None]] = []
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._rebalance_now = asyncio.Event()
        self._started = False
        self.route_refresh_gap = ROUTE_REFRESH_GAP_S
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
        tasks, self._tasks = [*self._tasks, *self.broker_requests.take_tasks(), *self._route_tasks], []
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
        for addr in self.route_table.all_broker_addrs():
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

    async def connection(self, addr: str) -> Connection:
        try:
            return await self.remoting.connection(addr)
        except RemotingError as e:
            raise MQClientError(str(e)) from e

    # -- routes ---------------------------------------------------------------------------------

    async def update_route(self, topic: str) -> TopicRouteData | None:
        """Fetch, cache and hand ``topic``'s route to the producers and consumers that use it."""
        route = await self.namesrv.fetch_route(topic)
        if route is None:
            return None
        if self.route_table.put(topic, route):
            self._heartbeat_soon()
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
        if not self.route_table.refresh_due(topic, time.monotonic(), self.route_refresh_gap):
            return
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
        if self.route_table.learn_brokers(route):
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
        self.route_table.forget_unused_brokers()

    def _peers(self) -> list[ProducerPeer | ConsumerPeer]:
        return [*self.producers.values(), *self.consumers.values()]

    async def require_broker_addr(self, broker_name: str, topic: str, *, master: bool = True) -> str:
        addr = self.route_table.broker_addr(broker_name, master=master)
        if addr is None:
            await self.update_route(topic)
            addr = self.route_table.broker_addr(broker_name, master=master)
        if addr is None:
            raise MQClientError(f"broker {broker_name!r} has no {'master ' if master else ''}address "
                                f"in the route of {topic!r}")
        return addr

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
