"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketlite.namesrv.server import NameServer
from rocketlite.remoting.client import RemotingClient


@pytest.fixture
async def ns(tmp_path: Path) -> AsyncIterator[tuple[NameServer, RemotingClient, str]]:
    """A NameServer on a free loopback port (its KV file under ``tmp_path``), a client, and the
    server's address."""
    server = NameServer("127.0.0.1", 0, kv_config_path=tmp_path / "kvConfig.json")
    await server.start()
    client = RemotingClient()
    try:
        yield server, client, f"127.0.0.1:{server.port}"
    finally:
        await client.close()
        await server.close()
