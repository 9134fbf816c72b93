"""Telemetry (the settings exchange, orphaned-transaction checks), Heartbeat, NotifyClientTermination.

Not implemented yet: each RPC answers NOT_IMPLEMENTED."""

from __future__ import annotations

from collections.abc import AsyncIterator

from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, status


async def heartbeat(
    ctx: FrontContext, request: spb.HeartbeatRequest, context: ServicerContext,
) -> spb.HeartbeatResponse:
    return spb.HeartbeatResponse(status=status(
        Code.NOT_IMPLEMENTED, "Heartbeat is not implemented yet"))


async def notify_client_termination(
    ctx: FrontContext, request: spb.NotifyClientTerminationRequest, context: ServicerContext,
) -> spb.NotifyClientTerminationResponse:
    return spb.NotifyClientTerminationResponse(status=status(
        Code.NOT_IMPLEMENTED, "NotifyClientTermination is not implemented yet"))


async def telemetry(
    ctx: FrontContext, requests: AsyncIterator[spb.TelemetryCommand], context: ServicerContext,
) -> AsyncIterator[spb.TelemetryCommand]:
    async for _ in requests:
        yield spb.TelemetryCommand(status=status(
            Code.NOT_IMPLEMENTED, "Telemetry is not implemented yet"))
