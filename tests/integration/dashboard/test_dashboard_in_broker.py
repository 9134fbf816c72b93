"""``rocketlite start`` serves the dashboard itself on ``dashboardPort`` (loopback), over its own
NameServer; ``--dashboard-port 0`` serves none, and a port another process holds is a warning:
the broker serves on without it."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, broker_addr, free_port, start_args

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def test_start_serves_the_dashboard_of_its_cluster(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=1048576\n", encoding="utf-8")
    port = free_port()
    args = [*start_args(tmp_path / "store", conf), "--dashboard-port", str(port),
            "--metrics-port", "0"]
    with ServerProcess(args, tmp_path / "start.log") as server:
        ready = server.wait_ready()
        assert f"dashboard http://127.0.0.1:{port}" in ready
        cluster = json.dumps(get_json(f"http://127.0.0.1:{port}/api/cluster"))
        assert broker_addr(args) in cluster  # the broker of this process, through its NameServer
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            assert b"rocketlite" in r.read()
        assert server.stop() == 0, server.log()


def test_dashboard_port_zero_serves_none_and_a_taken_port_only_warns(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=1048576\n", encoding="utf-8")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = [*start_args(tmp_path / "a" / "store", conf), "--dashboard-port", str(port),
                "--metrics-port", "0"]
        with ServerProcess(args, tmp_path / "a.log") as server:
            ready = server.wait_ready()
            assert ", dashboard http" not in ready
            assert f"dashboard: not served, port {port}" in server.log()
            assert server.stop() == 0, server.log()
    args = [*start_args(tmp_path / "b" / "store", conf), "--dashboard-port", "0",
            "--metrics-port", "0"]
    with ServerProcess(args, tmp_path / "b.log") as server:
        assert ", dashboard http" not in server.wait_ready()
        assert "dashboard: not served" not in server.log()  # not tried at all
        assert server.stop() == 0, server.log()
