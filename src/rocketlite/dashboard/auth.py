"""Who may read and who may write.

Reads (GET) need no login from a loopback peer; from any other peer they need the credentials,
and are refused when the dashboard has none (it would otherwise show a cluster to its network).
Writes (POST: resend) are refused unless the dashboard was started with credentials
(``--username``/``--password`` or ``ROCKETLITE_DASHBOARD_USERNAME``/``_PASSWORD``) and the request
carries them as HTTP Basic. A refusal is JSON (``{"error": ...}``, 401 or 403) without a
``WWW-Authenticate`` challenge: the pages ask for the credentials themselves, so the browser
never pops its own dialog. Since the credentials travel in a header the page's script sets
(never a cookie or a login the browser remembers), another site cannot make a visitor's browser
send a write.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclasses.dataclass(frozen=True, slots=True)
class Credentials:
    username: str
    password: str

    def match(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries these credentials (Basic)."""
        scheme, _, encoded = (header or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        return bool(sep) and hmac.compare_digest(user.encode(), self.username.encode()) \
            and hmac.compare_digest(password.encode(), self.password.encode())


def credentials(username: str | None, password: str | None) -> Credentials | None:
    """Both given: the credentials; neither: None (read-only); one alone is a mistake."""
    if not username and not password:
        return None
    if not username or not password:
        raise ValueError("give both a username and a password, or neither")
    return Credentials(username, password)


def is_loopback(peer: str | None) -> bool:
    try:
        return peer is not None and ipaddress.ip_address(peer.split("%")[0]).is_loopback
    except ValueError:
        return False


def _refuse(status: int, reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=status)


def refusal(request: web.Request, creds: Credentials | None) -> web.Response | None:
    """Why ``request`` may not go on (the response to send), or None when it may."""
    authorized = creds is not None and creds.match(request.headers.get("Authorization"))
    if request.method in ("GET", "HEAD"):
        if authorized or is_loopback(request.remote):
            return None
        if creds is None:
            return _refuse(403, "reads from another host need the dashboard started with credentials")
        return _refuse(401, "log in to read from another host")
    if creds is None:
        return _refuse(403, "writes are disabled: start the dashboard with --username and --password")
    if not authorized:
        return _refuse(401, "log in (the dashboard's username and password) to change anything")
    return None


def guard(creds: Credentials | None) -> Middleware:
    """A middleware applying the rules of the module doc to every request."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        refused = refusal(request, creds)
        return refused if refused is not None else await handler(request)

    return middleware
