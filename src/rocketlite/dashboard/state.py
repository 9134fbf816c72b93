"""What the handlers share for the dashboard's lifetime: one ``AdminSession`` (one connection pool
to the cluster) and the credentials writes need (None: read-only)."""

from __future__ import annotations

import dataclasses

from aiohttp import web

from rocketlite.admin import AdminSession
from rocketlite.dashboard.auth import Credentials


@dataclasses.dataclass(slots=True)
class DashboardState:
    session: AdminSession
    credentials: Credentials | None


STATE = web.AppKey("state", DashboardState)


def session_of(request: web.Request) -> AdminSession:
    return request.app[STATE].session
