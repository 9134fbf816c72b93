"""The aiohttp application (pages, static files, JSON API) and ``serve``, which runs it until
SIGINT or SIGTERM.

An ``AdminError`` from an admin function is the API's expected failure: ``{"error": reason}`` with
404 for a topic that does not exist, 502 for a NameServer or broker that cannot be reached, 400
for anything else (a bad id, a group with no offsets, a broker's refusal).
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

from aiohttp import web

from rocketlite.acl.sign import Credentials as AclCredentials
from rocketlite.admin import AdminError, AdminSession, TopicNotFoundError, UnreachableError
from rocketlite.dashboard import api, api_dlq, api_messages, api_offsets, pages
from rocketlite.dashboard.auth import Credentials, Handler, guard
from rocketlite.dashboard.state import STATE, DashboardState
from rocketlite.remoting.tls import TlsOption

STATIC = Path(__file__).parent / "static"
DEFAULT_PORT = 8082


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The admin functions' expected failures as JSON (module doc)."""
    try:
        return await handler(request)
    except TopicNotFoundError as e:
        return web.json_response({"error": str(e)}, status=404)
    except UnreachableError as e:
        return web.json_response({"error": str(e)}, status=502)
    except AdminError as e:
        return web.json_response({"error": str(e)}, status=400)
    except json.JSONDecodeError as e:  # a request body that is not JSON
        return web.json_response({"error": f"the request's body is not JSON: {e}"}, status=400)


def create_app(session: AdminSession, credentials: Credentials | None = None) -> web.Application:
    """The dashboard over ``session`` (closed with the application)."""
    app = web.Application(middlewares=[guard(credentials), errors])
    app[STATE] = DashboardState(session, credentials)
    app.router.add_static("/static", STATIC)
    app.add_routes(api.routes)
    app.add_routes(api_messages.routes)
    app.add_routes(api_dlq.routes)
    app.add_routes(api_offsets.routes)
    app.add_routes(pages.routes)  # last: "/{page}" would shadow nothing above, but reads best so

    async def close(app: web.Application) -> None:
        await app[STATE].session.close()

    app.on_cleanup.append(close)
    return app


class DashboardServer:
    """The dashboard of the cluster behind ``namesrv`` on ``host:port``, on the running loop:
    ``rocketlite dashboard`` runs one alone, ``rocketlite start`` and ``broker`` beside the broker
    (``dashboardPort``, connecting with the broker's own TLS settings: ``tls``)."""

    def __init__(self, namesrv: str, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 credentials: Credentials | None = None, tls: TlsOption = None,
                 acl: AclCredentials | None = None) -> None:
        self.namesrv, self.host, self.port = namesrv, host, port
        self.credentials = credentials  # the login for writes
        self.tls = tls
        self.acl = acl  # what its requests to an ACL cluster are signed with
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    async def start(self) -> None:
        """Listen (``OSError`` when the port is taken: nothing is left open)."""
        runner = web.AppRunner(create_app(AdminSession(self.namesrv, tls=self.tls,
                                                       credentials=self.acl), self.credentials),
                               access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def serve(namesrv: str, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                credentials: Credentials | None = None, tls: TlsOption = None,
                acl: AclCredentials | None = None) -> None:
    """Serve the dashboard of the cluster behind ``namesrv`` on ``host:port`` until SIGINT or
    SIGTERM; prints ``rocketlite ready: dashboard on http://...`` once it listens."""
    server = DashboardServer(namesrv, host, port, credentials, tls, acl)
    await server.start()
    try:
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, done.set)
        print(f"rocketlite ready: dashboard on {server.url} for NameServer {namesrv}"
              f" ({'writes with login' if credentials else 'read-only'})", flush=True)
        await done.wait()
    finally:
        await server.close()
