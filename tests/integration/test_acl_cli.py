"""``rocketlite start`` with ``aclEnable`` (broker and its NameServer over one plain_acl.yml),
``rocketlite admin`` signing with ``--access-key/--secret-key`` or the environment, and the
dashboard beside the broker signing with the environment's keys."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from brokerhelp import ServerProcess, free_port
from rocketlite.acl.sign import Credentials
from rocketlite.cli.main import app
from rocketlite.dashboard.app import DashboardServer

pytestmark = pytest.mark.integration
runner = CliRunner()

ACL = """
accounts:
  - accessKey: cli-admin
    secretKey: cli-admin-secret
    admin: true
  - accessKey: cli-user
    secretKey: cli-user-secret
    defaultTopicPerm: PUB|SUB
"""


def test_admin_commands_sign_and_only_an_admin_writes(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain_acl.yml").write_text(ACL)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeCommitLog=1048576\naclEnable=true\n"
                    f"aclFile={tmp_path / 'plain_acl.yml'}\n")
    ns_port, broker_port = free_port(), free_port()
    ns, addr = f"127.0.0.1:{ns_port}", f"127.0.0.1:{broker_port}"
    dash_port = free_port()
    args = ["start", "--grpc-port", "0", "--metrics-port", "0", "--dashboard-port", str(dash_port),
            "--store", str(tmp_path / "store"), "-c", str(conf), "--namesrv-port", str(ns_port),
            "--broker-port", str(broker_port)]
    create = ["updateTopic", "-n", ns, "-b", addr, "-t", "CliAclTopic", "-r", "2", "-w", "2"]
    # the dashboard the broker serves signs with these
    monkeypatch.setenv("ROCKETLITE_ACCESS_KEY", "cli-user")
    monkeypatch.setenv("ROCKETLITE_SECRET_KEY", "cli-user-secret")
    with ServerProcess(args, tmp_path / "start.log") as server:
        server.wait_ready()
        monkeypatch.delenv("ROCKETLITE_ACCESS_KEY")
        monkeypatch.delenv("ROCKETLITE_SECRET_KEY")
        unsigned = runner.invoke(app, ["admin", *create])
        assert unsigned.exit_code == 1, unsigned.output
        assert "NO_PERMISSION" in unsigned.output and "No accessKey is configured" in unsigned.output
        user = runner.invoke(app, ["admin", "--access-key", "cli-user", "--secret-key",
                                   "cli-user-secret", *create])
        assert user.exit_code == 1 and "needs an admin account" in user.output, user.output
        half = runner.invoke(app, ["admin", "--access-key", "cli-admin", *create])
        assert half.exit_code == 2 and "--secret-key" in half.output, half.output

        monkeypatch.setenv("ROCKETLITE_ACCESS_KEY", "cli-admin")
        monkeypatch.setenv("ROCKETLITE_SECRET_KEY", "cli-admin-secret")
        admin = runner.invoke(app, ["admin", *create])
        assert admin.exit_code == 0 and "create topic to" in admin.output, admin.output
        status, page = get(f"http://127.0.0.1:{dash_port}/api/topics/CliAclTopic")
        assert status == 200 and len(page["queues"]) == 2, page  # signed as cli-user
        unsigned_status, unsigned_page = asyncio.run(dashboard_page(ns, "CliAclTopic"))
        assert unsigned_status == 400 and "NO_PERMISSION" in unsigned_page["error"], unsigned_page
        signed_status, _ = asyncio.run(dashboard_page(ns, "CliAclTopic", USER))
        assert signed_status == 200
        # deleteTopic also writes to the NameServer (DELETE_TOPIC_IN_NAMESRV): admin only there too
        monkeypatch.setenv("ROCKETLITE_ACCESS_KEY", "cli-user")
        monkeypatch.setenv("ROCKETLITE_SECRET_KEY", "cli-user-secret")
        denied = runner.invoke(app, ["admin", "deleteTopic", "-n", ns, "-c", "DefaultCluster",
                                     "-t", "CliAclTopic"])
        assert denied.exit_code == 1 and "NO_PERMISSION" in denied.output, denied.output
        monkeypatch.setenv("ROCKETLITE_ACCESS_KEY", "cli-admin")
        monkeypatch.setenv("ROCKETLITE_SECRET_KEY", "cli-admin-secret")
        deleted = runner.invoke(app, ["admin", "deleteTopic", "-n", ns, "-c", "DefaultCluster",
                                      "-t", "CliAclTopic"])
        assert deleted.exit_code == 0, deleted.output
        assert server.stop() == 0, server.log()
    assert "ACL: refused request 17" in server.log()


USER = Credentials("cli-user", "cli-user-secret")


def get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


async def dashboard_page(ns: str, topic: str, acl: Credentials | None = None
                             ) -> tuple[int, dict[str, object]]:
    """A topic's page from a dashboard of our own (``rocketlite dashboard``'s server), signing
    with ``acl`` if given."""
    port = free_port()
    server = DashboardServer(ns, "127.0.0.1", port, acl=acl)
    await server.start()
    try:
        return await asyncio.to_thread(get, f"http://127.0.0.1:{port}/api/topics/{topic}")
    finally:
        await server.close()
