"""The gRPC tier's world: a NameServer, a broker and its gRPC front in this process on free
loopback ports, and a ``MessagingServiceStub`` on a channel to the front with a 5.x client's
metadata (not a test module)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.namesrv.server import NameServer
from rocketlite.proxy.pb import service_pb2_grpc
from rocketlite.proxy.server import GrpcFront
from rocketlite.remoting.tls import TlsServerConfig
from rocketlite.store.config import StoreConfig

CLIENT_ID = "test-client@1234#0"
IMPLS = ("native", "grpcio")
IMPL = "native"
"""The server ``grpc_world`` starts when not told (conftest runs the tier once per ``IMPLS``)."""
# FrontContext fields a test module sets for every front it starts (``limits``, ``renew``): set
# with ``monkeypatch.setitem`` before the world starts (e.g. in an autouse fixture).
FRONT_OVERRIDES: dict[str, object] = {}


def store_config(root: Path, **extra: str) -> StoreConfig:
    """A small store on loopback: 1 MiB CommitLog segments, short flush intervals."""
    props = {
        "storePathRootDir": str(root), "listenPort": "0", "brokerIP1": "127.0.0.1",
        "mappedFileSizeCommitLog": str(1 << 20), "mappedFileSizeConsumeQueue": "2000",
        "maxHashSlotNum": "256", "maxIndexNum": "2000", "maxMessageSize": str(256 << 10),
        "flushIntervalCommitLog": "20", "flushIntervalConsumeQueue": "20",
    }
    props.update(extra)
    return StoreConfig.from_properties(props)


def client_metadata(client_id: str = CLIENT_ID) -> tuple[tuple[str, str], ...]:
    """What rocketmq-python-client 5.1.2 sends with every call (PROTOCOL.md section 4)."""
    return (("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2"),
            ("x-mq-client-version", "5.1.2"), ("x-mq-client-id", client_id),
            ("x-mq-namespace", ""), ("x-mq-request-id", "r-1"))


@dataclass
class GrpcEnv:
    namesrv: NameServer
    broker: Broker
    front: GrpcFront
    channel: grpc.aio.Channel
    stub: service_pb2_grpc.MessagingServiceStub

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.front.port}"


@contextlib.asynccontextmanager
async def grpc_world(root: Path, broker_props: dict[str, str] | None = None,
                     impl: str | None = None, tls: TlsServerConfig | None = None,
                     **store_props: str) -> AsyncIterator[GrpcEnv]:
    """The world; with ``tls`` the front's port takes TLS as it says (``env.channel`` stays a
    plain channel: TLS tests open their own)."""
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    broker: Broker | None = None
    front: GrpcFront | None = None
    channel: grpc.aio.Channel | None = None
    try:
        props = {"namesrvAddr": f"127.0.0.1:{ns.port}", "brokerName": "broker-g"}
        props.update(broker_props or {})
        broker = Broker(BrokerConfig.from_properties(props), store_config(root, **store_props))
        await broker.start()
        front = GrpcFront(broker, 0, host="127.0.0.1", impl=impl or IMPL, tls=tls)
        for name, value in FRONT_OVERRIDES.items():
            setattr(front.ctx, name, value)
        await front.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{front.port}")
        yield GrpcEnv(ns, broker, front, channel, service_pb2_grpc.MessagingServiceStub(channel))
    finally:
        if channel is not None:
            await channel.close()
        if front is not None:
            await front.close()
        if broker is not None:
            await broker.close()
        await ns.close()
