"""SendMessage (NORMAL, FIFO, DELAY, TRANSACTION) and EndTransaction.

Not implemented yet: each RPC answers NOT_IMPLEMENTED."""

from __future__ import annotations

from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, status


async def send_message(
    ctx: FrontContext, request: spb.SendMessageRequest, context: ServicerContext,
) -> spb.SendMessageResponse:
    return spb.SendMessageResponse(status=status(
        Code.NOT_IMPLEMENTED, "SendMessage is not implemented yet"))


async def end_transaction(
    ctx: FrontContext, request: spb.EndTransactionRequest, context: ServicerContext,
) -> spb.EndTransactionResponse:
    return spb.EndTransactionResponse(status=status(
        Code.NOT_IMPLEMENTED, "EndTransaction is not implemented yet"))
