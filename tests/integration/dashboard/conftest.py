"""The ``dash`` fixture: a broker with traffic and dashboards over it, one per test module (see
``dashhelp``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, free_port, started
from dashhelp import PASSWORD, USER, DashEnv, traffic


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashEnv]:
    tmp: Path = tmp_path_factory.mktemp("dash")
    port, ro_port = free_port(), free_port()
    with started(tmp, mappedFileSizeCommitLog="1048576", messageDelayLevel="1s 1s 1s",
                 defaultTopicQueueNums="2") as s:
        ns, addr, server = s.ns, s.addr, s.server
        ids = asyncio.run(asyncio.wait_for(traffic(ns, addr), 60))
        with ServerProcess(["dashboard", "-n", ns, "--port", str(port), "--username", USER,
                            "--password", PASSWORD], tmp / "dash.log") as d, \
                ServerProcess(["dashboard", "-n", ns, "--port", str(ro_port)],
                              tmp / "dash-ro.log") as ro:
            d.wait_ready()
            ro.wait_ready()
            yield DashEnv(ns, addr, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{ro_port}", ids)
            assert ro.stop() == 0, ro.log()
            assert d.stop() == 0, d.log()
        assert server.stop() == 0, server.log()
