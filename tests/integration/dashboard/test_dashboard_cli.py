"""``rocketlite dashboard``'s expected failures: one ``error:`` line and exit 1, no traceback."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from rocketlite.cli.main import app

pytestmark = pytest.mark.integration
runner = CliRunner()


def fails(*args: str) -> str:
    r = runner.invoke(app, ["dashboard", *args])
    assert r.exit_code == 1, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = fails("-n", "127.0.0.1:9", "--port", str(port))
    assert f"cannot serve the dashboard on 127.0.0.1:{port}" in line


def test_a_username_needs_a_password() -> None:
    assert "both a username and a password" in fails("-n", "127.0.0.1:9", "--username", "admin")
