"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue: POP
consumption (``broker.pop``).

Not implemented yet: each RPC answers NOT_IMPLEMENTED."""

from __future__ import annotations

from collections.abc import AsyncIterator

from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, status


async def receive_message(
    ctx: FrontContext, request: spb.ReceiveMessageRequest, context: ServicerContext,
) -> AsyncIterator[spb.ReceiveMessageResponse]:
    yield spb.ReceiveMessageResponse(status=status(
        Code.NOT_IMPLEMENTED, "ReceiveMessage is not implemented yet"))


async def ack_message(
    ctx: FrontContext, request: spb.AckMessageRequest, context: ServicerContext,
) -> spb.AckMessageResponse:
    return spb.AckMessageResponse(status=status(
        Code.NOT_IMPLEMENTED, "AckMessage is not implemented yet"))


async def change_invisible_duration(
    ctx: FrontContext, request: spb.ChangeInvisibleDurationRequest, context: ServicerContext,
) -> spb.ChangeInvisibleDurationResponse:
    return spb.ChangeInvisibleDurationResponse(status=status(
        Code.NOT_IMPLEMENTED, "ChangeInvisibleDuration is not implemented yet"))


async def forward_to_dlq(
    ctx: FrontContext, request: spb.ForwardMessageToDeadLetterQueueRequest, context: ServicerContext,
) -> spb.ForwardMessageToDeadLetterQueueResponse:
    return spb.ForwardMessageToDeadLetterQueueResponse(status=status(
        Code.NOT_IMPLEMENTED, "ForwardMessageToDeadLetterQueue is not implemented yet"))
