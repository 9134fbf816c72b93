"""The JSON API the pages draw: each handler calls the admin functions ``rocketlite admin`` runs and
answers their results through ``admin.jsonable`` (camelCase keys, as ``--json`` prints them).

==========================================  ==============================================
``GET /api/cluster``                        ``cluster_list``, each broker with its disk use
                                            (``broker_status``'s ``commitLogDiskRatio``)
``GET /api/topics``                         ``stats_all``: user topics, messages, groups
``GET /api/topics/{topic}``                 ``topic_status``: min/max offset per queue
``GET /api/groups``                         ``consumer_progress`` of every group
``GET /api/groups/{group}``                 ``consumer_progress`` and ``consumer_connection``
``GET /api/messages?topic=&key=``           ``query_msg_by_key``
``GET /api/messages?id=[&topic=]``          ``query_msg_by_id`` (offset msgId or UNIQ_KEY)
==========================================  ==============================================

DLQ reads and the resend are in ``api_dlq``, the offset reset in ``api_offsets``. An
``AdminError`` becomes ``{"error": reason}`` (``app.errors``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from rocketlite.admin import (
    AdminError,
    MessageView,
    broker_status,
    cluster_list,
    consumer_connection,
    consumer_progress,
    jsonable,
    query_msg_by_id,
    query_msg_by_key,
    stats_all,
    topic_status,
)
from rocketlite.dashboard.state import session_of

routes = web.RouteTableDef()
BODY_PREVIEW = 4096
"""The bytes of a body shown as text; the whole body is in ``body`` (base64)."""


def message_json(m: MessageView) -> dict[str, Any]:
    """A message as ``jsonable`` makes it, with its body's start as text (``bodyText``, None when
    it is not UTF-8) and its size."""
    out: dict[str, Any] = jsonable(m)
    preview = m.body[:BODY_PREVIEW]
    try:
        out["bodyText"] = preview.decode("utf-8")
    except UnicodeDecodeError as e:  # a multi-byte character cut at the preview's end is fine
        out["bodyText"] = preview[:e.start].decode("utf-8") if e.start > len(preview) - 4 else None
    out["bodySize"] = len(m.body)
    return out


@routes.get("/api/cluster")
async def cluster(request: web.Request) -> web.Response:
    session = session_of(request)
    brokers = []
    for entry in await cluster_list(session):
        row = jsonable(entry)
        row["diskRatio"] = None
        if entry.error is None:
            try:
                (status,) = await broker_status(session, broker_addr=entry.address)
                row["diskRatio"] = float(status.table.get("commitLogDiskRatio", "nan"))
            except (AdminError, ValueError):
                pass  # the row's other figures stand; the page shows no disk use
        brokers.append(row)
    return web.json_response({"brokers": brokers})


@routes.get("/api/topics")
async def topics(request: web.Request) -> web.Response:
    return web.json_response({"topics": jsonable(await stats_all(session_of(request)))})


@routes.get("/api/topics/{topic}")
async def topic(request: web.Request) -> web.Response:
    name = request.match_info["topic"]
    queues = await topic_status(session_of(request), name)
    return web.json_response({"topic": name, "queues": jsonable(queues)})


@routes.get("/api/groups")
async def groups(request: web.Request) -> web.Response:
    return web.json_response({"groups": jsonable(await consumer_progress(session_of(request)))})


@routes.get("/api/groups/{group}")
async def group(request: web.Request) -> web.Response:
    session = session_of(request)
    name = request.match_info["group"]
    (progress,) = await consumer_progress(session, name)
    try:
        connection: Any = jsonable(await consumer_connection(session, name))
    except AdminError:
        connection = None  # offline: the progress says so (online 0)
    return web.json_response({"progress": jsonable(progress), "connection": connection})


@routes.get("/api/messages")
async def messages(request: web.Request) -> web.Response:
    q = request.query
    topic, key, msg_id = q.get("topic") or None, q.get("key") or None, q.get("id") or None
    session = session_of(request)
    if msg_id is not None:
        found = [await query_msg_by_id(session, msg_id, topic)]
    elif topic is not None and key is not None:
        found = await query_msg_by_key(session, topic, key)
    else:
        raise web.HTTPBadRequest(text='{"error": "give a topic and a key, or a message id"}',
                                 content_type="application/json")
    return web.json_response({"messages": [message_json(m) for m in found]})
