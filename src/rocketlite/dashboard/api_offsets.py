"""Moving a group's offsets from the dashboard: ``admin.reset_offset_by_time`` (a write: ``auth``
lets it through only with the credentials). The broker tells the group's online members, which
resume from the new offsets; the groups page's lag chart shows the jump at its next poll.

``POST /api/groups/{group}/reset`` with ``{"topic": T, "timestamp": ...}``: milliseconds since
the epoch, ``-1`` or ``"end"`` (skip everything accumulated), ``"now"`` or
``yyyy-MM-dd#HH:mm:ss:SSS`` (what ``rocketlite admin resetOffsetByTime -s`` takes); 0 goes back
to the start of each queue. The answer: each queue's new offset.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from rocketlite.admin import AdminError, jsonable, parse_timestamp, reset_offset_by_time
from rocketlite.admin.offsets import SKIP_TO_END
from rocketlite.dashboard.state import session_of

routes = web.RouteTableDef()


def timestamp_of(value: Any) -> int:
    """The reset's timestamp from the request's ``timestamp`` (module doc)."""
    if isinstance(value, bool):
        raise AdminError("timestamp is a number or a date, not true/false")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return SKIP_TO_END if value.strip().lower() == "end" else parse_timestamp(value)
    raise AdminError("give a timestamp: ms since the epoch, -1 or end, now, or "
                     "yyyy-MM-dd#HH:mm:ss:SSS")


@routes.post("/api/groups/{group}/reset")
async def reset(request: web.Request) -> web.Response:
    body: Any = await request.json() if request.can_read_body else {}
    if not isinstance(body, dict) or not isinstance(body.get("topic"), str) or not body["topic"]:
        raise AdminError("give the topic whose offsets to move")
    done = await reset_offset_by_time(session_of(request), request.match_info["group"],
                                      body["topic"], timestamp_of(body.get("timestamp")))
    return web.json_response({"queues": jsonable(done)})
