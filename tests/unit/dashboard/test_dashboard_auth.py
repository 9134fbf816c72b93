"""Who may read and write (``dashboard.auth``): loopback reads are open, other hosts need the
login, writes need the dashboard started with credentials and the request carrying them; and
``message_json``'s body preview."""

from __future__ import annotations

import base64
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from rocketlite.admin import MessageView
from rocketlite.dashboard.api_messages import BODY_PREVIEW, message_json
from rocketlite.dashboard.auth import Credentials, credentials, is_loopback, refusal

CREDS = Credentials("admin", "pw:with:colons")


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def request(method: str, peer: str, auth: str | None = None) -> web.Request:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (
        (peer, 40000) if name == "peername" else default)
    headers = {"Authorization": auth} if auth is not None else {}
    return make_mocked_request(method, "/api/x", headers=headers, transport=transport)


def status(method: str, peer: str, creds: Credentials | None, auth: str | None = None) -> int:
    r = refusal(request(method, peer, auth), creds)
    return 200 if r is None else r.status


@pytest.mark.parametrize("peer", ["127.0.0.1", "::1", "127.3.4.5"])
def test_loopback_reads_need_no_login(peer: str) -> None:
    assert status("GET", peer, None) == 200
    assert status("GET", peer, CREDS) == 200


def test_reads_from_another_host_need_the_login() -> None:
    assert status("GET", "10.1.2.3", None) == 403  # no credentials: never
    assert status("GET", "10.1.2.3", CREDS) == 401
    assert status("GET", "10.1.2.3", CREDS, basic("admin", "nope")) == 401
    assert status("GET", "10.1.2.3", CREDS, basic("admin", "pw:with:colons")) == 200


def test_writes_need_credentials_and_the_login() -> None:
    assert status("POST", "127.0.0.1", None) == 403
    assert status("POST", "127.0.0.1", None, basic("admin", "pw:with:colons")) == 403
    assert status("POST", "127.0.0.1", CREDS) == 401
    assert status("POST", "127.0.0.1", CREDS, basic("root", "pw:with:colons")) == 401
    assert status("POST", "127.0.0.1", CREDS, "Basic !!!notbase64") == 401
    assert status("POST", "127.0.0.1", CREDS, "Bearer x") == 401
    assert status("POST", "127.0.0.1", CREDS, basic("admin", "pw:with:colons")) == 200


def test_credentials_are_both_or_neither() -> None:
    assert credentials(None, None) is None and credentials("", "") is None
    assert credentials("a", "b") == Credentials("a", "b")
    with pytest.raises(ValueError, match="both"):
        credentials("a", None)
    with pytest.raises(ValueError, match="both"):
        credentials(None, "b")


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1")
    assert not is_loopback("192.168.1.1") and not is_loopback(None) and not is_loopback("x")


def view(body: bytes) -> MessageView:
    return MessageView("T", "b", 0, 0, "id", "oid", None, [], 0, 0, "h", "h", 0, 0, 0, 0, {}, body)


def test_body_preview() -> None:
    assert message_json(view("été".encode()))["bodyText"] == "été"
    long = ("é" * BODY_PREVIEW).encode()  # a character cut at the preview's end is dropped
    got = message_json(view(long))
    assert got["bodyText"] == "é" * (BODY_PREVIEW // 2) and got["bodySize"] == 2 * BODY_PREVIEW
    assert base64.b64decode(got["body"]) == long
    assert message_json(view(b"\xff\xfe binary"))["bodyText"] is None
