"""``rocketlite start`` with ``aclEnable`` (broker and its NameServer over one plain_acl.yml) and
``rocketlite admin`` signing with ``--access-key/--secret-key`` or the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from brokerhelp import ServerProcess, free_port
from rocketlite.cli.main import app

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
    args = ["start", "--grpc-port", "0", "--metrics-port", "0", "--dashboard-port", "0",
            "--store", str(tmp_path / "store"), "-c", str(conf), "--namesrv-port", str(ns_port),
            "--broker-port", str(broker_port)]
    create = ["updateTopic", "-n", ns, "-b", addr, "-t", "CliAclTopic", "-r", "2", "-w", "2"]
    with ServerProcess(args, tmp_path / "start.log") as server:
        server.wait_ready()
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
