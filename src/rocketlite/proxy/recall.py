"""RecallMessage: withdraw a delayed message before it is delivered.

Not implemented yet: each RPC answers NOT_IMPLEMENTED."""

from __future__ import annotations

from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, status


async def recall_message(
    ctx: FrontContext, request: spb.RecallMessageRequest, context: ServicerContext,
) -> spb.RecallMessageResponse:
    return spb.RecallMessageResponse(status=status(
        Code.NOT_IMPLEMENTED, "RecallMessage is not implemented yet"))
