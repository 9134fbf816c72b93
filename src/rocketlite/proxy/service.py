"""``MessagingServicer``: the ``apache.rocketmq.v2.MessagingService`` methods, each handing over
to the module that owns its area (see the package docstring). An RPC that raises is answered
``INTERNAL_SERVER_ERROR`` with the error by its area module, never with a gRPC failure the client
would retry blindly; this class holds no logic."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator

from rocketlite.proxy import consumer, lite_pull, producer, recall, route, telemetry
from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.h2.server import BatchHandler
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.pb import service_pb2_grpc
from rocketlite.proxy.status import Code, status


class MessagingServicer(service_pb2_grpc.MessagingServiceServicer):
    def __init__(self, ctx: FrontContext) -> None:
        self.ctx = ctx

    def batch_methods(self) -> dict[str, BatchHandler]:
        """The methods the native server may run a read's calls of together (``h2.server``)."""
        ctx = self.ctx
        return {
            "SendMessage": functools.partial(producer.send_messages, ctx),
            "AckMessage": functools.partial(consumer.ack_messages, ctx),
        }

    async def QueryRoute(self, request: spb.QueryRouteRequest, context: ServicerContext
                         ) -> spb.QueryRouteResponse:
        return await route.query_route(self.ctx, request, context)

    async def Heartbeat(self, request: spb.HeartbeatRequest, context: ServicerContext
                        ) -> spb.HeartbeatResponse:
        return await telemetry.heartbeat(self.ctx, request, context)

    async def SendMessage(self, request: spb.SendMessageRequest, context: ServicerContext
                          ) -> spb.SendMessageResponse:
        return await producer.send_message(self.ctx, request, context)

    async def QueryAssignment(self, request: spb.QueryAssignmentRequest, context: ServicerContext
                              ) -> spb.QueryAssignmentResponse:
        return await route.query_assignment(self.ctx, request, context)

    async def ReceiveMessage(self, request: spb.ReceiveMessageRequest, context: ServicerContext
                             ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        async for response in consumer.receive_message(self.ctx, request, context):
            yield response

    async def AckMessage(self, request: spb.AckMessageRequest, context: ServicerContext
                         ) -> spb.AckMessageResponse:
        return await consumer.ack_message(self.ctx, request, context)

    async def ForwardMessageToDeadLetterQueue(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, context: ServicerContext,
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        return await consumer.forward_to_dlq(self.ctx, request, context)

    async def PullMessage(self, request: spb.PullMessageRequest, context: ServicerContext
                          ) -> AsyncIterator[spb.PullMessageResponse]:
        async for response in lite_pull.pull_message(self.ctx, request, context):
            yield response

    async def UpdateOffset(self, request: spb.UpdateOffsetRequest, context: ServicerContext
                           ) -> spb.UpdateOffsetResponse:
        return await lite_pull.update_offset(self.ctx, request, context)

    async def GetOffset(self, request: spb.GetOffsetRequest, context: ServicerContext
                        ) -> spb.GetOffsetResponse:
        return await lite_pull.get_offset(self.ctx, request, context)

    async def QueryOffset(self, request: spb.QueryOffsetRequest, context: ServicerContext
                          ) -> spb.QueryOffsetResponse:
        return await lite_pull.query_offset(self.ctx, request, context)

    async def EndTransaction(self, request: spb.EndTransactionRequest, context: ServicerContext
                             ) -> spb.EndTransactionResponse:
        return await producer.end_transaction(self.ctx, request, context)

    async def Telemetry(self, request_iterator: AsyncIterator[spb.TelemetryCommand],
                        context: ServicerContext) -> AsyncIterator[spb.TelemetryCommand]:
        async for command in telemetry.telemetry(self.ctx, request_iterator, context):
            yield command

    async def NotifyClientTermination(
        self, request: spb.NotifyClientTerminationRequest, context: ServicerContext,
    ) -> spb.NotifyClientTerminationResponse:
        return await telemetry.notify_client_termination(self.ctx, request, context)

    async def ChangeInvisibleDuration(
        self, request: spb.ChangeInvisibleDurationRequest, context: ServicerContext,
    ) -> spb.ChangeInvisibleDurationResponse:
        return await consumer.change_invisible_duration(self.ctx, request, context)

    async def RecallMessage(self, request: spb.RecallMessageRequest, context: ServicerContext
                            ) -> spb.RecallMessageResponse:
        return await recall.recall_message(self.ctx, request, context)

    async def SyncLiteSubscription(
        self, request: spb.SyncLiteSubscriptionRequest, context: ServicerContext,
    ) -> spb.SyncLiteSubscriptionResponse:
        return spb.SyncLiteSubscriptionResponse(status=status(
            Code.NOT_IMPLEMENTED, "lite topics (SyncLiteSubscription) are not supported"))
