"""ProxyConfig: the gRPC front's settings, read from the same ``broker.conf`` (RocketMQ
``ProxyConfig`` names where it has them).

==================  =====================  =======  ===============================================
key                 field                  default  meaning
==================  =====================  =======  ===============================================
enableGrpcServer    enable_grpc_server     true     serve apache.rocketmq.v2 beside Remoting
grpcServerPort      grpc_server_port       8081     the port (0: a free one, named in the log)
grpcServerImpl      grpc_server_impl       native   the server: ``native`` (proxy.h2) or ``grpcio``
==================  =====================  =======  ===============================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketlite.common.errors import ConfigError
from rocketlite.store.config import kwargs_from_properties

IMPLS = ("native", "grpcio")
DEFAULT_IMPL = "native"


@dataclass(slots=True, frozen=True)
class ProxyConfig:
    enable_grpc_server: bool = field(default=True, metadata={"key": "enableGrpcServer"})
    grpc_server_port: int = field(default=8081, metadata={"key": "grpcServerPort"})
    grpc_server_impl: str = field(default=DEFAULT_IMPL, metadata={"key": "grpcServerImpl"})

    def __post_init__(self) -> None:
        if not 0 <= self.grpc_server_port <= 65535:
            raise ConfigError(f"grpcServerPort={self.grpc_server_port}: not a port (0..65535)")
        if self.grpc_server_impl not in IMPLS:
            raise ConfigError(f"grpcServerImpl={self.grpc_server_impl}: not one of "
                              f"{', '.join(IMPLS)}")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ProxyConfig:
        return cls(**kwargs_from_properties(cls, props))
