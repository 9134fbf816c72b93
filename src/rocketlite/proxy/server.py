"""``GrpcFront``: the gRPC front's server on ``grpcServerPort`` (8081, the Java proxy's port; 0
picks a free one), started after the broker and stopped before it. ``impl`` (``grpcServerImpl``)
picks the server: ``native`` (``proxy.h2``, our HTTP/2 server on an asyncio Protocol, a fraction
of grpc.aio's CPU per call) or ``grpcio`` (``grpc.aio``); both serve the same
``MessagingServicer`` (checked, ``proxy/acl.AclServicer``, when the broker has ``aclEnable``).

TLS (``tls``: the broker's ``tlsServerMode`` and ``tls.server.*`` files, ``remoting.tls``): the
native server tells TLS from plain by the first byte as the Remoting port does (permissive: both,
as the Java proxy's ``ProxyAndTlsProtocolNegotiator``; enforcing: TLS only); grpcio cannot serve
both on one port, so there permissive and enforcing both mean TLS only, and an encrypted key
(``tls.server.keyPassword``) is refused.

It advertises ``brokerIP1`` and the bound port in routes: the 5.x clients send and receive
through the endpoints a route names, so those must reach this server.

Every ``SWEEP_S`` it ends the sessions of clients silent for ``SESSION_IDLE_S`` with no Telemetry
stream open (they leave the broker's groups); at close every client's stream is ended."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import grpc

from rocketlite.common.errors import ConfigError
from rocketlite.proxy.acl import servicer
from rocketlite.proxy.config import DEFAULT_IMPL, IMPLS
from rocketlite.proxy.context import FrontContext
from rocketlite.proxy.h2.connection import Limits
from rocketlite.proxy.h2.server import H2Server, service_methods
from rocketlite.proxy.pb import service_pb2, service_pb2_grpc
from rocketlite.proxy.sessions import SESSION_IDLE_S, Sessions
from rocketlite.remoting.tls import KEYS, TlsServerConfig

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

log = logging.getLogger(__name__)

DEFAULT_PORT = 8081
MAX_MESSAGE_BYTES = 130 << 20  # a 128 MiB body (the client's max_body_size) plus its envelope
STOP_GRACE_S = 2.0
SWEEP_S = 10.0


class GrpcFront:
    def __init__(self, broker: Broker, port: int = DEFAULT_PORT, host: str = "0.0.0.0",
                 sweep_s: float = SWEEP_S, session_idle_s: float = SESSION_IDLE_S,
                 impl: str = DEFAULT_IMPL, tls: TlsServerConfig | None = None) -> None:
        if impl not in IMPLS:
            raise ValueError(f"grpcServerImpl={impl}: not one of {', '.join(IMPLS)}")
        self.impl = impl
        self.tls = tls
        self.broker = broker
        self.sweep_s = sweep_s
        self.session_idle_s = session_idle_s
        self._sweeper: asyncio.Task[None] | None = None
        self.bind_host = host
        self.requested_port = port
        self.ctx = FrontContext(broker, broker.store_config.broker_ip1, port, Sessions())
        self._server: grpc.aio.Server | None = None
        self._native: H2Server | None = None

    @property
    def port(self) -> int:
        return self.ctx.port

    @property
    def address(self) -> str:
        return f"{self.ctx.host}:{self.ctx.port}"

    async def start(self) -> None:
        if self.impl == "native":
            await self._start_native()
        else:
            await self._start_grpcio()
        self._sweeper = asyncio.create_task(self._sweep_loop(), name="grpc-front-sweep")
        log.info("gRPC front (apache.rocketmq.v2, %s) listening on %s", self.impl, self.address)

    async def _start_native(self) -> None:
        server = H2Server(service_methods(
            service_pb2.DESCRIPTOR.services_by_name["MessagingService"], servicer(self.ctx)),
            Limits(max_message=MAX_MESSAGE_BYTES))
        try:
            self.ctx.port = await server.start(self.bind_host, self.requested_port, self.tls)
        except OSError as e:
            raise OSError(f"the gRPC front cannot listen on {self.bind_host}:"
                          f"{self.requested_port}: {e}") from e
        self._native = server

    async def _start_grpcio(self) -> None:
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ])
        service_pb2_grpc.add_MessagingServiceServicer_to_server(servicer(self.ctx), server)
        where = f"{self.bind_host}:{self.requested_port}"
        if self.tls is not None and self.tls.enabled:
            bound = server.add_secure_port(where, _grpcio_credentials(self.tls))
        else:
            bound = server.add_insecure_port(where)
        if bound == 0:
            raise OSError(f"the gRPC front cannot listen on {self.bind_host}:{self.requested_port}")
        self.ctx.port = bound
        await server.start()
        self._server = server

    def sweep(self) -> int:
        """End idle sessions (module docstring); how many ended."""
        gone = self.ctx.sessions.expire(self.session_idle_s)
        for s in gone:
            for group in s.leave(self.broker):
                self.broker.notify_consumer_ids_changed(group)
            s.channel.close()
        return len(gone)

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_s)
            try:
                self.sweep()
            except Exception:  # one bad sweep must not end them for good
                log.exception("ending idle gRPC client sessions failed")

    async def close(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            await asyncio.wait([sweeper])
        for s in self.ctx.sessions.all():
            s.channel.close()  # ends the Telemetry streams, so the server's stop need not wait
        server, self._server = self._server, None
        if server is not None:
            await server.stop(STOP_GRACE_S)
        native, self._native = self._native, None
        if native is not None:
            await native.close(STOP_GRACE_S)


def _grpcio_credentials(tls: TlsServerConfig) -> grpc.ServerCredentials:
    """grpcio's TLS from the same files (a PEM key without password: grpcio takes no password)."""
    if tls.key_password:
        raise ConfigError(f"{KEYS['key_password']}: grpcServerImpl=grpcio cannot read an "
                          "encrypted key (use the native server, or an unencrypted key)")
    tls.context()  # the files load, or ConfigError names the one that does not

    def read(path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    trust = read(tls.trust_cert_path) if tls.trust_cert_path else None
    return grpc.ssl_server_credentials(
        [(read(tls.key_path), read(tls.cert_path))], root_certificates=trust,
        require_client_auth=tls.need_client_auth == "require")
