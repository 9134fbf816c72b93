"""The gRPC front's server: it serves apache.rocketmq.v2.MessagingService beside Remoting and
answers what it does not support with a v2 status that says so."""

from __future__ import annotations

from grpchelp import GrpcEnv, client_metadata

from rocketlite.proxy.pb import definition_pb2 as dpb
from rocketlite.proxy.pb import service_pb2 as spb


async def test_an_unsupported_rpc_is_answered_not_implemented_with_the_reason(g: GrpcEnv) -> None:
    r = await g.stub.SyncLiteSubscription(spb.SyncLiteSubscriptionRequest(), timeout=5,
                                          metadata=client_metadata())
    assert r.status.code == dpb.Code.NOT_IMPLEMENTED
    assert "SyncLiteSubscription" in r.status.message


async def test_the_front_advertises_the_port_it_bound(g: GrpcEnv) -> None:
    assert g.front.port > 0
    assert g.front.address == f"{g.broker.store_config.broker_ip1}:{g.front.port}"
