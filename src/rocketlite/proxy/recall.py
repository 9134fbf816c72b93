"""RecallMessage (RocketMQ 5.3): withdraw a delayed message before it is delivered, by the
``recall_handle`` SendMessage returned for it.

Not supported: the Java broker recalls by writing a TIMER_DEL_UNIQKEY marker that the timer wheel
matches against the scheduled message when its slot comes; this broker's timer wheel keeps no
such markers (``broker.timer_divert`` refuses them) and could only cancel by rewriting its slot
files. So SendMessage returns no recall handle, and RecallMessage answers NOT_IMPLEMENTED saying
why (after the request's own checks: a bad topic is still ILLEGAL_TOPIC, an empty handle
BAD_REQUEST)."""

from __future__ import annotations

from rocketlite.proxy import validate
from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, FrontError, error_status, status


async def recall_message(
    ctx: FrontContext, request: spb.RecallMessageRequest, context: ServicerContext,
) -> spb.RecallMessageResponse:
    try:
        validate.topic_name(request.topic)
        if not request.recall_handle.strip():
            raise FrontError(Code.BAD_REQUEST, "the recall handle is empty")
        return spb.RecallMessageResponse(status=status(
            Code.NOT_IMPLEMENTED, "recalling a delayed message is not supported by this broker: "
            "its timer wheel cannot cancel a scheduled message (no TIMER_DEL_UNIQKEY markers); "
            "SendMessage gives no recall handle"))
    except Exception as e:  # noqa: BLE001 - every failure is answered with its status
        return spb.RecallMessageResponse(status=error_status(e))
