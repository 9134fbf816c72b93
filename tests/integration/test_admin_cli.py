"""``rocketlite admin resend-dlq`` against a real ``rocketlite start`` process: a consumer that
always fails sends its messages to ``%DLQ%{group}``; the command re-sends them to their topic,
where the group gets them again (fresh ids, reconsumeTimes 0, the user's properties kept)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from brokerhelp import ServerProcess, free_port, pull_queue
from dlqhelp import make_dead_letters
from rocketlite.cli.main import app
from rocketlite.formats.message_record import MessageRecord
from rocketlite.formats.properties import decode_properties
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration
runner = CliRunner()
TOPIC = "AdminT"
N = 4


async def pull_all(addr: str, topic: str, queues: int) -> list[MessageRecord]:
    client = RemotingClient()
    try:
        out: list[MessageRecord] = []
        for q in range(queues):
            out += await pull_queue(client, addr, topic, q)
        return out
    finally:
        await client.close()


def test_resend_dlq_command(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=1048576\nmessageDelayLevel=1s 1s 1s\n"
                    "defaultTopicQueueNums=2\n", encoding="utf-8")
    ns_port, broker_port = free_port(), free_port()
    ns, addr = f"127.0.0.1:{ns_port}", f"127.0.0.1:{broker_port}"
    args = ["start", "--grpc-port", "0", "--store", str(tmp_path / "store"), "-c", str(conf),
            "--namesrv-port", str(ns_port), "--broker-port", str(broker_port)]
    with ServerProcess(args, tmp_path / "start.log") as server:
        server.wait_ready()
        asyncio.run(make_dead_letters(ns, TOPIC, "G", [b"m%d" % i for i in range(N)],
                                      {"app": "x"}))
        dead = asyncio.run(pull_all(addr, "%DLQ%G", 1))
        assert len(dead) == N

        r = runner.invoke(app, ["admin", "resend-dlq", "--namesrv", ns, "--group", "G",
                                "--max", "3", "--idle", "2"])
        assert r.exit_code == 0, r.output
        assert "read 3, re-sent 3, skipped 0" in r.output and TOPIC in r.output
        r = runner.invoke(app, ["admin", "resend-dlq", "--namesrv", ns, "--group", "G",
                                "--idle", "1"])
        assert r.exit_code == 0, r.output
        assert "read 1, re-sent 1" in r.output  # only what the first run left

        got = asyncio.run(pull_all(addr, TOPIC, 2))
        assert server.stop() == 0, server.log()
    assert sorted(m.body for m in got) == sorted([b"m%d" % i for i in range(N)] * 2)
    for m in got:  # the originals and their re-sent copies look alike
        assert m.reconsume_times == 0
        p = decode_properties(m.properties_text)
        assert p["TAGS"] == "T" and p["app"] == "x"
        assert not {"RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "REAL_TOPIC", "DELAY"} & set(p)


def test_resend_dlq_refuses_a_zero_max() -> None:
    r = runner.invoke(app, ["admin", "resend-dlq", "--namesrv", "127.0.0.1:1", "--group", "G",
                            "--max", "0"])
    assert r.exit_code != 0
    assert "--max" in r.output
