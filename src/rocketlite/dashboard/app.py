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

from rocketlite.admin import AdminError, AdminSession, TopicNotFoundError, UnreachableError
from rocketlite.dashboard import api, api_dlq, api_messages, api_offsets, pages
from rocketlite.dashboard.auth import Credentials, Handler, guard
from rocketlite.dashboard.state import STATE, DashboardState

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


async def serve(namesrv: str, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                credentials: Credentials | None = None) -> None:
    """Serve the dashboard of the cluster behind ``namesrv`` on ``host:port`` until SIGINT or
    SIGTERM; prints ``rocketlite ready: dashboard on http://...`` once it listens."""
    runner = web.AppRunner(create_app(AdminSession(namesrv), credentials), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, done.set)
        shown = f"[{host}]" if ":" in host else host
        print(f"rocketlite ready: dashboard on http://{shown}:{port} for NameServer {namesrv}"
              f" ({'writes with login' if credentials else 'read-only'})", flush=True)
        await done.wait()
    finally:
        await runner.cleanup()
