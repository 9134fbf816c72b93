"""``rocketlite admin consumerStatus`` with third-party members: GET_CONSUMER_RUNNING_INFO (307)
goes from the admin through the broker to the client and back.

- The C++ 4.x client (``rocketmq==0.4.4``) answers it: its ConsumerRunningInfo (JSON written by
  jsoncpp by hand: MessageQueue objects as map keys, 64-bit numbers as strings) is read, and shows
  the queues it consumes and its consume type.
- ali-ons 3.12.0 answers no broker request at all (its request handler is not wired): the broker
  waits its 3 s and answers CONSUME_MSG_TIMEOUT, which the command reports on one line, exit 1,
  after listing the member with its client id.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from harness import FINISH_S, ClientProcess, Conformance
from typer.testing import CliRunner, Result

from rocketlite.cli.main import app

pytestmark = pytest.mark.conformance
runner = CliRunner()


def status(cx: Conformance, group: str) -> Result:
    return runner.invoke(app, ["admin", "consumerStatus", "-n", cx.broker.namesrv_addr,
                               "-g", group, "--json"])


def wait_status(cx: Conformance, group: str, ready: Any, proc: ClientProcess,
                timeout: float = 60) -> Result:
    """``consumerStatus --json`` of ``group`` once ``ready(result)`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        r = status(cx, group)
        if ready(r):
            return r
        assert time.monotonic() < deadline and proc.proc.poll() is None, (
            f"consumerStatus of {group}: {r.output}\n{proc.describe()}\n{cx.broker.describe()}")
        time.sleep(0.5)


def test_cpp_member_answers_its_running_info(cx: Conformance) -> None:
    topic, group = cx.name("ADM_CPP"), cx.name("GID_ADM_CPP")
    cx.create_topic(topic)
    c = cx.cpp("push", topic, group, "--expect", "0")
    try:
        c.wait_event("ready", 60)

        def has_queues(r: Result) -> bool:
            if r.exit_code != 0:
                return False
            (client,) = json.loads(r.stdout)["clients"]
            return sum(q["topic"] == topic for q in client["queues"]) == 4

        r = wait_status(cx, group, has_queues, c)
        st = json.loads(r.stdout)
        (client,) = st["clients"]
        assert client["error"] is None and client["language"] == "CPP", client
        assert sorted(q["queueId"] for q in client["queues"] if q["topic"] == topic) == [0, 1, 2, 3]
        assert client["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY", client
        assert topic in [s["topic"] for s in client["subscriptions"]]
        assert st["sameSubscription"] is True
    finally:
        c.stop(FINISH_S)


def test_ali_ons_member_does_not_answer(cx: Conformance) -> None:
    topic, group = cx.name("ADM_ONS"), cx.name("GID_ADM_ONS")
    cx.create_topic(topic)
    c = cx.ons("consume", topic, group, "--consume-from", "FIRST", "--expect", "0")
    try:
        c.wait_event("ready", 60)
        r = wait_status(cx, group, lambda r: "is not online" not in r.output, c)
        assert r.exit_code == 1, r.output
        (client,) = json.loads(r.stdout)["clients"]
        assert client["error"] is not None and "CONSUME_MSG_TIMEOUT" in client["error"], client
        line = r.stderr.strip()
        assert line.startswith(f"error: 1 of 1 member(s) of {group} did not answer: "
                               f"{client['clientId']}: "), line
        assert "\n" not in line and "Timeout" in line
    finally:
        c.stop(FINISH_S)
