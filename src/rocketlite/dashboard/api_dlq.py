"""The DLQ's JSON API: the dead-letter topics (``%DLQ%<group>``), their messages, and the resend
(``admin.resend_dlq``, a write: ``auth`` lets it through only with the credentials).

``resend_dlq`` works through a DLQ in order, remembering what it re-sent under its tool group, so
"resend one" re-sends the oldest dead letter not re-sent yet and "resend all" the rest: the same
bookkeeping as ``rocketlite admin resend-dlq``.

=====================================  ===========================================
``GET /api/dlq``                       every DLQ topic: group, queues, messages held
``GET /api/dlq/{group}``               up to ``limit`` (50) of its messages, oldest first
``POST /api/dlq/{group}/resend``       ``{"max": n}`` (1: one; null or absent: all)
=====================================  ===========================================
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from rocketlite.admin import jsonable, print_msg, resend_dlq, topic_list, topic_status
from rocketlite.dashboard.api_messages import message_json
from rocketlite.dashboard.state import session_of

routes = web.RouteTableDef()
DLQ_PREFIX = "%DLQ%"
LIST_LIMIT = 50
RESEND_IDLE_S = 2.0


def _bad(reason: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=web.json_response({"error": reason}).text,
                              content_type="application/json")


@routes.get("/api/dlq")
async def dlq_topics(request: web.Request) -> web.Response:
    session = session_of(request)
    out = []
    for t in await topic_list(session):
        if t.startswith(DLQ_PREFIX):
            queues = await topic_status(session, t)
            out.append({"group": t[len(DLQ_PREFIX):], "topic": t, "queues": len(queues),
                        "messages": sum(q.max_offset - q.min_offset for q in queues)})
    return web.json_response({"dlq": out})


@routes.get("/api/dlq/{group}")
async def dlq_messages(request: web.Request) -> web.Response:
    try:
        limit = int(request.query.get("limit", LIST_LIMIT))
    except ValueError as e:
        raise _bad("limit is not a number") from e
    found = await print_msg(session_of(request), DLQ_PREFIX + request.match_info["group"],
                            limit=max(1, min(limit, 1000)))
    return web.json_response({"messages": [message_json(m) for m in found]})


@routes.post("/api/dlq/{group}/resend")
async def resend(request: web.Request) -> web.Response:
    body: Any = await request.json() if request.can_read_body else {}
    most = body.get("max") if isinstance(body, dict) else None
    if most is not None and (not isinstance(most, int) or isinstance(most, bool) or most < 1):
        raise _bad("max is a whole number of at least 1, or null for all")
    counts = await resend_dlq(session_of(request), request.match_info["group"], most,
                              idle_s=RESEND_IDLE_S)
    return web.json_response(jsonable(counts))
