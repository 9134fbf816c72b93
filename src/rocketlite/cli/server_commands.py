"""Running the servers: ``rocketlite start`` (NameServer and broker in one process),
``rocketlite namesrv`` and ``rocketlite broker -c broker.conf``.

Each runs on one asyncio loop (uvloop when installed), logs to the console, prints a line with
``rocketlite ready`` once it accepts connections, and on SIGINT or SIGTERM shuts down cleanly:
unregister, answer held pulls, persist configs, flush the store, remove ``abort``.

``start`` is the laptop command: a new store gets smaller files than RocketMQ's (``START_DEFAULTS``:
64 MiB CommitLog segments, a 42 MB IndexFile), so one message takes ~131 MiB of disk instead of
~2.1 GiB. An existing store keeps the sizes its files were written with, and any key in
``broker.conf`` wins (``mappedFileSizeCommitLog=1073741824``, ``maxHashSlotNum=5000000``,
``maxIndexNum=20000000`` are RocketMQ's). ``broker`` keeps RocketMQ's defaults.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from rocketlite.acl.plain_file import acl_path
from rocketlite.acl.sign import Credentials
from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.metrics_collector import metrics_registry
from rocketlite.broker.metrics_http import MetricsServer
from rocketlite.cli import errors
from rocketlite.cli.admin_common import ACCESS_KEY_ENV, SECRET_KEY_ENV
from rocketlite.common import native
from rocketlite.common.errors import ConfigError
from rocketlite.dashboard import DashboardServer
from rocketlite.formats.index_layout import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from rocketlite.namesrv.server import NameServer
from rocketlite.proxy.config import ProxyConfig
from rocketlite.proxy.consume_checks import ConsumeLimits
from rocketlite.proxy.renew import RenewConfig
from rocketlite.proxy.server import GrpcFront
from rocketlite.remoting.tls import TlsServerConfig, TlsSettings
from rocketlite.store import store_reader
from rocketlite.store.config import StoreConfig, read_properties_file

log = logging.getLogger("rocketlite")

DEFAULT_STORE = Path("store")
START_DEFAULTS = {
    "mappedFileSizeCommitLog": str(64 << 20),
    "maxHashSlotNum": "500000",
    "maxIndexNum": "2000000",
}
_INDEX_BYTES_PER_SLOT = INDEX_SLOT_SIZE + 4 * INDEX_ENTRY_SIZE  # RocketMQ's 4 entries per slot


def setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")


def load_properties(conf: Path | None, overrides: dict[str, str],
                    defaults: dict[str, str] | None = None) -> dict[str, str]:
    """broker.conf (RocketMQ keys) with command-line overrides on top; ``defaults`` for the keys
    neither sets (only where the store has no files of that kind yet: see ``existing_sizes``)."""
    props = read_properties_file(conf) if conf is not None else {}
    props.update(overrides)
    props.setdefault("storePathRootDir", str(DEFAULT_STORE))
    if defaults:
        root = Path(props["storePathRootDir"]).expanduser()
        for key, value in {**defaults, **existing_sizes(root)}.items():
            props.setdefault(key, value)
    return props


def load_configs(conf: Path | None, overrides: dict[str, str],
                 defaults: dict[str, str] | None = None) -> tuple[BrokerConfig, StoreConfig]:
    """The broker's and the store's configs from ``load_properties``."""
    props = load_properties(conf, overrides, defaults)
    return BrokerConfig.from_properties(props), StoreConfig.from_properties(props)


@dataclass(frozen=True, slots=True)
class FrontConfigs:
    """The gRPC front's settings in broker.conf: the server's, the consumer limits, renewal; and
    TLS (``remoting.tls``: the Remoting, NameServer and gRPC ports', the broker's connections)."""

    proxy: ProxyConfig
    limits: ConsumeLimits
    renew: RenewConfig
    tls: TlsSettings = field(default_factory=TlsSettings)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> FrontConfigs:
        return cls(ProxyConfig.from_properties(props), ConsumeLimits.from_properties(props),
                   RenewConfig.from_properties(props), TlsSettings.from_properties(props))


def _server_configs(conf: Path | None, overrides: dict[str, str],
                    defaults: dict[str, str] | None = None
                    ) -> tuple[BrokerConfig, StoreConfig, FrontConfigs]:
    """The three configs; a bad key or value is a ``ConfigError`` naming where it came from
    (reported as one line by ``rocketlite.cli.errors``)."""
    try:
        props = load_properties(conf, overrides, defaults)
        return (BrokerConfig.from_properties(props), StoreConfig.from_properties(props),
                FrontConfigs.from_properties(props))
    except ConfigError as e:
        where = f"{conf}" if conf is not None else "the options"
        raise ConfigError(f"{where}: {e}") from e


def _env_acl() -> Credentials | None:
    """What the dashboard beside the broker signs with on an ACL cluster: ``ROCKETLITE_ACCESS_KEY``
    and ``ROCKETLITE_SECRET_KEY``, as ``rocketlite admin`` and ``dashboard`` read them."""
    ak, sk = os.environ.get(ACCESS_KEY_ENV), os.environ.get(SECRET_KEY_ENV)
    return Credentials(ak, sk) if ak and sk else None


class BrokerWithFront:
    """A broker and, unless ``enableGrpcServer=false``, the gRPC front on ``grpcServerPort``:
    the front starts after the broker (its routes name the broker's topics) and stops first.
    With ``metricsPort`` (not 0) also Prometheus' ``/metrics`` there, on all interfaces like the
    broker, and with ``dashboardPort`` (not 0) the web dashboard there, on loopback (reads need
    no login there; writes are refused: ``rocketlite dashboard`` takes credentials), over the
    broker's NameServers. A port in use is a warning, not a failure (the broker serves without
    it)."""

    def __init__(self, broker: Broker, front: FrontConfigs) -> None:
        self.broker = broker
        self.metrics: MetricsServer | None = None
        if broker.metrics is not None:
            self.metrics = MetricsServer(metrics_registry(broker), "0.0.0.0",
                                         broker.config.metrics_port)
        self.dashboard: DashboardServer | None = None
        if broker.config.dashboard_port and broker.config.namesrv_addr:
            self.dashboard = DashboardServer(broker.config.namesrv_addr, "127.0.0.1",
                                             broker.config.dashboard_port, tls=broker.tls.client,
                                             acl=_env_acl())
        self.front: GrpcFront | None = None
        if front.proxy.enable_grpc_server:
            self.front = GrpcFront(broker, front.proxy.grpc_server_port,
                                   impl=front.proxy.grpc_server_impl, tls=broker.tls.server)
            self.front.ctx.limits = front.limits
            self.front.ctx.renew = front.renew

    async def start(self) -> None:
        await self.broker.start()
        if self.front is not None:
            try:
                await self.front.start()
            except BaseException:
                await self.broker.close()
                raise
        if self.metrics is not None:
            try:
                await self.metrics.start()
            except OSError as e:
                log.warning("metrics: not served, port %d: %s", self.metrics.port, e.strerror or e)
                self.metrics = None
        if self.dashboard is not None:
            try:
                await self.dashboard.start()
            except OSError as e:
                log.warning("dashboard: not served, port %d: %s", self.dashboard.port,
                            e.strerror or e)
                self.dashboard = None

    async def close(self) -> None:
        try:
            if self.dashboard is not None:
                await self.dashboard.close()
            if self.metrics is not None:
                await self.metrics.close()
            if self.front is not None:
                await self.front.close()
        finally:
            await self.broker.close()

    def describe(self) -> str:
        out = "" if self.front is None else f", gRPC {self.front.address}"
        if self.metrics is not None:
            out += (f", metrics http://{self.broker.store_config.broker_ip1}:{self.metrics.port}"
                    "/metrics")
        if self.dashboard is not None:
            out += f", dashboard {self.dashboard.url}"
        return out


def existing_sizes(root: Path) -> dict[str, str]:
    """The file sizes an existing store was written with (a store keeps them: a CommitLog of
    another segment size does not load, and index files of another geometry are dropped)."""
    out: dict[str, str] = {}
    segments = sorted((root / "commitlog").glob("[0-9]" * 20))
    if segments:
        out["mappedFileSizeCommitLog"] = str(segments[0].stat().st_size)
    index = store_reader.index_files(root)
    body = index[0].stat().st_size - INDEX_HEADER_SIZE if index else 0
    if body > 0 and body % _INDEX_BYTES_PER_SLOT == 0:  # RocketMQ's ratio: no need to read
        ratio4 = body // _INDEX_BYTES_PER_SLOT
        out["maxHashSlotNum"], out["maxIndexNum"] = str(ratio4), str(4 * ratio4)
    elif body > 0 and (slots := _index_slots(index)) is not None:
        out["maxHashSlotNum"] = str(slots)
        out["maxIndexNum"] = str((body - slots * INDEX_SLOT_SIZE) // INDEX_ENTRY_SIZE)
    return out


def _index_slots(files: list[Path]) -> int | None:
    """The slot count of the first index file whose entries tell it (another ratio than 4 entries
    per slot: ``store_reader.index_slot_num`` reads it from the header and the last entry)."""
    for f in files:
        with store_reader.mapped(f) as mm:
            head = store_reader.read_index_header(mm)
            if head is not None and (slots := store_reader.index_slot_num(mm, head)) is not None:
                return slots
    return None


def run_until_signalled(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]],
                        ready: Callable[[], str]) -> None:
    """Run ``start``, print the ready line (``ready()``: it can name the ports actually bound),
    wait for SIGINT/SIGTERM, run ``stop``."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, done.set)
        await start()
        log.info("hot paths: %s", native.describe())
        print(f"rocketlite ready: {ready()}", flush=True)
        try:
            await done.wait()
        finally:
            log.info("shutting down")
            await stop()

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


class ControllerWatch:
    """The controller's election watcher (``controller.watcher``) for one cluster, run beside a
    NameServer when ``--controller etcd://...`` asks; loads the etcd client only then."""

    def __init__(self, url: str, cluster: str) -> None:
        self.url = url
        self.cluster = cluster
        self._stop: Callable[[], Awaitable[None]] | None = None

    async def start(self) -> None:
        from rocketlite.controller.etcd import EtcdController
        from rocketlite.controller.watcher import ElectionWatcher

        controller = EtcdController(self.url)
        watcher = ElectionWatcher(controller, self.cluster)
        watcher.start()

        async def stop() -> None:
            await watcher.stop()
            await controller.close()

        self._stop = stop
        log.info("controller: electing masters of cluster %s in etcd %s", self.cluster, self.url)

    async def close(self) -> None:
        if self._stop is not None:
            await self._stop()
            self._stop = None


def _overrides(store: Path | None, broker_port: int | None, namesrv_addr: str | None,
               flush: str | None, grpc_port: int | None = None, no_grpc: bool = False,
               controller: str | None = None, metrics_port: int | None = None,
               dashboard_port: int | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    if metrics_port is not None:
        out["metricsPort"] = str(metrics_port)
    if dashboard_port is not None:
        out["dashboardPort"] = str(dashboard_port)
    if controller is not None:  # RocketMQ 5's keys for controller mode
        out["enableControllerMode"] = "true"
        out["controllerAddr"] = controller
    if grpc_port is not None:
        out["grpcServerPort"] = str(grpc_port)
    if no_grpc:
        out["enableGrpcServer"] = "false"
    if store is not None:
        out["storePathRootDir"] = str(store)
    if broker_port is not None:
        out["listenPort"] = str(broker_port)
    if namesrv_addr is not None:
        out["namesrvAddr"] = namesrv_addr
    if flush is not None:
        out["flushDiskType"] = flush
    return out


StoreOpt = Annotated[Path | None, typer.Option(
    "--store", "--store-dir", help="store root directory (storePathRootDir) (default: ./store)")]
ConfOpt = Annotated[Path | None, typer.Option("-c", "--conf", help="broker.conf (RocketMQ keys)")]
LogOpt = Annotated[str, typer.Option(help="log level")]
FlushOpt = Annotated[str | None, typer.Option(
    "--flush", help="flushDiskType: ASYNC_FLUSH or SYNC_FLUSH")]
GrpcPortOpt = Annotated[int | None, typer.Option(
    help="gRPC port for RocketMQ 5.x clients (grpcServerPort, default: 8081)")]
NoGrpcOpt = Annotated[bool, typer.Option(
    "--no-grpc", help="do not serve the gRPC front (enableGrpcServer=false)")]
MetricsPortOpt = Annotated[int | None, typer.Option(
    help="Prometheus /metrics port (metricsPort), 0: no metrics (default: 5557)")]
DashboardPortOpt = Annotated[int | None, typer.Option(
    help="web dashboard port on loopback (dashboardPort), 0: no dashboard (default: 8082)")]
ControllerOpt = Annotated[str | None, typer.Option(
    "--controller", help="controller mode with this etcd, etcd://host:port (automatic failover)")]
DebugOpt = Annotated[bool, typer.Option(
    "--debug", help="on a failure (port in use, store locked, bad broker.conf), show the traceback")]
LISTEN_NOTE = ("Every server listens on all interfaces (0.0.0.0); brokerIP1 (default 127.0.0.1) is "
               "the address the broker gives clients: set it in broker.conf to serve other hosts "
               "(README: Network).")


def start(
    store: StoreOpt = None,
    conf: ConfOpt = None,
    namesrv_port: Annotated[int, typer.Option(help="NameServer port")] = 9876,
    broker_port: Annotated[int | None, typer.Option(
        help="broker port (listenPort, default: 10911)")] = None,
    flush: FlushOpt = None,
    grpc_port: GrpcPortOpt = None,
    no_grpc: NoGrpcOpt = False,
    controller: ControllerOpt = None,
    metrics_port: MetricsPortOpt = None,
    dashboard_port: DashboardPortOpt = None,
    log_level: LogOpt = "INFO",
    debug: DebugOpt = False,
) -> None:
    """Start a NameServer and a broker in one process (the quickest way to a working broker),
    with the gRPC front for RocketMQ 5.x clients on 8081 and Prometheus metrics on 5557.
    A new store gets laptop-sized files: 64 MiB CommitLog segments, a 42 MB IndexFile; RocketMQ's
    sizes are one broker.conf key away (mappedFileSizeCommitLog, maxHashSlotNum, maxIndexNum).

    Defaults: store ./store, NameServer 9876, broker 10911, gRPC 8081, metrics 5557, dashboard
    8082 (loopback; --dashboard-port 0 turns it off).
    """
    errors.set_debug(debug)
    setup_logging(log_level)
    overrides = _overrides(store, broker_port, f"127.0.0.1:{namesrv_port}", flush, grpc_port,
                           no_grpc, controller, metrics_port, dashboard_port)
    bcfg, scfg, fcfg = _server_configs(conf, overrides, START_DEFAULTS)
    namesrv = NameServer("0.0.0.0", namesrv_port,
                         kv_config_path=scfg.store_path_root_dir / "namesrv" / "kvConfig.json",
                         limits=bcfg.remoting_limits(), tls=fcfg.tls.server,
                         acl_file=acl_path(bcfg.acl_file) if bcfg.acl_enable else None)
    watch = ControllerWatch(controller, bcfg.broker_cluster_name) if controller else None
    broker = BrokerWithFront(Broker(bcfg, scfg, fcfg.tls), fcfg)

    async def up() -> None:
        await namesrv.start()
        try:
            if watch is not None:
                await watch.start()
            await broker.start()
        except BaseException:
            if watch is not None:
                await watch.close()
            await namesrv.close()
            raise

    async def down() -> None:
        await broker.close()
        if watch is not None:
            await watch.close()
        await namesrv.close()

    run_until_signalled(up, down, lambda: (
        f"NameServer 127.0.0.1:{namesrv.port}, broker {bcfg.broker_name} at "
        f"{scfg.broker_ip1}:{broker.broker.port}{broker.describe()}, "
        f"store {scfg.store_path_root_dir}"))


def namesrv(
    port: Annotated[int, typer.Option(help="listen port")] = 9876,
    kv_config: Annotated[Path | None, typer.Option(help="kvConfig.json path")] = None,
    conf: Annotated[Path | None, typer.Option(
        "-c", "--conf", help="namesrv.conf: its TLS keys (tlsServerMode, tls.server.*)")] = None,
    controller: ControllerOpt = None,
    cluster: Annotated[str, typer.Option(
        help="with --controller: the cluster whose masters this NameServer elects")] = "DefaultCluster",
    acl_file: Annotated[Path | None, typer.Option(
        help="plain_acl.yml: topic, KV and config writes then need a signed admin account")] = None,
    log_level: LogOpt = "INFO",
    debug: DebugOpt = False,
) -> None:
    """Start a NameServer alone; with --controller it also elects a new master of a broker group
    of --cluster when its master's lease in etcd ends."""
    errors.set_debug(debug)
    setup_logging(log_level)
    try:
        tls = TlsServerConfig.from_properties(read_properties_file(conf) if conf else {})
    except ConfigError as e:
        raise ConfigError(f"{conf}: {e}") from e
    server = NameServer("0.0.0.0", port, kv_config_path=kv_config, tls=tls, acl_file=acl_file)
    watch = ControllerWatch(controller, cluster) if controller else None

    async def up() -> None:
        await server.start()
        if watch is not None:
            try:
                await watch.start()
            except BaseException:
                await server.close()
                raise

    async def down() -> None:
        if watch is not None:
            await watch.close()
        await server.close()

    run_until_signalled(up, down, lambda: f"NameServer on port {server.port}")


def broker(
    conf: ConfOpt = None,
    store: StoreOpt = None,
    broker_port: Annotated[int | None, typer.Option(help="broker port (listenPort)")] = None,
    namesrv_addr: Annotated[str | None, typer.Option(
        "-n", "--namesrv-addr", help="NameServers, host:port;host:port")] = None,
    flush: FlushOpt = None,
    grpc_port: GrpcPortOpt = None,
    no_grpc: NoGrpcOpt = False,
    controller: ControllerOpt = None,
    metrics_port: MetricsPortOpt = None,
    dashboard_port: DashboardPortOpt = None,
    log_level: LogOpt = "INFO",
    debug: DebugOpt = False,
) -> None:
    """Start a broker alone; it registers with every NameServer in namesrvAddr and serves the
    gRPC front for RocketMQ 5.x clients (unless --no-grpc). With --controller its role (master
    or slave of its group) is the controller's choice (enableControllerMode)."""
    errors.set_debug(debug)
    setup_logging(log_level)
    bcfg, scfg, fcfg = _server_configs(
        conf, _overrides(store, broker_port, namesrv_addr, flush, grpc_port, no_grpc, controller,
                         metrics_port, dashboard_port))
    b = BrokerWithFront(Broker(bcfg, scfg, fcfg.tls), fcfg)
    run_until_signalled(b.start, b.close, lambda: (
        f"broker {bcfg.broker_name} at {scfg.broker_ip1}:{b.broker.port}{b.describe()}, "
        f"NameServers {bcfg.namesrv_addr}, store {scfg.store_path_root_dir}"))
