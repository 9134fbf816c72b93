"""``grpcServerImpl``: broker.conf picks the gRPC front's server, native by default; anything
else is a clear configuration error."""

from __future__ import annotations

import pytest

from rocketlite.common.errors import ConfigError
from rocketlite.proxy.config import ProxyConfig


def test_the_key_and_its_default() -> None:
    assert ProxyConfig().grpc_server_impl == "native"
    assert ProxyConfig.from_properties({"grpcServerImpl": "grpcio"}).grpc_server_impl == "grpcio"
    with pytest.raises(ConfigError, match="grpcServerImpl=netty: not one of native, grpcio"):
        ProxyConfig.from_properties({"grpcServerImpl": "netty"})


def test_the_front_refuses_an_unknown_server() -> None:
    from rocketlite.proxy.server import GrpcFront

    with pytest.raises(ValueError, match="grpcServerImpl=h3"):
        GrpcFront(None, 0, impl="h3")  # type: ignore[arg-type]
