from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpchelp
import pytest
from grpchelp import GrpcEnv, grpc_world


@pytest.fixture(autouse=True, params=grpchelp.IMPLS)
def grpc_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test of the tier runs against each server implementation (``grpcServerImpl``)."""
    impl: str = request.param
    monkeypatch.setattr(grpchelp, "IMPL", impl)
    return impl


@pytest.fixture
async def g(tmp_path: Path) -> AsyncIterator[GrpcEnv]:
    async with grpc_world(tmp_path / "store") as env:
        yield env
