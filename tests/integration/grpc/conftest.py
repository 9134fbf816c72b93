from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from grpchelp import GrpcEnv, grpc_world


@pytest.fixture
async def g(tmp_path: Path) -> AsyncIterator[GrpcEnv]:
    async with grpc_world(tmp_path / "store") as env:
        yield env
