"""RecallMessage (RocketMQ 5.3): withdraw a delayed message before it is delivered, by the
``recall_handle`` SendMessage returned for it (``handle_for`` builds it, with
``broker.recall.recall_handle``, for each message SendMessage stored to the timer wheel).

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

from rocketlite.broker.recall import RecallError, recall, recall_handle
from rocketlite.broker.timer_divert import TIMER_OUT_MS, TIMER_TOPIC, get_property, parse_int
from rocketlite.broker.topics import RETRY_GROUP_TOPIC_PREFIX
from rocketlite.formats.properties import REAL_TOPIC, UNIQ_KEY
from rocketlite.protocol.codes import ResponseCode
from rocketlite.proxy import validate
from rocketlite.proxy.context import FrontContext, ServicerContext, peer_address
from rocketlite.proxy.convert_in import host_bytes
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, error_status, ok, status
from rocketlite.store.message import MessageToStore

__all__ = ["handle_for", "recall_handle", "recall_message"]


def handle_for(stored: MessageToStore, broker_name: str) -> str:
    """The ``recall_handle`` of a SendResultEntry: for a message the timer wheel took (stored to
    the timer topic with ``TIMER_OUT_MS`` and ``REAL_TOPIC``, not a retry topic: 5.x's
    ``SendMessageProcessor``), else ``""``."""
    if stored.topic != TIMER_TOPIC:
        return ""
    text = stored.properties
    out_ms = parse_int(get_property(text, TIMER_OUT_MS))
    topic = get_property(text, REAL_TOPIC)
    msg_id = get_property(text, UNIQ_KEY)
    if out_ms is None or topic is None or msg_id is None or topic.startswith(
            RETRY_GROUP_TOPIC_PREFIX):
        return ""
    return recall_handle(topic, broker_name, out_ms, msg_id)


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
