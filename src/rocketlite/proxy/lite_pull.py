"""PullMessage, UpdateOffset, GetOffset, QueryOffset: the 5.x lite-pull path.

Not implemented yet: each RPC answers NOT_IMPLEMENTED."""

from __future__ import annotations

from collections.abc import AsyncIterator

from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, status


async def pull_message(
    ctx: FrontContext, request: spb.PullMessageRequest, context: ServicerContext,
) -> AsyncIterator[spb.PullMessageResponse]:
    yield spb.PullMessageResponse(status=status(
        Code.NOT_IMPLEMENTED, "PullMessage is not implemented yet"))


async def update_offset(
    ctx: FrontContext, request: spb.UpdateOffsetRequest, context: ServicerContext,
) -> spb.UpdateOffsetResponse:
    return spb.UpdateOffsetResponse(status=status(
        Code.NOT_IMPLEMENTED, "UpdateOffset is not implemented yet"))


async def get_offset(
    ctx: FrontContext, request: spb.GetOffsetRequest, context: ServicerContext,
) -> spb.GetOffsetResponse:
    return spb.GetOffsetResponse(status=status(
        Code.NOT_IMPLEMENTED, "GetOffset is not implemented yet"))


async def query_offset(
    ctx: FrontContext, request: spb.QueryOffsetRequest, context: ServicerContext,
) -> spb.QueryOffsetResponse:
    return spb.QueryOffsetResponse(status=status(
        Code.NOT_IMPLEMENTED, "QueryOffset is not implemented yet"))
