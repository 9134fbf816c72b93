"""QueryRoute, QueryAssignment: the routes a 5.x client sees (this front's endpoint for every queue).

Not implemented yet: each RPC answers NOT_IMPLEMENTED."""

from __future__ import annotations

from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, status


async def query_route(
    ctx: FrontContext, request: spb.QueryRouteRequest, context: ServicerContext,
) -> spb.QueryRouteResponse:
    return spb.QueryRouteResponse(status=status(
        Code.NOT_IMPLEMENTED, "QueryRoute is not implemented yet"))


async def query_assignment(
    ctx: FrontContext, request: spb.QueryAssignmentRequest, context: ServicerContext,
) -> spb.QueryAssignmentResponse:
    return spb.QueryAssignmentResponse(status=status(
        Code.NOT_IMPLEMENTED, "QueryAssignment is not implemented yet"))
