"""RecallMessage (RocketMQ 5.3): withdraw a delayed message before it is delivered, by the
``recall_handle`` SendMessage returned for it (``broker.recall.handle_for``, re-exported,
builds it for each message SendMessage stored to the timer wheel).

The topic is checked as every RPC's (ILLEGAL_TOPIC), then the broker's recall
(``broker.recall.recall``) checks the handle and stores the delete marker that stops the message
in the timer wheel; OK carries the recalled message's id. Codes as the Java proxy answers them:
its ``ResponseBuilder`` maps none of the broker's refusals (ILLEGAL_OPERATION: a bad handle,
another topic, another broker, a time already passed; SERVICE_NOT_AVAILABLE) and a handle the
proxy cannot decode is its own INTERNAL_SERVER_ERROR, so all of those are INTERNAL_SERVER_ERROR with
the broker's remark ("recall handle is invalid", "recall failed, timestamp invalid" ...); a topic
that does not exist is TOPIC_NOT_FOUND.
"""

from __future__ import annotations

from rocketlite.broker.recall import RecallError, handle_for, recall, recall_handle
from rocketlite.protocol.codes import ResponseCode
from rocketlite.proxy import validate
from rocketlite.proxy.context import FrontContext, ServicerContext, peer_address
from rocketlite.proxy.convert_in import host_bytes
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, error_status, ok, status

__all__ = ["handle_for", "recall_handle", "recall_message"]


async def recall_message(
    ctx: FrontContext, request: spb.RecallMessageRequest, context: ServicerContext,
) -> spb.RecallMessageResponse:
    try:
        topic = validate.topic_name(request.topic, ctx.broker.config)
        host, port = peer_address(context)
        msg_id = await recall(ctx.broker, topic, request.recall_handle, None, host_bytes(host),
                              port)
    except RecallError as e:
        code = (Code.TOPIC_NOT_FOUND if e.response_code == ResponseCode.TOPIC_NOT_EXIST
                else Code.INTERNAL_SERVER_ERROR)
        return spb.RecallMessageResponse(status=status(code, str(e)))
    except Exception as e:  # noqa: BLE001 - every failure is answered with its status
        return spb.RecallMessageResponse(status=error_status(e))
    return spb.RecallMessageResponse(status=ok(), message_id=msg_id)
