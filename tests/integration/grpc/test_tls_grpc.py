"""TLS on the gRPC front's port (issue 22), for each server implementation: a TLS channel
trusting the CA is served; a plain channel is served too by the native server in permissive mode
(first-byte sniffing, as the Java proxy), refused by grpcio (TLS only once certificates are
configured) and by enforcing mode; mutual TLS refuses a channel without a client certificate."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpchelp import client_metadata, grpc_world

from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.pb import service_pb2_grpc
from tlshelp import Certs, make_certs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def route_code(channel: grpc.aio.Channel) -> int:
    """QueryRoute's status code (the server answered), or raises AioRpcError."""
    stub = service_pb2_grpc.MessagingServiceStub(channel)
    reply = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="TlsRoute")),
                                  timeout=5, metadata=client_metadata())
    return int(reply.status.code)


def secure(port: int, certs: Certs, with_cert: bool = False) -> grpc.aio.Channel:
    key_chain = certs.client.read_bytes() if with_cert else None
    creds = grpc.ssl_channel_credentials(certs.ca.read_bytes(), key_chain, key_chain)
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", creds)


async def answered(channel: grpc.aio.Channel) -> bool:
    try:
        await route_code(channel)
        return True
    except grpc.aio.AioRpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        return False
    finally:
        await channel.close()


@pytest.mark.parametrize("mode", ["permissive", "enforcing"])
async def test_tls_channels_are_served_and_plain_ones_as_the_mode_says(
        tmp_path: Path, certs: Certs, grpc_impl: str, mode: str) -> None:
    async with grpc_world(tmp_path, tls=certs.server_tls(mode)) as g:
        assert await answered(secure(g.front.port, certs))
        plain_served = await answered(grpc.aio.insecure_channel(f"127.0.0.1:{g.front.port}"))
        assert plain_served == (mode == "permissive" and grpc_impl == "native")


async def test_mutual_tls_needs_a_client_certificate(
        tmp_path: Path, certs: Certs, grpc_impl: str) -> None:
    async with grpc_world(tmp_path, tls=certs.server_tls("enforcing",
                                                         need_client_auth="require")) as g:
        assert not await answered(secure(g.front.port, certs))
        assert await answered(secure(g.front.port, certs, with_cert=True))
