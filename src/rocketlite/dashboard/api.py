"""The JSON API the pages draw: each handler calls the admin functions ``rocketlite admin`` runs and
answers their results through ``admin.jsonable`` (camelCase keys, as ``--json`` prints them).

==========================================  ==============================================
``GET /api/cluster``                        ``cluster_list``, each broker with its disk use
                                            (``broker_status``'s ``commitLogDiskRatio``)
``GET /api/topics``                         ``stats_all``: user topics, messages, groups
``GET /api/topics/{topic}``                 ``topic_status``: min/max offset per queue;
                                            ``get_topic_config``: each master's config
``GET /api/groups``                         ``consumer_progress`` of every group
``GET /api/groups/{group}``                 ``consumer_progress`` and ``consumer_connection``
``GET /api/producers?group=&topic=``         ``producer_connection``
==========================================  ==============================================

Messages are in ``api_messages``, the DLQ and its resend in ``api_dlq``, the offset reset in
``api_offsets``. An ``AdminError`` becomes ``{"error": reason}`` (``app.errors``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from rocketlite.admin import (
    AdminError,
    broker_status,
    cluster_list,
    consumer_connection,
    consumer_progress,
    get_topic_config,
    jsonable,
    producer_connection,
    stats_all,
    topic_status,
)
from rocketlite.dashboard.state import session_of

routes = web.RouteTableDef()


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
    session = session_of(request)
    queues = await topic_status(session, name)
    configs = await get_topic_config(session, name)
    return web.json_response({"topic": name, "queues": jsonable(queues),
                              "configs": jsonable(configs)})


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


@routes.get("/api/producers")
async def producers(request: web.Request) -> web.Response:
    """``producer_connection``: the producers of ``group`` connected to ``topic``'s brokers."""
    group, topic = request.query.get("group", ""), request.query.get("topic", "")
    if not group or not topic:
        raise AdminError("give a producer group and a topic")
    found = await producer_connection(session_of(request), group, topic)
    return web.json_response({"connections": jsonable(found)})
