"""Finding messages: the JSON the messages page draws.

==============================================  ==========================================
``GET /api/messages?topic=&key=``               ``query_msg_by_key``
``GET /api/messages?id=[&topic=]``              ``query_msg_by_id`` (offset msgId, or with a
                                                topic also a UNIQ_KEY)
``GET /api/messages?topic=&begin=[&end=]``      ``print_msg``: stored in the time range (ms,
                                                ``yyyy-MM-dd#HH:mm:ss:SSS`` or now), at most
                                                ``LIMIT``
``GET /api/messages/consumed?topic=&broker=``   each group's state of one message: consumed
``&queue=&offset=``                             once its offset in the queue is past it
==============================================  ==========================================

A message is answered as ``admin.jsonable`` makes it (body in base64), with its body's start as
text (``bodyText``, None when it is not UTF-8) and its size (``bodySize``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from rocketlite.admin import (
    AdminError,
    MessageView,
    consumer_progress,
    jsonable,
    parse_timestamp,
    print_msg,
    query_msg_by_id,
    query_msg_by_key,
)
from rocketlite.dashboard.state import session_of

routes = web.RouteTableDef()
BODY_PREVIEW = 4096
"""The bytes of a body shown as text; the whole body is in ``body`` (base64)."""
LIMIT = 100
"""The most messages a time-range search answers."""


def message_json(m: MessageView) -> dict[str, Any]:
    """A message as the module doc says."""
    out: dict[str, Any] = jsonable(m)
    preview = m.body[:BODY_PREVIEW]
    try:
        out["bodyText"] = preview.decode("utf-8")
    except UnicodeDecodeError as e:  # a multi-byte character cut at the preview's end is fine
        out["bodyText"] = preview[:e.start].decode("utf-8") if e.start > len(preview) - 4 else None
    out["bodySize"] = len(m.body)
    return out


def _int(query: Any, name: str) -> int:
    try:
        return int(query.get(name, ""))
    except ValueError as e:
        raise AdminError(f"{name} is not a whole number") from e


@routes.get("/api/messages")
async def messages(request: web.Request) -> web.Response:
    q = request.query
    topic, key, msg_id = q.get("topic") or None, q.get("key") or None, q.get("id") or None
    begin, end = q.get("begin") or None, q.get("end") or None
    session = session_of(request)
    if msg_id is not None:
        found = [await query_msg_by_id(session, msg_id, topic)]
    elif topic is not None and key is not None:
        found = await query_msg_by_key(session, topic, key)
    elif topic is not None and begin is not None:
        found = await print_msg(session, topic, begin_ms=parse_timestamp(begin),
                                end_ms=parse_timestamp(end) if end else None, limit=LIMIT)
    else:
        raise AdminError("give a topic and a key or a begin time, or a message id")
    return web.json_response({"messages": [message_json(m) for m in found]})


@routes.get("/api/messages/consumed")
async def consumed(request: web.Request) -> web.Response:
    """Each group with an offset on the message's queue: consumed or not (its offset past the
    message's), as the dashboard of RocketMQ shows a message's track."""
    q = request.query
    topic, broker = q.get("topic", ""), q.get("broker", "")
    queue, offset = _int(q, "queue"), _int(q, "offset")
    out = [{"group": g.group, "online": g.online, "consumerOffset": qp.consumer_offset,
            "consumed": qp.consumer_offset > offset}
           for g in await consumer_progress(session_of(request)) for qp in g.queues
           if (qp.topic, qp.broker_name, qp.queue_id) == (topic, broker, queue)]
    return web.json_response({"groups": out})
