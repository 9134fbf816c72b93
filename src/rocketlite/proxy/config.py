"""ProxyConfig: the gRPC front's settings, read from the same ``broker.conf`` (RocketMQ
``ProxyConfig`` names where it has them).

==================  =====================  =======  ===============================================
key                 field                  default  meaning
==================  =====================  =======  ===============================================
enableGrpcServer    enable_grpc_server     true     serve apache.rocketmq.v2 beside Remoting
grpcServerPort      grpc_server_port       8081     the port (0: a free one, named in the log)
==================  =====================  =======  ===============================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketlite.common.errors import ConfigError
from rocketlite.store.config import kwargs_from_properties


@dataclass(slots=True, frozen=True)
class ProxyConfig:
    enable_grpc_server: bool = field(default=True, metadata={"key": "enableGrpcServer"})
    grpc_server_port: int = field(default=8081, metadata={"key": "grpcServerPort"})

    def __post_init__(self) -> None:
        if not 0 <= self.grpc_server_port <= 65535:
            raise ConfigError(f"grpcServerPort={self.grpc_server_port}: not a port (0..65535)")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ProxyConfig:
        return cls(**kwargs_from_properties(cls, props))
