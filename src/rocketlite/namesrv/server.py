"""NameServer (S13): the Remoting processors over ``RouteInfo`` and the KV config, and the task
that removes silent brokers.

Answers: REGISTER_BROKER (103, JSON or compressed body), UNREGISTER_BROKER (104),
BROKER_HEARTBEAT (904), GET_ROUTEINFO_BY_TOPIC (105: standard JSON for clients at V4_9_4 or later
or asking ``acceptStandardJsonOnly``, fastjson's legacy form with bare integer keys otherwise),
GET_BROKER_CLUSTER_INFO (106), GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206),
DELETE_TOPIC_IN_NAMESRV (216: the topic's routes, of one cluster if ``clusterName`` is given;
always SUCCESS, as Java), and the KV config
(PUT 100, GET 101, DELETE 102, GET_KVLIST_BY_NAMESPACE 219), kept in ``kvConfig.json`` when a
path is given. With ``acl_file`` (ACL on) the writes, DELETE_TOPIC_IN_NAMESRV, PUT/DELETE_KV_CONFIG
and UPDATE_NAMESRV_CONFIG, need a request signed by an admin account of that ``plain_acl.yml``
(``remoting/acl_gate.py``). Everything runs on the event loop: each handler is a few dict operations.

A broker is dropped from the routes when the connection it last registered or heartbeated on
closes (Apache's ``BrokerHousekeepingService`` -> ``onChannelDestroy``), ``close_grace_s`` (1 s)
after the close: a killed broker leaves the routes in about a second instead of the 120 s of
silence ``scan_inactive`` waits for, while a live broker whose connection merely closed (it
re-registers at once on a new one, see ``Broker._register_loop``) never leaves them: its new
registration rebinds it before the grace is over. A clean shutdown unregisters first anyway.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from rocketlite.common.errors import BodyError, HeaderError
from rocketlite.namesrv.route_info import RouteInfo
from rocketlite.protocol import headers as h
from rocketlite.protocol.admin_headers import DeleteTopicFromNamesrvRequestHeader
from rocketlite.protocol.bodies import KVTable, RegisterBrokerBody, TopicConfigSerializeWrapper
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.acl_gate import AclGate
from rocketlite.remoting.connection import SERVER_LIMITS, Connection
from rocketlite.remoting.limits import ConnectionLimits
from rocketlite.remoting.server import RemotingServer
from rocketlite.remoting.tls import TlsServerConfig
from rocketlite.store.store_files import atomic_write_json, read_json

log = logging.getLogger(__name__)

SCAN_INTERVAL_S = 5.0
CLOSE_GRACE_S = 1.0
STANDARD_JSON_VERSION = 401  # MQVersion V4_9_4: clients from here on get standard JSON routes
MAX_KV_ENTRIES = 100_000
NAMESRV_ADMIN_CODES = (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_NAMESRV,
                       RequestCode.PUT_KV_CONFIG, RequestCode.DELETE_KV_CONFIG,
                       RequestCode.UPDATE_NAMESRV_CONFIG)
"""What the NameServer's ACL checks (all need an admin account, ``acl.perm.ADMIN_CODES``)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class NameServer:
    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = 9876,
        *,
        kv_config_path: Path | None = None,
        scan_interval_s: float = SCAN_INTERVAL_S,
        auto_create_route: bool = True,
        limits: ConnectionLimits = SERVER_LIMITS,
        close_grace_s: float = CLOSE_GRACE_S,
        tls: TlsServerConfig | None = None,
        acl_file: Path | None = None,
    ) -> None:
        self.routes = RouteInfo(auto_create_route)
        self.server = RemotingServer(host, port, name="namesrv", limits=limits, tls=tls)
        # With an ACL file, the writes (topic deletes, KV, config) need a signed admin account;
        # lookups and broker registrations pass as before.
        self.acl = None if acl_file is None else AclGate(acl_file, codes=NAMESRV_ADMIN_CODES)
        self.server.gate = self.acl
        self.server.close_listeners.append(self._connection_closed)
        self.close_grace_s = close_grace_s
        self._grace_timers: set[asyncio.TimerHandle] = set()
        self.kv_config_path = kv_config_path
        self.kv: dict[str, dict[str, str]] = {}
        self.scan_interval_s = scan_interval_s
        self._scan_task: asyncio.Task[None] | None = None
        self.clock = now_ms
        for code, fn in (
            (RequestCode.REGISTER_BROKER, self.register_broker),
            (RequestCode.UNREGISTER_BROKER, self.unregister_broker),
            (RequestCode.BROKER_HEARTBEAT, self.broker_heartbeat),
            (RequestCode.GET_ROUTEINFO_BY_TOPIC, self.get_route),
            (RequestCode.GET_BROKER_CLUSTER_INFO, self.cluster_info),
            (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self.all_topics),
            (RequestCode.DELETE_TOPIC_IN_NAMESRV, self.delete_topic),
            (RequestCode.PUT_KV_CONFIG, self.put_kv),
            (RequestCode.GET_KV_CONFIG, self.get_kv),
            (RequestCode.DELETE_KV_CONFIG, self.delete_kv),
            (RequestCode.GET_KVLIST_BY_NAMESPACE, self.kv_list),
        ):
            self.server.register(code, fn)

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        self._load_kv()
        await self.server.start()
        if self.acl is not None:
            self.acl.start()
        self._scan_task = asyncio.create_task(self._scan_loop(), name="namesrv-scan")

    async def close(self) -> None:
        if self.acl is not None:
            self.acl.close()
        if self._scan_task is not None:
            self._scan_task.cancel()
            try:
                await self._scan_task
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # close() itself was cancelled: not the scan task's cancellation
        await self.server.close()
        for timer in self._grace_timers:
            timer.cancel()
        self._grace_timers.clear()

    def _connection_closed(self, conn: Connection) -> None:
        """A connection closed: the brokers still bound to it when the grace is over leave the
        routes (none for a client's connection: nothing is bound to it)."""
        if conn not in self.routes.by_channel:
            return

        def expire() -> None:
            self._grace_timers.discard(timer)
            self.routes.channel_closed(conn)

        timer = asyncio.get_running_loop().call_later(self.close_grace_s, expire)
        self._grace_timers.add(timer)

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval_s)
            self.routes.scan_inactive(self.clock())

    # -- brokers -----------------------------------------------------------------------------

    def register_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            hdr = h.RegisterBrokerRequestHeader.from_ext(cmd.ext_fields)
            topics: TopicConfigSerializeWrapper | None = None
            if cmd.body:
                topics = RegisterBrokerBody.decode(
                    cmd.body, compressed=hdr.compressed
                ).topicConfigSerializeWrapper
        except (HeaderError, BodyError) as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad REGISTER_BROKER: {e}")
        try:
            master, ha = self.routes.register_broker(
                cluster=hdr.clusterName, broker_addr=hdr.brokerAddr, broker_name=hdr.brokerName,
                broker_id=hdr.brokerId, ha_server_addr=hdr.haServerAddr, topics=topics,
                now_ms=self.clock(), timeout_ms=hdr.heartbeatTimeoutMillis,
                channel=conn if conn.is_open else None,
            )
        except ValueError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        ext = h.RegisterBrokerResponseHeader(haServerAddr=ha, masterAddr=master).to_ext()
        return cmd.response(ResponseCode.SUCCESS, ext_fields=ext, body=KVTable().to_json())

    def unregister_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.UnRegisterBrokerRequestHeader.from_ext(cmd.ext_fields)
        self.routes.unregister_broker(hdr.clusterName, hdr.brokerAddr, hdr.brokerName, hdr.brokerId)
        return cmd.response(ResponseCode.SUCCESS)

    def broker_heartbeat(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.BrokerHeartbeatRequestHeader.from_ext(cmd.ext_fields)
        self.routes.heartbeat(hdr.brokerAddr, self.clock(), conn if conn.is_open else None)
        return cmd.response(ResponseCode.SUCCESS)

    # -- clients -----------------------------------------------------------------------------

    def get_route(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetRouteInfoRequestHeader.from_ext(cmd.ext_fields)
        route = self.routes.pick_route(hdr.topic)
        if route is None:
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {hdr.topic}",
            )
        standard = bool(hdr.acceptStandardJsonOnly) or cmd.version >= STANDARD_JSON_VERSION
        return cmd.response(ResponseCode.SUCCESS, body=route.to_json(legacy=not standard))

    def cluster_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=self.routes.cluster_info().to_json())

    def all_topics(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=self.routes.topic_list().to_json())

    def delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = DeleteTopicFromNamesrvRequestHeader.from_ext(cmd.ext_fields)
        if self.routes.delete_topic(hdr.topic, hdr.clusterName):
            log.info("topic %s deleted from the routes%s by %s", hdr.topic,
                     f" of cluster {hdr.clusterName}" if hdr.clusterName else "", conn.peer)
        return cmd.response(ResponseCode.SUCCESS)

    # -- KV config ---------------------------------------------------------------------------

    def put_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.PutKVConfigRequestHeader.from_ext(cmd.ext_fields)
        if sum(map(len, self.kv.values())) >= MAX_KV_ENTRIES:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"KV config is full ({MAX_KV_ENTRIES})")
        self.kv.setdefault(hdr.namespace, {})[hdr.key] = hdr.value
        self._save_kv()
        return cmd.response(ResponseCode.SUCCESS)

    def get_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetKVConfigRequestHeader.from_ext(cmd.ext_fields)
        value = self.kv.get(hdr.namespace, {}).get(hdr.key)
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                                f"No config item, Namespace: {hdr.namespace} Key: {hdr.key}")
        return cmd.response(ResponseCode.SUCCESS,
                            ext_fields=h.GetKVConfigResponseHeader(value=value).to_ext())

    def delete_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.DeleteKVConfigRequestHeader.from_ext(cmd.ext_fields)
        table = self.kv.get(hdr.namespace)
        if table is not None and table.pop(hdr.key, None) is not None:
            if not table:
                del self.kv[hdr.namespace]
            self._save_kv()
        return cmd.response(ResponseCode.SUCCESS)

    def kv_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        hdr = h.GetKVListByNamespaceRequestHeader.from_ext(cmd.ext_fields)
        table = self.kv.get(hdr.namespace)
        if not table:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                                f"No config item, Namespace: {hdr.namespace}")
        return cmd.response(ResponseCode.SUCCESS, body=KVTable(table=dict(table)).to_json())

    def _load_kv(self) -> None:
        if self.kv_config_path is None:
            return
        data = read_json(self.kv_config_path)
        table = data.get("configTable") if isinstance(data, dict) else None
        if isinstance(table, dict):
            self.kv = {str(ns): {str(k): str(v) for k, v in kv.items()}
                       for ns, kv in table.items() if isinstance(kv, dict)}

    def _save_kv(self) -> None:
        if self.kv_config_path is not None:
            atomic_write_json(self.kv_config_path, {"configTable": self.kv})
