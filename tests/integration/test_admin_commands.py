"""``rocketlite admin``'s mqadmin commands against a real ``rocketlite start`` process (NameServer
and broker on free loopback ports), run through typer's CliRunner: topics created with
``updateTopic`` (read back as each broker holds it with ``getTopicConfig``), messages sent with
``sendMessage``, then found again by id, key, UNIQ_KEY, offset and time range, each checked on
the ``--json`` output; and the expected failures (a topic that does not exist, a NameServer that
cannot be reached, a bad or unknown msgId, a bad timestamp) exit 1 with one ``error:`` line, with
the traceback only under ``--debug``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from brokerhelp import free_port, started
from rocketlite.admin import AdminError, AdminSession, format_timestamp, print_msg
from rocketlite.cli.main import app

pytestmark = pytest.mark.integration
runner = CliRunner()
TOPIC = "AdmT"
N = 6


@dataclass
class Env:
    ns: str
    addr: str
    sent: list[dict[str, Any]]  # sendMessage --json of each message, in send order


def admin(*args: str) -> Result:
    return runner.invoke(app, ["admin", *args])


def ok_json(*args: str) -> Any:
    r = admin(*args, "--json")
    assert r.exit_code == 0, (args, r.output)
    return json.loads(r.stdout)


def fails(*args: str) -> str:
    """The command exits 1 with exactly one line on stderr, ``error: ...``; that line."""
    r = admin(*args)
    assert r.exit_code == 1, (args, r.output)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (args, r.stderr)
    assert r.exception is None or isinstance(r.exception, SystemExit)
    return lines[0]


def wait_route(ns: str, topic: str, check: Any = lambda route: True, timeout: float = 30.0) -> Any:
    """``topicRoute --json`` once the NameServer routes ``topic`` as ``check`` wants."""
    deadline = time.monotonic() + timeout
    while True:
        r = admin("topicRoute", "-n", ns, "-t", topic, "--json")
        if r.exit_code == 0 and check(route := json.loads(r.stdout)):
            return route
        assert time.monotonic() < deadline, r.output
        time.sleep(0.2)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with started(tmp_path_factory.mktemp("admin"), mappedFileSizeCommitLog="1048576") as s:
        ns, addr, server = s.ns, s.addr, s.server
        made = ok_json("updateTopic", "-n", ns, "-b", addr, "-t", TOPIC, "-r", "3", "-w", "3")
        assert made == [{"brokerName": "", "address": addr, "topic": TOPIC, "readQueueNums": 3,
                         "writeQueueNums": 3, "perm": 6, "order": False}]
        wait_route(ns, TOPIC)
        sent = []
        for i in range(N):
            sent.append(ok_json("sendMessage", "-n", ns, "-t", TOPIC, "-p", f"hello {i}",
                                "-k", f"key{i} shared", "-c", "tagA" if i % 2 else "tagB"))
            time.sleep(0.01)  # distinct store times, for the time-range checks
        deadline = time.monotonic() + 30
        while len(ok_json("queryMsgByKey", "-n", ns, "-t", TOPIC, "-k", "shared")) < N \
                or len(ok_json("printMsg", "-n", ns, "-t", TOPIC)) < N:
            assert time.monotonic() < deadline  # the queues and index are written just after
            time.sleep(0.1)
        yield Env(ns, addr, sent)
        assert server.stop() == 0, server.log()


def test_cluster_list_and_broker_status(env: Env) -> None:
    (entry,) = ok_json("clusterList", "-n", env.ns)
    assert (entry["cluster"], entry["brokerName"], entry["brokerId"], entry["address"]) == \
        ("DefaultCluster", "broker-a", 0, env.addr)
    assert entry["role"] == "ASYNC_MASTER" and entry["error"] is None
    assert entry["version"].startswith("rocketlite ") and entry["msgPutToday"] >= N
    assert [e["address"] for e in ok_json("clusterList", "-n", env.ns, "-c", "DefaultCluster")] \
        == [env.addr]
    (status,) = ok_json("brokerStatus", "-b", env.addr)
    assert status["broker"] == env.addr
    assert int(status["table"]["commitLogMaxOffset"]) > 0
    assert status["table"]["brokerRole"] == "ASYNC_MASTER"
    (by_cluster,) = ok_json("brokerStatus", "-n", env.ns, "-c", "DefaultCluster")
    assert by_cluster["broker"] == env.addr
    text = admin("clusterList", "-n", env.ns)
    assert text.exit_code == 0 and "broker-a" in text.stdout and env.addr in text.stdout
    assert "does not exist" in fails("clusterList", "-n", env.ns, "-c", "NoSuchCluster")


def test_topics(env: Env) -> None:
    assert TOPIC in ok_json("topicList", "-n", env.ns)
    route = ok_json("topicRoute", "-n", env.ns, "-t", TOPIC)
    (qd,) = route["queueDatas"]
    assert (qd["brokerName"], qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == \
        ("broker-a", 3, 3, 6)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": env.addr}

    done = ok_json("updateTopic", "-n", env.ns, "-c", "DefaultCluster", "-t", "AdmT2",
                   "-r", "2", "-w", "2", "-p", "4", "-o", "true")
    assert [(d["brokerName"], d["address"], d["order"]) for d in done] == \
        [("broker-a", env.addr, True)]
    route = wait_route(env.ns, "AdmT2", lambda r: r["queueDatas"][0]["readQueueNums"] == 2)
    assert route["queueDatas"][0]["perm"] == 4
    assert "perm 5" in fails("updateTopic", "-b", env.addr, "-t", "AdmT3", "-p", "5")
    assert "invalid" in fails("updateTopic", "-b", env.addr, "-t", "bad topic!")


def test_get_topic_config(env: Env) -> None:
    """What each broker holds (GET_TOPIC_CONFIG), by -b, -c or the topic's route; a topic no
    broker has is one error line, exit 1."""
    expect = {"topicName": TOPIC, "readQueueNums": 3, "writeQueueNums": 3, "perm": 6,
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
              "attributes": {}}
    for where in (("-b", env.addr), ("-n", env.ns, "-c", "DefaultCluster"), ("-n", env.ns)):
        got = ok_json("getTopicConfig", "-t", TOPIC, *where)
        assert got == [{"address": env.addr, "config": expect}], where
    r = admin("getTopicConfig", "-b", env.addr, "-t", TOPIC)
    assert r.exit_code == 0, r.output
    row = next(line for line in r.stdout.splitlines() if env.addr in line)
    assert [c.strip() for c in row.split("│")[2:8]] == ["3", "3", "6", "false", "SINGLE_TAG",
                                                        "0"], row
    assert fails("getTopicConfig", "-b", env.addr, "-t", "Missing") == (
        f"error: topic 'Missing' does not exist on broker {env.addr} "
        "(TOPIC_NOT_EXIST: No topic in this broker. topic: Missing)")
    assert fails("getTopicConfig", "-n", env.ns, "-c", "DefaultCluster", "-t", "Missing") == \
        f"error: topic 'Missing' does not exist on {env.addr}"
    assert fails("getTopicConfig", "-n", env.ns, "-t", "Missing").startswith(
        "error: topic 'Missing' does not exist")


def test_query_by_id_key_unique_key_and_offset(env: Env) -> None:
    first = env.sent[0]
    assert first["status"] == "SEND_OK" and first["topic"] == TOPIC
    m = ok_json("queryMsgById", "-n", env.ns, "-i", first["offsetMsgId"], "--body", "text")
    assert (m["msgId"], m["offsetMsgId"], m["body"], m["tags"]) == \
        (first["msgId"], first["offsetMsgId"], "hello 0", "tagB")
    assert m["keys"] == ["key0", "shared"] and m["brokerName"] == "broker-a"
    assert (m["queueId"], m["queueOffset"]) == (first["queueId"], first["queueOffset"])
    # a UNIQ_KEY (the producer's id) is found through -t, as mqadmin's queryMsgById does
    by_uniq = ok_json("queryMsgById", "-n", env.ns, "-i", first["msgId"], "-t", TOPIC)
    assert by_uniq["offsetMsgId"] == first["offsetMsgId"] and by_uniq["body"] == "aGVsbG8gMA=="
    (u,) = ok_json("queryMsgByUniqueKey", "-n", env.ns, "-t", TOPIC, "-i", env.sent[3]["msgId"])
    assert u["offsetMsgId"] == env.sent[3]["offsetMsgId"]

    shared = ok_json("queryMsgByKey", "-n", env.ns, "-t", TOPIC, "-k", "shared", "--body", "text")
    assert [x["msgId"] for x in shared] == [s["msgId"] for s in env.sent]
    assert [x["body"] for x in shared] == [f"hello {i}" for i in range(N)]
    (one,) = ok_json("queryMsgByKey", "-n", env.ns, "-t", TOPIC, "-k", "key4")
    assert one["msgId"] == env.sent[4]["msgId"]
    stored = [x["storeTimestamp"] for x in shared]
    late = ok_json("queryMsgByKey", "-n", env.ns, "-t", TOPIC, "-k", "shared",
                   "-s", str(stored[3]))
    assert [x["msgId"] for x in late] == [x["msgId"] for x in shared if x["storeTimestamp"] >= stored[3]]
    assert late and late[0]["msgId"] in {s["msgId"] for s in env.sent[:4]}
    assert ok_json("queryMsgByKey", "-n", env.ns, "-t", TOPIC, "-k", "shared",
                   "-e", str(stored[0] - 60_000)) == []
    assert ok_json("queryMsgByKey", "-n", env.ns, "-t", TOPIC, "-k", "nokey") == []

    s5 = env.sent[5]
    at = ok_json("queryMsgByOffset", "-n", env.ns, "-t", TOPIC, "-b", "broker-a",
                 "-i", str(s5["queueId"]), "-o", str(s5["queueOffset"]), "--body", "hex")
    assert at["msgId"] == s5["msgId"] and at["body"] == b"hello 5".hex()
    text = admin("queryMsgById", "-n", env.ns, "-i", first["offsetMsgId"])
    assert text.exit_code == 0 and "Message Body:       hello 0" in text.stdout


def test_print_and_consume(env: Env) -> None:
    everything = ok_json("printMsg", "-n", env.ns, "-t", TOPIC, "--body", "text")
    assert sorted(x["msgId"] for x in everything) == sorted(s["msgId"] for s in env.sent)
    assert sorted(x["body"] for x in everything) == [f"hello {i}" for i in range(N)]
    q = env.sent[0]["queueId"]
    in_q = ok_json("printMsg", "-n", env.ns, "-t", TOPIC, "-b", "broker-a", "-i", str(q))
    assert [x["msgId"] for x in in_q] == [s["msgId"] for s in env.sent if s["queueId"] == q]
    assert len(ok_json("printMsg", "-n", env.ns, "-t", TOPIC, "--max", "2")) == 2

    by_time = sorted(everything, key=lambda x: x["storeTimestamp"])
    t3, t4 = by_time[3]["storeTimestamp"], by_time[4]["storeTimestamp"]
    # -s in mqadmin's date format (local time, to the millisecond), -e in ms
    window = ok_json("printMsg", "-n", env.ns, "-t", TOPIC, "-s", format_timestamp(t3),
                     "-e", str(t4))
    assert {x["msgId"] for x in window} == \
        {x["msgId"] for x in everything if t3 <= x["storeTimestamp"] <= t4}
    assert window

    s = next(x for x in env.sent if x["queueOffset"] == 1)
    got = ok_json("consumeMessage", "-n", env.ns, "-t", TOPIC, "-b", "broker-a",
                  "-i", str(s["queueId"]), "-o", "1", "--body", "text")
    assert got[0]["msgId"] == s["msgId"] and all(x["queueOffset"] >= 1 for x in got)
    assert len(ok_json("consumeMessage", "-n", env.ns, "-t", TOPIC, "-c", "4")) == 4
    # nothing was committed: everything is still there for the next read
    assert len(ok_json("consumeMessage", "-n", env.ns, "-t", TOPIC, "-g", "G1")) == N


def test_print_msg_reports_progress_over_the_whole_range(env: Env) -> None:
    """What printMsg's progress bar is fed: the offsets to read first, then steps adding up to
    them, also when --max stops the read early (the rest is counted as skipped)."""

    async def go(limit: int | None) -> tuple[list[int], list[int], int]:
        totals: list[int] = []
        steps: list[int] = []
        async with AdminSession(env.ns) as s:
            msgs = await print_msg(s, TOPIC, limit=limit, on_total=totals.append,
                                   on_progress=steps.append)
        return totals, steps, len(msgs)

    totals, steps, n = asyncio.run(go(None))
    assert totals == [N] and sum(steps) == N and n == N and all(x > 0 for x in steps)
    totals, steps, n = asyncio.run(go(2))
    assert totals == [N] and sum(steps) == N and n == 2


def test_expected_failures_are_one_line(env: Env) -> None:
    missing = "error: topic 'Missing' does not exist"
    assert fails("topicRoute", "-n", env.ns, "-t", "Missing").startswith(missing)
    assert fails("queryMsgByKey", "-n", env.ns, "-t", "Missing", "-k", "k").startswith(missing)
    assert fails("printMsg", "-n", env.ns, "-t", "Missing").startswith(missing)
    assert fails("queryMsgByUniqueKey", "-n", env.ns, "-t", TOPIC, "-i", "00" * 16) == \
        f"error: no message with UNIQ_KEY '{'00' * 16}' in topic '{TOPIC}'"
    assert "has no dead letters" in fails("resend-dlq", "-n", env.ns, "-g", "NoDeadLetters")

    dead = f"127.0.0.1:{free_port()}"
    for args in (("clusterList",), ("topicList",), ("topicRoute", "-t", TOPIC),
                 ("printMsg", "-t", TOPIC), ("sendMessage", "-t", TOPIC, "-p", "x"),
                 ("resend-dlq", "-g", "G")):
        line = fails(*args, "-n", dead)
        assert line.startswith(f"error: cannot reach NameServer {dead}"), line
    # the next NameServer of the list answers when the first cannot be reached
    assert TOPIC in ok_json("topicList", "-n", f"{dead};{env.ns}")
    assert fails("brokerStatus", "-b", dead).startswith(f"error: cannot reach broker {dead}")

    assert fails("queryMsgById", "-n", env.ns, "-i", "ZZZ") == \
        "error: 'ZZZ' is not a message id: message id 'ZZZ' is not hex"
    assert "16 or 28" in fails("queryMsgById", "-n", env.ns, "-i", "ABCD")
    beyond = env.sent[0]["offsetMsgId"][:16] + f"{1 << 40:016X}"
    assert fails("queryMsgById", "-n", env.ns, "-i", beyond).startswith(f"error: no message {beyond}")
    assert "no message at offset 99" in fails("queryMsgByOffset", "-n", env.ns, "-t", TOPIC,
                                               "-b", "broker-a", "-i", "0", "-o", "99")
    assert "no queue 7" in fails("printMsg", "-n", env.ns, "-t", TOPIC, "-i", "7")
    assert "yyyy-MM-dd#HH:mm:ss:SSS" in fails("printMsg", "-n", env.ns, "-t", TOPIC,
                                             "-s", "yesterday")

    r = admin("topicRoute", "-n", env.ns, "-t", "Missing", "--debug")
    assert r.exit_code == 1 and isinstance(r.exception, AdminError)
    assert "does not exist" in str(r.exception)
