"""Broker: the composition root of a broker process. It owns the store, the Remoting server, the
managers (topics, consumer offsets, subscription groups, clients, locks), long polling, and the
periodic work: registering with every NameServer (every ``registerNameServerPeriod``, at
once after a topic change, and at once when its connection to a NameServer closes: the
NameServer drops a broker whose registration connection closed unless it registers again on a
new one within a second), persisting consumer offsets, expiring silent clients and stale locks.

Start: open the store (recovering it if needed) in a worker thread, load the config files, listen,
register. A master (``brokerRole`` ASYNC_MASTER or SYNC_MASTER) also serves its CommitLog to slaves
(``ha.server.HAServer`` on ``haListenPort``); a SLAVE replicates its master's (``ha.client.HAClient``
to ``haMasterAddress``, else to the HA address the NameServer answers its registration), refuses
sends (its store raises ``SlaveModeError``: SERVICE_NOT_AVAILABLE), serves pulls, and runs
neither the timer wheel, the delay levels, POP revive nor transaction checks (their writes are
the master's; their records reach the slave by replication).
Stop: unregister, answer held pulls, stop listening, persist the config files, shut the
store down (flush, checkpoint, remove ``abort``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketlite.acl.plain_file import acl_path
from rocketlite.acl.sign import Credentials
from rocketlite.broker.admin import AdminProcessor
from rocketlite.broker.admin_clients import ClientCalls
from rocketlite.broker.admin_remoting import AdminRemoting
from rocketlite.broker.client_processor import ClientProcessor
from rocketlite.broker.clients import ConsumerManager, ProducerManager
from rocketlite.broker.config import PERM_READ, PERM_WRITE, BrokerConfig, check_role
from rocketlite.broker.create_rate import CreateRate
from rocketlite.broker.ha.client import HAClient
from rocketlite.broker.ha.role import RoleController
from rocketlite.broker.ha.server import HAServer
from rocketlite.broker.ha.slave_sync import SlaveSynchronize
from rocketlite.broker.locks import RebalanceLockManager
from rocketlite.broker.long_polling import PullRequestHoldService
from rocketlite.broker.metrics import BrokerMetrics
from rocketlite.broker.metrics_rpc import instrument
from rocketlite.broker.offsets import ConsumerOffsetManager
from rocketlite.broker.pop.processor import PopProcessor
from rocketlite.broker.pop.service import PopService
from rocketlite.broker.pull import PullProcessor
from rocketlite.broker.rates import Rates
from rocketlite.broker.recall import RecallProcessor
from rocketlite.broker.schedule import ScheduleMessageService
from rocketlite.broker.send import SendProcessor
from rocketlite.broker.send_back import SendBackProcessor
from rocketlite.broker.subscriptions import SubscriptionGroupManager
from rocketlite.broker.timer import TimerMessageStore
from rocketlite.broker.topics import TopicConfigManager
from rocketlite.broker.transaction import TransactionalMessageService
from rocketlite.common.errors import RemotingError
from rocketlite.protocol.bodies import RegisterBrokerBody
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader
from rocketlite.remoting.acl_gate import AclGate, request_signer
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from rocketlite.remoting.server import RemotingServer
from rocketlite.remoting.tls import TlsSettings
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore

log = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL_S = 10.0
RETRY_REGISTER_S = 1.0  # first retry after a failed registration; doubles up to the period
REREGISTER_GAP_S = 0.5  # at most two registrations a second for closed NameServer connections


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class BrokerStats:
    """Counters for GET_BROKER_RUNTIME_INFO; rates over the last sampling interval."""

    put_messages: int = 0
    got_messages: int = 0
    _sample: tuple[float, int, int] = field(default_factory=lambda: (time.monotonic(), 0, 0))
    _rates: tuple[float, float] = (0.0, 0.0)

    def sample(self) -> None:
        t, put, got = self._sample
        now = time.monotonic()
        dt = now - t
        if dt > 0:
            self._rates = ((self.put_messages - put) / dt, (self.got_messages - got) / dt)
        self._sample = (now, self.put_messages, self.got_messages)

    def put_tps(self) -> float:
        return self._rates[0]

    def get_tps(self) -> float:
        return self._rates[1]


class Broker:
    def __init__(self, config: BrokerConfig, store_config: StoreConfig,
                 tls: TlsSettings | None = None, *, credentials: Credentials | None = None) -> None:
        """``credentials``: what the broker signs its own requests with (``acl.inner``: a
        slave's synchronisation from an ACL master, its registrations); None signs nothing."""
        check_role(config, store_config)
        self.config = config
        self.tls = tls or TlsSettings()  # the Remoting port's, the gRPC front's, the NameServers'

        self.store_config = store_config
        self.store = MessageStore(store_config)
        # Controller mode (``ha.role``): start as a slave; the controller's state decides.
        self.role = RoleController(self) if config.enable_controller_mode else None
        self.slave = store_config.is_slave or self.role is not None
        self.store.slave = self.slave
        self.ha_server: HAServer | None = (
            None if self.slave else HAServer(self.store, store_config))
        self.ha_client: HAClient | None = (
            HAClient(self.store, store_config,
                     "" if self.role is not None else store_config.ha_master_address)
            if self.slave else None)
        # A slave copies its master's topics, offsets and groups (``ha.slave_sync``).
        self.slave_sync = SlaveSynchronize(self) if self.slave else None
        self.server = RemotingServer(
            "0.0.0.0", store_config.listen_port, name="broker", limits=config.remoting_limits(),
            tls=self.tls.server,
        )
        # ACL (aclEnable): each request is checked against plain_acl.yml before its processor.
        self.acl = AclGate(acl_path(config.acl_file)) if config.acl_enable else None
        self.server.gate = self.acl
        cfg_dir = store_config.config_dir
        self.topics = TopicConfigManager(config, cfg_dir / "topics.json")
        self.offsets = ConsumerOffsetManager(cfg_dir / "consumerOffset.json")
        self.subscriptions = SubscriptionGroupManager(cfg_dir / "subscriptionGroup.json",
                                                      config.auto_create_subscription_group)
        # Limit crossings (rocketlite_limit_rejections_total): the Remoting server's, and these.
        self.limit_counts = self.server.counts
        self.topics.create_rate = CreateRate(
            config.auto_create_topics_per_minute, "autocreate_topic", "autoCreateTopicsPerMinute",
            self.limit_counts)
        self.subscriptions.create_rate = CreateRate(
            config.auto_create_groups_per_minute, "autocreate_group", "autoCreateGroupsPerMinute",
            self.limit_counts)
        self.consumers = ConsumerManager(config.channel_expired_timeout)
        self.producers = ProducerManager(config.channel_expired_timeout)
        self.locks = RebalanceLockManager(config.rebalance_lock_max_live_time)
        self.hold = PullRequestHoldService(config.max_held_pulls)
        self.stats = BrokerStats()
        self.client = RemotingClient(on_close=self._connection_closed, tls=self.tls.client,
                                     signer=None if credentials is None else request_signer(credentials))
        self._reregister_at = 0.0  # loop time of the last registration a closed connection asked
        # Prometheus metrics (``metrics``): the hot paths fold into it per batch; None when
        # metricsPort=0 (then they do nothing at all). Served by ``metrics_http.MetricsServer``.
        self.metrics = (BrokerMetrics(store_config.mapped_file_size_commit_log)
                        if config.metrics_port else None)
        # topicPutTps / consumeTps for the admin tools, sampled from ``metrics`` (``rates``)
        self.rates = Rates()
        self.boot_timestamp = now_ms()
        # Where a message is stored instead of its topic (transaction half messages, timers,
        # delay levels): each diverter returns the message to store instead, or None to pass;
        # the first that answers wins. Applied to single sends (batches cannot be delayed or
        # transactional) and to messages the broker re-writes itself (send-back).
        self.diverters: list[Callable[[MessageToStore], MessageToStore | None]] = []
        # Timer messages (TIMER_DELIVER_MS/TIMER_DELAY_SEC/TIMER_DELAY_MS) go ahead of any delay
        # level diverter; the timer's yields to a delay level and to prepared transactions.
        self.timer = TimerMessageStore(self.store, config)
        self.diverters.insert(0, self.timer.divert)
        # Delay levels (DELAY=n) last: SCHEDULE_TOPIC_XXXX, delivered by the schedule service.
        self.schedule = ScheduleMessageService(self.store)
        self.diverters.append(self.schedule.divert)
        self.send = SendProcessor(self)
        self.pull = PullProcessor(self)
        self.admin = AdminProcessor(self)
        self.clients = ClientProcessor(self)
        self.admin_tools = AdminRemoting(self)  # mqadmin's stats, groups, resets, config
        self.client_calls = ClientCalls(self)  # admin requests relayed to a client
        for p in (self.send, self.pull, self.admin, self.clients, self.admin_tools,
                  self.client_calls):
            p.register()
        # Transactional half messages first (index 0): a prepared message is neither timed nor
        # delayed until its commit, which goes through the diverters again.
        self.transactions = TransactionalMessageService(self)
        self.diverters.insert(0, self.transactions.divert)
        self.transactions.register()
        self.schedule.register(self.server)
        self.send_back = SendBackProcessor(self)
        self.send_back.register()
        RecallProcessor(self).register()
        self.pop = PopService(self)  # POP consumption (5.x); its Remoting codes below
        PopProcessor(self.pop, self.server).register()
        if self.metrics is not None:  # rocketmq_rpc_latency: every processor registered above
            instrument(self.server, self.metrics.rpc)
        self._tasks: list[asyncio.Task[None]] = []
        self._register_now: asyncio.Event | None = None
        self.master_addr = ""  # a slave's master's Remoting address, from the NameServer
        self.running = False

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return f"{self.store_config.broker_ip1}:{self.server.port}"

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        # Read the config files first (a bad one fails before a long recovery), write only once
        # the store's lock is ours: a second broker on a busy store must not touch its files.
        self.topics.load()
        self.offsets.load()
        self.subscriptions.load()
        await asyncio.to_thread(self.store.start)
        loop = asyncio.get_running_loop()
        self.hold.start(loop)
        self.store.dispatcher.listeners.append(self.hold.on_dispatched)
        try:
            if not self.slave:  # a slave's timer and delay records are its master's to deliver
                await asyncio.to_thread(self.timer.start)
                await asyncio.to_thread(self.schedule.start)
            self.topics.persist_or_log()  # a full disk must not keep the broker from starting
            await self.server.start()
            if self.acl is not None:
                self.acl.start()
            if self.ha_server is not None:
                await self.ha_server.start()
            if self.ha_client is not None:
                await self.ha_client.start()
        except BaseException:
            if self.acl is not None:
                self.acl.close()
            await self._close_ha()
            await self.server.close()
            await asyncio.to_thread(self.schedule.shutdown)
            await asyncio.to_thread(self.timer.shutdown)
            await asyncio.to_thread(self.store.shutdown)
            raise
        if self.store_config.listen_port == 0:
            # An ephemeral port: message ids must carry the port clients reach us on.
            self.store.commitlog.store_port = self.server.port
            self.send.refresh_store_address()
        self._register_now = asyncio.Event()
        self.pop.start(loop)  # creates the revive topic before the first registration
        self.topics.on_change.append(lambda _tc: self._wake_register())
        self.running = True
        if self.role is not None:
            try:
                await self.role.start()  # takes the role the controller names before registering
            except BaseException:
                await self.close()
                raise
        # Register once before start returns (as Java's BrokerController.start does), so a client
        # started right after the broker finds its routes; the loop then keeps it registered.
        await self.register_all()
        self._tasks = [
            asyncio.create_task(self._register_loop(), name="broker-register"),
            asyncio.create_task(self._persist_loop(), name="broker-persist"),
            asyncio.create_task(self._scan_loop(), name="broker-scan"),
        ]
        if self.slave_sync is not None and self.role is None:  # ha.role runs it in controller mode
            self._tasks.append(asyncio.create_task(self.slave_sync.run(), name="slave-sync"))
        self.transactions.start()
        log.info("broker %s (%s) listening on %s, store %s", self.config.broker_name,
                 self.config.broker_cluster_name, self.address, self.store_config.store_path_root_dir)

    async def close(self) -> None:
        """Stop everything; the store is shut down (and its ``abort`` removed) even when a step
        before fails or the close itself is cancelled, which then propagates."""
        if not self.running:
            return
        self.running = False
        if self.acl is not None:
            self.acl.close()
        if self.role is not None:
            try:  # first: revoking the lease lets the controller elect another master at once
                await self.role.close()
            except Exception:
                log.exception("leaving the controller failed")
        for t in self._tasks:
            t.cancel()
        self._wake_register()  # should a cancel be lost in a wait, the loop still sees running
        try:
            if self._tasks:
                await asyncio.wait(self._tasks)  # not ``await t``: that would mask our own cancel
            for t in self._tasks:
                if not t.cancelled() and t.exception() is not None:
                    log.error("task %s had failed", t.get_name(), exc_info=t.exception())
            await self.transactions.stop()  # before the offsets it advances are persisted
            await self.pop.stop()  # the same; answers held pops
            await self._unregister_all()
            self.hold.release_all()
        finally:
            failure: BaseException | None = None
            try:
                await self._close_ha()
                await self.server.close()
                await self.client.close()
            finally:
                # Each config file on its own, and the store whatever happened: a file that
                # cannot be written must not leave the store unflushed with its abort marker.
                for manager in (self.offsets, self.subscriptions, self.topics):
                    try:
                        manager.persist()
                    except Exception as e:  # noqa: BLE001 - logged, re-raised after the shutdown
                        log.error("cannot write %s: %s", manager.path, e)
                        failure = failure or e
                try:
                    await asyncio.to_thread(self.schedule.shutdown)  # before the store it writes to
                except Exception as e:  # noqa: BLE001 - logged, re-raised after the shutdown
                    log.error("schedule service shutdown failed: %s", e)
                    failure = failure or e
                try:
                    await asyncio.to_thread(self.timer.shutdown)  # before the store it writes to
                except Exception as e:  # noqa: BLE001 - logged, re-raised after the shutdown
                    log.error("timer wheel shutdown failed: %s", e)
                    failure = failure or e
                await asyncio.to_thread(self.store.shutdown)
        log.info("broker %s stopped", self.config.broker_name)
        if failure is not None:
            raise failure

    async def _close_ha(self) -> None:
        if self.ha_client is not None:
            await self.ha_client.close()
        if self.ha_server is not None:
            await self.ha_server.close()

    @property
    def ha_address(self) -> str:
        """``host:port`` of this broker's HA server (registered as haServerAddr)."""
        port = self.ha_server.port if self.ha_server is not None else self.store_config.ha_port
        return f"{self.store_config.broker_ip1}:{port}"

    def divert(self, msg: MessageToStore) -> MessageToStore:
        """``msg`` as the first diverter that claims it rewrites it, else unchanged. A diverter
        raises ``MessageIllegalError`` for a message it must refuse (e.g. a delay beyond the
        maximum)."""
        for diverter in self.diverters:
            out = diverter(msg)
            if out is not None:
                return out
        return msg

    # -- notifications ---------------------------------------------------------------------

    def notify_consumer_ids_changed(self, group: str) -> None:
        info = self.consumers.get(group)
        if info is None:
            return
        for ch in list(info.channels):
            if isinstance(ch, Connection) and ch.is_open:
                ch.send_oneway(RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}))

    # -- NameServer registration -----------------------------------------------------------

    def register_soon(self) -> None:
        """Register with the NameServers now rather than at the next period."""
        self._wake_register()

    def _wake_register(self) -> None:
        if self._register_now is not None:
            self._register_now.set()

    def _connection_closed(self, addr: str) -> None:
        """A connection of ``self.client`` closed: if it was to a NameServer, register again
        at once (on a new connection) so the NameServer, which drops the brokers of a closed
        connection after a grace, keeps us; paced, should a NameServer keep closing it."""
        if not self.running or addr not in self.config.namesrv_addrs:
            return
        loop = asyncio.get_running_loop()
        at = max(loop.time(), self._reregister_at + REREGISTER_GAP_S)
        self._reregister_at = at
        loop.call_at(at, self._wake_register)

    def _register_body(self) -> RegisterBrokerBody:
        """The topics to register; on a broker that is not read-write, each topic's perm masked
        with the broker's (as Java does), so routes send producers elsewhere."""
        wrapper = self.topics.wrapper()
        perm = self.config.broker_permission
        if perm & (PERM_READ | PERM_WRITE) != PERM_READ | PERM_WRITE:
            wrapper.topicConfigTable = {
                name: dataclasses.replace(tc, perm=tc.perm & perm)
                for name, tc in wrapper.topicConfigTable.items()
            }
        return RegisterBrokerBody(topicConfigSerializeWrapper=wrapper)

    async def register_all(self) -> bool:
        """Register with every NameServer at once; True if all of them accepted. Failures are
        logged; the register loop retries them soon."""
        cfg = self.config
        header = RegisterBrokerRequestHeader(
            brokerName=cfg.broker_name, brokerAddr=self.address, clusterName=cfg.broker_cluster_name,
            haServerAddr=self.ha_address,
            brokerId=self.route_id, compressed=False,
        ).to_ext()
        body = self._register_body().to_json()
        timeout = cfg.register_broker_timeout_mills / 1000

        async def one(addr: str) -> bool:
            cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
            try:
                reply = await self.client.invoke(addr, cmd, timeout)
            except (RemotingError, OSError) as e:
                log.warning("register with NameServer %s failed: %s", addr, e)
                return False
            if reply.code != ResponseCode.SUCCESS:
                log.warning("NameServer %s refused the registration: %d %s", addr, reply.code,
                            reply.remark)
                return False
            await self._learn_master(reply)
            return True

        return all(await asyncio.gather(*(one(a) for a in cfg.namesrv_addrs)))

    async def _learn_master(self, reply: RemotingCommand) -> None:
        """A slave's registration reply names its master (``masterAddr``) and the master's HA
        address (``haServerAddr``); a slave without ``haMasterAddress`` replicates from the
        latter, following it when it changes (as Java's updateMasterHAServerAddrPeriodically)."""
        if not self.slave or self.role is not None:  # controller mode: ``ha.role`` names it
            return
        ext = reply.ext_fields
        if master := ext.get("masterAddr"):
            self.master_addr = master
        ha_addr = ext.get("haServerAddr")
        if ha_addr and self.ha_client is not None and not self.store_config.ha_master_address:
            await self.ha_client.update_master_address(ha_addr)

    @property
    def route_id(self) -> int:
        """The brokerId registered with the NameServers: in controller mode 0 while master."""
        return self.role.route_id if self.role is not None else self.config.broker_id

    async def reregister(self, old_id: int) -> None:
        """After a role switch: leave the routes under ``old_id``, register under the new id."""
        await self._unregister_all(old_id)
        await self.register_all()

    async def _unregister_all(self, broker_id: int | None = None) -> None:
        cfg = self.config
        header = UnRegisterBrokerRequestHeader(
            brokerName=cfg.broker_name, brokerAddr=self.address,
            clusterName=cfg.broker_cluster_name,
            brokerId=self.route_id if broker_id is None else broker_id,
        ).to_ext()

        async def one(addr: str) -> None:
            cmd = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(header))
            try:
                await self.client.invoke(addr, cmd, 3.0)
            except (RemotingError, OSError) as e:
                log.info("unregister from NameServer %s failed: %s", addr, e)

        await asyncio.gather(*(one(a) for a in cfg.namesrv_addrs))

    async def _register_loop(self) -> None:
        """Register now, then every ``registerNameServerPeriod`` and at once after a topic
        change; after a failure (a NameServer not up yet) retry after 1 s, 2 s, 4 s ... up to
        the period, so a broker started before its NameServer appears in routes promptly."""
        period = self.config.register_name_server_period / 1000
        retry = RETRY_REGISTER_S
        assert self._register_now is not None
        while self.running:
            self._register_now.clear()
            try:
                ok = await self.register_all()
            except Exception:
                log.exception("registering with the NameServers failed")
                ok = False
            wait = period if ok else min(retry, period)
            retry = RETRY_REGISTER_S if ok else retry * 2
            # asyncio.timeout, not wait_for: 3.11's wait_for returns a wait that finished as
            # the task was cancelled and drops the cancel, and close() would wait forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._register_now.wait()

    # -- housekeeping ----------------------------------------------------------------------

    async def _persist_loop(self) -> None:
        interval = self.config.flush_consumer_offset_interval / 1000
        if self.metrics is not None:  # the rates' first window starts now
            self.rates.sample(self.metrics)
        while True:
            await asyncio.sleep(interval)
            try:
                await asyncio.to_thread(self.offsets.persist, False)
            except Exception as e:  # noqa: BLE001 - retried next interval (still dirty)
                log.error("cannot persist consumer offsets: %s", e)
            self.stats.sample()
            if self.metrics is not None:
                self.rates.sample(self.metrics)

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(CLIENT_SCAN_INTERVAL_S)
            try:
                self._scan()
            except Exception:  # one bad round must not end client expiry for good
                log.exception("expiring silent clients and stale locks failed")

    def _scan(self) -> None:
        for ch, groups in self.consumers.scan_expired():
            log.warning("consumer channel %s expired (no heartbeat for %d ms)",
                        getattr(ch, "peer", ch), self.config.channel_expired_timeout)
            for group in groups:
                self.notify_consumer_ids_changed(group)
            _close(ch)
        for ch in self.producers.scan_expired():
            log.warning("producer channel %s expired", getattr(ch, "peer", ch))
            _close(ch)
        self.locks.expire()


def _close(channel: object) -> None:
    close = getattr(channel, "close", None)
    if close is not None:
        close()

