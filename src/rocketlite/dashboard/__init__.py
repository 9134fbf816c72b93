"""``rocketlite.dashboard``: the operator's web pages over any cluster, reached through its
NameServer (``rocketlite dashboard -n host:port``, port 8082 by default), and served by
``rocketlite start`` / ``broker`` themselves on ``dashboardPort`` (8082, loopback, 0: off).

A layer above ``rocketlite.admin``, beside the CLI: every figure and every action comes from the
admin functions ``rocketlite admin`` runs (no second copy of the admin logic), answered as JSON
(``/api/...``, ``admin.jsonable``) and drawn by static pages (``static/``: plain JavaScript and the
vendored uPlot for the lag chart; nothing is loaded from another host). Reads need no login on
loopback; writes (resend) only with credentials the dashboard was started with (``auth``).
"""

from rocketlite.dashboard.app import DashboardServer, create_app, serve
from rocketlite.dashboard.auth import Credentials

__all__ = ["Credentials", "DashboardServer", "create_app", "serve"]
