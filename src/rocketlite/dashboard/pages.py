"""The HTML of each page: one shell (navigation, the page's script) whose ``<main>`` the page's
script fills from the JSON API. The pages are static apart from their name, so they need no
template engine."""

from __future__ import annotations

import html

from aiohttp import web

PAGES = {
    "cluster": "Cluster",
    "topics": "Topics",
    "groups": "Consumer groups",
    "messages": "Messages",
    "dlq": "DLQ",
    "producers": "Producers",
}
"""URL name -> title, in navigation order."""
CHARTED = frozenset({"cluster", "topics", "groups"})
"""The pages with a chart over time (uPlot and ``chart.js`` loaded)."""

routes = web.RouteTableDef()


def shell(page: str) -> str:
    """The HTML of ``page`` (a key of ``PAGES``)."""
    nav = "".join(
        f'<a href="/{name}"{" class=current" if name == page else ""}>{html.escape(title)}</a>'
        for name, title in PAGES.items())
    vendor = ('<link rel="stylesheet" href="/static/vendor/uPlot.min.css">'
              '<script src="/static/vendor/uPlot.iife.min.js"></script>'
              '<script src="/static/chart.js"></script>') if page in CHARTED else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(PAGES[page])} · rocketlite</title>
<link rel="stylesheet" href="/static/app.css">{vendor}
<script src="/static/common.js"></script>
<script src="/static/{page}.js" defer></script>
</head><body>
<header><span class="brand">rocketlite</span><nav>{nav}</nav></header>
<main id="page" data-page="{page}"><h1>{html.escape(PAGES[page])}</h1>
<p id="error" class="error" hidden></p><div id="content">loading…</div></main>
</body></html>
"""


async def page(request: web.Request) -> web.Response:
    name = request.match_info["page"]
    if name not in PAGES:
        raise web.HTTPNotFound(text=f"no page {name!r}")
    return web.Response(text=shell(name), content_type="text/html")


async def index(request: web.Request) -> web.Response:
    raise web.HTTPFound("/cluster")


routes.get("/")(index)
routes.get("/{page}")(page)
