"""TLS from broker.conf through ``rocketlite start`` (issue 22): with ``tlsServerMode=enforcing``,
the ``tls.server.*`` files and ``tls.enable`` (the broker's own connection to its NameServer) the
process serves; ``rocketlite admin --tls --ca`` reads the cluster, a plain ``rocketlite admin``
gets the refusal naming TLS. (A certificate that does not load: ``test_cli_errors``.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from brokerhelp import ServerProcess, free_port
from rocketlite.cli.main import app
from tlshelp import make_certs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
runner = CliRunner()


def tls_conf(path: Path, cert: Path, ca: Path) -> Path:
    path.write_text("mappedFileSizeCommitLog=1048576\ntlsServerMode=enforcing\n"
                    f"tls.server.certPath={cert}\ntls.server.keyPath={cert}\n"
                    f"tls.enable=true\ntls.client.trustCertPath={ca}\n", encoding="utf-8")
    return path


def test_start_with_enforcing_tls_and_the_admin_cli(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    conf = tls_conf(tmp_path / "broker.conf", certs.server, certs.ca)
    ns_port = free_port()
    ns = f"127.0.0.1:{ns_port}"
    args = ["start", "--grpc-port", "0", "--metrics-port", "0", "--dashboard-port", "0",
            "--store", str(tmp_path / "store"), "-c", str(conf), "--namesrv-port", str(ns_port),
            "--broker-port", str(free_port())]
    with ServerProcess(args, tmp_path / "start.log") as server:
        server.wait_ready()
        r = runner.invoke(app, ["admin", "--tls", "--ca", str(certs.ca), "clusterList", "-n", ns,
                                "--json"])
        assert r.exit_code == 0, r.output
        assert '"brokerName": "broker-a"' in r.output  # registered over TLS
        r = runner.invoke(app, ["admin", "clusterList", "-n", ns])
        assert r.exit_code != 0
        assert "accepts TLS connections only" in r.output
        assert server.stop() == 0

