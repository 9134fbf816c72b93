"""``rocketlite admin``'s group, offset, broker-config and statistics commands against a real
``rocketlite start`` process with traffic: a rocketlite producer and a live rocketlite PushConsumer
(the sync wrappers, so that typer's CliRunner runs in this thread). Checked on the ``--json``
output against what was sent and consumed:

- topicStatus and producerConnection while the producer is up;
- consumerProgress (one group, every group), consumerConnection of the live consumer;
- consumerStatus: the live consumer's running info relayed by the broker (GET_CONSUMER_RUNNING_INFO),
  its thread dump with -s; once it is gone, the broker's refusal as one error line;
- resetOffsetByTime while the consumer runs: it re-receives exactly the messages stored from the
  time on (the broker's RESET_CONSUMER_CLIENT_OFFSET reaches the client, which resumes there),
  by milliseconds and by mqadmin's date form;
- skipAccumulatedMessage: what accumulated while the group was down is never delivered;
- updateSubGroup (only the given settings change), deleteSubGroup (-r: the offsets too; a group
  or topic that does not exist is an error, not a "success");
- getBrokerConfig / updateBrokerConfig (a live key applies, a fixed one is refused with the
  broker's reason, exit 1); deleteTopic (brokers, then NameServers); cleanExpiredCQ; statsAll.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from test_admin_commands import admin, fails, ok_json, wait_route

from brokerhelp import started, wait_until
from rocketlite.admin import format_timestamp
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.push_consumer import ConsumeStatus
from rocketlite.client.sync import SyncProducer, SyncPushConsumer
from rocketlite.protocol.bodies import ConsumeFromWhere

pytestmark = pytest.mark.integration
CLUSTER = "DefaultCluster"
QUEUES = 4


@dataclass
class Env:
    ns: str
    addr: str


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with started(tmp_path_factory.mktemp("admin_groups"), mappedFileSizeCommitLog="1048576") as s:
        yield Env(s.ns, s.addr)
        assert s.server.stop() == 0, s.server.log()


def make_topic(env: Env, topic: str) -> None:
    ok_json("updateTopic", "-n", env.ns, "-b", env.addr, "-t", topic, "-r", str(QUEUES),
            "-w", str(QUEUES))
    wait_route(env.ns, topic)


class Received:
    """What a listener got: a count per body (a redelivery counts twice)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[bytes] = collections.Counter()
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.counts.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    def has(self, bodies: list[bytes], times: int = 1) -> bool:
        with self.lock:
            return all(self.counts[b] >= times for b in bodies)

    def count(self, body: bytes) -> int:
        with self.lock:
            return self.counts[body]


def consumer(env: Env, group: str, topic: str, got: Received) -> SyncPushConsumer:
    c = SyncPushConsumer(group, config=ClientConfig(
        namesrv_addr=env.ns, rebalance_interval=1.0, heartbeat_interval=1.0,
        persist_offset_interval=0.3), consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "*")
    c.register_listener(got)
    c.start()
    return c


def send(producer: SyncProducer, topic: str, tag: str, n: int) -> list[bytes]:
    bodies = [f"{tag}-{i}".encode() for i in range(n)]
    for b in bodies:
        producer.send(Message(topic, b))
    return bodies


def status(env: Env, topic: str) -> list[dict[str, Any]]:
    return ok_json("topicStatus", "-n", env.ns, "-t", topic)  # type: ignore[no-any-return]


def stored_total(env: Env, topic: str) -> int:
    return sum(q["maxOffset"] for q in status(env, topic))


def progress(env: Env, group: str) -> dict[str, Any]:
    (p,) = ok_json("consumerProgress", "-n", env.ns, "-g", group)
    return p  # type: ignore[no-any-return]


def caught_up(env: Env, group: str, topic: str) -> bool:
    """The group committed every queue of ``topic`` up to its end."""
    mine = [q for q in progress(env, group)["queues"] if q["topic"] == topic]
    return len(mine) == QUEUES and all(q["diff"] == 0 for q in mine)


def test_live_group_progress_connections_and_offset_resets(env: Env) -> None:
    topic, group, n = "OpsT", "OpsG", 12
    make_topic(env, topic)
    got = Received()
    with SyncProducer("OpsPG", namesrv_addr=env.ns) as producer:
        first = send(producer, topic, "a", n)
        wait_until(lambda: stored_total(env, topic) == n, what="batch a stored")
        queues = status(env, topic)
        assert [(q["brokerName"], q["queueId"]) for q in queues] == \
            [("broker-a", i) for i in range(QUEUES)]
        assert all(q["minOffset"] == 0 and q["lastUpdateTimestamp"] > 0 for q in queues
                   if q["maxOffset"])
        (conn,) = ok_json("producerConnection", "-n", env.ns, "-g", "OpsPG", "-t", topic)
        assert conn["clientId"] == producer.producer.instance.client_id  # type: ignore[union-attr]
        assert conn["language"] == "PYTHON"
        assert (conn["version"], conn["versionDesc"]) == (479, "V5_3_3")  # MQVersion by name

        c = consumer(env, group, topic, got)
        try:
            wait_until(lambda: got.has(first), what="batch a consumed")
            wait_until(lambda: caught_up(env, group, topic), what="offsets committed")
            p = progress(env, group)
            assert p["online"] == 1 and p["messageModel"] == "CLUSTERING"
            mine = [q for q in p["queues"] if q["topic"] == topic]
            assert [(q["queueId"], q["brokerOffset"]) for q in mine] == \
                [(q["queueId"], q["maxOffset"]) for q in status(env, topic)]
            assert all(q["consumerOffset"] == q["brokerOffset"] and q["diff"] == 0 for q in mine)
            assert all(q["lastTimestamp"] > 0 for q in mine if q["brokerOffset"])
            listed = {g["group"]: g for g in ok_json("consumerProgress", "-n", env.ns)}
            assert listed[group]["online"] == 1 and listed[group]["diffTotal"] == 0

            for args, shown in ((("consumerProgress", "-g", group), "Diff Total: 0"),
                                (("consumerProgress",), group),
                                (("consumerConnection", "-g", group), "CONSUME_FROM_FIRST_OFFSET"),
                                (("producerConnection", "-g", "OpsPG", "-t", topic),
                                 "PYTHON   V5_3_3"),
                                (("topicStatus", "-t", topic), "#Max Offset")):
                text = admin(*args, "-n", env.ns)
                assert text.exit_code == 0 and shown in text.stdout, (args, text.output)
            cc = ok_json("consumerConnection", "-n", env.ns, "-g", group)
            (member,) = cc["connectionSet"]
            assert member["clientId"] == c.consumer.instance.client_id  # type: ignore[union-attr]
            assert set(cc["subscriptionTable"]) == {topic, f"%RETRY%{group}"}
            assert cc["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"

            # batch b, stored after ``split``; the consumer gets it, then is reset to ``split``
            split = max(q["lastUpdateTimestamp"] for q in status(env, topic)) + 1
            time.sleep(max(0.0, split / 1000 - time.time()) + 0.02)
            second = send(producer, topic, "b", n)
            wait_until(lambda: got.has(second), what="batch b consumed")
            reset = ok_json("resetOffsetByTime", "-n", env.ns, "-g", group, "-t", topic,
                            "-s", str(split))
            assert [(r["brokerName"], r["queueId"]) for r in reset] == \
                [("broker-a", i) for i in range(QUEUES)]
            assert sum(r["offset"] for r in reset) == n  # each queue: just after its a messages
            wait_until(lambda: got.has(second, times=2), what="batch b re-received")
            assert all(got.count(b) == 1 for b in first)

            # back to before everything, in mqadmin's date form: all of it again
            start = format_timestamp(split - 60_000)
            r = admin("resetOffsetByTime", "-n", env.ns, "-g", group, "-t", topic, "-s", start)
            assert r.exit_code == 0, r.output
            assert "#queueId" in r.stdout
            wait_until(lambda: got.has(first, times=2) and got.has(second, times=3),
                       what="everything re-received")
            wait_until(lambda: caught_up(env, group, topic), what="offsets committed")
        finally:
            c.shutdown()

        # accumulated while the group is down, then skipped: never delivered
        third = send(producer, topic, "c", n)
        wait_until(lambda: progress(env, group)["diffTotal"] == n, what="batch c accumulated")
        assert progress(env, group)["online"] == 0
        r = admin("consumerProgress", "-n", env.ns, "-g", group)
        assert r.exit_code == 0 and f"Diff Total: {n}" in r.stdout and "0 online" in r.stdout
        skipped = ok_json("skipAccumulatedMessage", "-n", env.ns, "-g", group, "-t", topic)
        assert [r["offset"] for r in skipped] == [q["maxOffset"] for q in status(env, topic)]
        assert progress(env, group)["diffTotal"] == 0
        c = consumer(env, group, topic, got)
        try:
            fourth = send(producer, topic, "d", n)
            wait_until(lambda: got.has(fourth), what="batch d consumed")
            assert all(got.count(b) == 0 for b in third)
        finally:
            c.shutdown()

    stats = {t["topic"]: t for t in ok_json("statsAll", "-n", env.ns)}
    s = stats[topic]
    assert (s["queues"], s["putTotal"], s["messages"]) == (QUEUES, 4 * n, 4 * n)
    (g,) = [g for g in s["groups"] if g["group"] == group]
    assert (g["accumulation"], g["online"]) == (0, 0)
    assert [t["topic"] for t in ok_json("statsAll", "-n", env.ns, "-t", topic)] == [topic]
    assert not any(t.startswith(("%RETRY%", "TBW102")) for t in stats)
    text = admin("statsAll", "-n", env.ns, "-a")
    assert text.exit_code == 0 and topic in text.stdout and group in text.stdout

    # -r true: the group's offsets go too
    assert ok_json("deleteSubGroup", "-n", env.ns, "-b", env.addr, "-g", group,
                   "-r", "true") == [env.addr]
    assert "no committed offsets" in fails("consumerProgress", "-n", env.ns, "-g", group)


def test_update_and_delete_a_subscription_group(env: Env) -> None:
    (u,) = ok_json("updateSubGroup", "-n", env.ns, "-b", env.addr, "-g", "SubG", "-r", "5",
                   "-d", "false", "-o", "true")
    assert u["address"] == env.addr
    cfg = u["config"]
    assert (cfg["groupName"], cfg["retryMaxTimes"], cfg["consumeBroadcastEnable"],
            cfg["consumeMessageOrderly"], cfg["retryQueueNums"]) == ("SubG", 5, False, True, 1)
    # only -q changes: the rest is what the broker holds
    (u,) = ok_json("updateSubGroup", "-n", env.ns, "-c", CLUSTER, "-g", "SubG", "-q", "2")
    assert (u["config"]["retryMaxTimes"], u["config"]["retryQueueNums"],
            u["config"]["consumeBroadcastEnable"]) == (5, 2, False)
    assert ok_json("deleteSubGroup", "-n", env.ns, "-c", CLUSTER, "-g", "SubG") == [env.addr]
    (u,) = ok_json("updateSubGroup", "-n", env.ns, "-b", env.addr, "-g", "SubG")
    assert u["config"]["retryMaxTimes"] == 16  # deleted: Java's defaults again
    for args in (("updateSubGroup", "-b", env.addr, "-g", "TextG"),
                 ("deleteSubGroup", "-b", env.addr, "-g", "TextG", "-r", "true")):
        text = admin(*args, "-n", env.ns)
        assert text.exit_code == 0 and "success" in text.stdout, text.output
    assert "is invalid" in fails("updateSubGroup", "-n", env.ns, "-b", env.addr, "-g", "bad g")
    r = admin("updateSubGroup", "-n", env.ns, "-b", env.addr, "-g", "SubG", "-d", "maybe")
    assert r.exit_code == 2 and "true or false" in r.output


def _own_offsets(st: dict[str, Any], topic: str) -> int:
    (client,) = st["clients"]
    return sum(q["info"]["commitOffset"] for q in client["queues"] if q["topic"] == topic)


def test_consumer_status(env: Env) -> None:
    """consumerStatus: the live member's own account (its queues, offsets to commit, rates, a
    thread dump with -s), --json and tables; once it is gone, one error line and exit 1."""
    topic, group, n = "StatT", "StatG", 6
    make_topic(env, topic)
    got = Received()
    with SyncProducer("StatPG", namesrv_addr=env.ns) as producer:
        bodies = send(producer, topic, "s", n)
    c = consumer(env, group, topic, got)
    try:
        cid = c.consumer.instance.client_id  # type: ignore[union-attr]
        wait_until(lambda: got.has(bodies), what="consumed")
        wait_until(lambda: _own_offsets(ok_json("consumerStatus", "-n", env.ns, "-g", group),
                                        topic) == n, what="offsets advanced")
        st = ok_json("consumerStatus", "-n", env.ns, "-g", group)
        (client,) = st["clients"]
        assert (st["group"], st["sameSubscription"], st["warnings"]) == (group, True, [])
        assert (client["clientId"], client["language"], client["error"]) == (cid, "PYTHON", None)
        assert client["broker"] == env.addr and client["jstack"] is None
        assert sorted((q["topic"], q["queueId"]) for q in client["queues"]) == \
            sorted([(topic, i) for i in range(QUEUES)] + [(f"%RETRY%{group}", 0)])
        assert client["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert client["status"][topic]["consumeOKTPS"] > 0
        assert [s["topic"] for s in client["subscriptions"]] == [f"%RETRY%{group}", topic]
        one = ok_json("consumerStatus", "-n", env.ns, "-g", group, "-i", cid, "-s")
        (detail,) = one["clients"]
        assert detail["clientId"] == cid and "MainThread" in detail["jstack"]
        assert (detail["language"], detail["clientAddr"]) == ("PYTHON", client["clientAddr"])
        assert _own_offsets(one, topic) == n
        text = admin("consumerStatus", "-n", env.ns, "-g", group)
        assert text.exit_code == 0 and cid in text.stdout, text.output
        assert "Same subscription in the same group of consumer" in text.stdout
        text = admin("consumerStatus", "-n", env.ns, "-g", group, "-i", cid)
        assert text.exit_code == 0, text.output
        assert "#Consumer Properties#" in text.stdout and "#Consumer RT&TPS#" in text.stdout
        assert "PROP_CONSUMEORDERLY" in text.stdout and topic in text.stdout
    finally:
        c.shutdown()
    gone = fails("consumerStatus", "-n", env.ns, "-g", group, "-i", cid)
    assert gone == (f"error: broker {env.addr} refused GET_CONSUMER_RUNNING_INFO: SYSTEM_ERROR (1) "
                    f"The Consumer <{group}> <{cid}> not online")
    assert "is not online" in fails("consumerStatus", "-n", env.ns, "-g", group)


def test_broker_config_get_and_update(env: Env) -> None:
    (before,) = ok_json("getBrokerConfig", "-b", env.addr)
    assert before["address"] == env.addr and before["config"]["brokerName"] == "broker-a"
    assert before["config"]["mappedFileSizeCommitLog"] == "1048576"
    done = ok_json("updateBrokerConfig", "-n", env.ns, "-c", CLUSTER,
                   "-k", "maxTransferCountOnMessageInMemory", "-v", "7")
    assert done == [{"address": env.addr, "key": "maxTransferCountOnMessageInMemory",
                     "value": "7"}]
    (after,) = ok_json("getBrokerConfig", "-n", env.ns, "-c", CLUSTER)
    assert after["config"]["maxTransferCountOnMessageInMemory"] == "7"
    assert after["version"] == before["version"] + 1
    line = fails("updateBrokerConfig", "-b", env.addr, "-k", "brokerName", "-v", "other")
    assert line.startswith(f"error: broker {env.addr} refused UPDATE_BROKER_CONFIG: NO_PERMISSION")
    assert "brokerName: cannot change while the broker runs" in line
    # RocketMQ 5's name of metricsPort is taken for it (and refused as it: not live)
    assert "metricsPort: cannot change while the broker runs" in fails(
        "updateBrokerConfig", "-b", env.addr, "-k", "metricsPromExporterPort", "-v", "1")
    assert "noSuchKey: not a configuration key" in fails(
        "updateBrokerConfig", "-b", env.addr, "-k", "noSuchKey", "-v", "1")
    (again,) = ok_json("getBrokerConfig", "-b", env.addr)
    assert again["config"]["brokerName"] == "broker-a" and again["version"] == after["version"]
    r = admin("getBrokerConfig", "-b", env.addr)
    assert r.exit_code == 0 and "maxTransferCountOnMessageInMemory" in r.stdout


def test_delete_topic_and_clean_expired_queues(env: Env) -> None:
    make_topic(env, "DelT")
    done = ok_json("deleteTopic", "-n", env.ns, "-t", "DelT", "-c", CLUSTER)
    assert done == {"topic": "DelT", "brokers": [env.addr], "namesrvs": [env.ns]}
    assert "does not exist" in fails("topicRoute", "-n", env.ns, "-t", "DelT")
    assert "DelT" not in ok_json("topicList", "-n", env.ns)
    assert "does not exist" in fails("deleteTopic", "-n", env.ns, "-t", "DelT", "-c", "NoCluster")
    assert ok_json("cleanExpiredCQ", "-b", env.addr) == [env.addr]
    assert ok_json("cleanExpiredCQ", "-n", env.ns) == [env.addr]
    make_topic(env, "DelT2")
    for args in (("deleteTopic", "-t", "DelT2", "-c", CLUSTER), ("cleanExpiredCQ",),
                 ("updateBrokerConfig", "-c", CLUSTER, "-k", "longPollingEnable", "-v", "true")):
        text = admin(*args, "-n", env.ns)
        assert text.exit_code == 0 and "success" in text.stdout, text.output


def test_expected_failures_are_one_line(env: Env) -> None:
    make_topic(env, "FailT")
    assert "not online" in fails("consumerConnection", "-n", env.ns, "-g", "NobodyG")
    assert "has no connection" in fails("producerConnection", "-n", env.ns, "-g", "NoPG",
                                        "-t", "FailT")
    assert "does not exist" in fails("resetOffsetByTime", "-n", env.ns, "-g", "G", "-t",
                                     "Missing", "-s", "now")
    assert "Group NobodyG does not exist" in fails(
        "resetOffsetByTime", "-n", env.ns, "-g", "NobodyG", "-t", "FailT", "-s", "now")
    assert "yyyy-MM-dd#HH:mm:ss:SSS" in fails("resetOffsetByTime", "-n", env.ns, "-g", "G",
                                             "-t", "FailT", "-s", "yesterday")
    assert "does not exist" in fails("topicStatus", "-n", env.ns, "-t", "Missing")
    assert "no committed offsets" in fails("consumerProgress", "-n", env.ns, "-g", "NobodyG")
    # a typo in a delete must not read as "success"
    assert "topic 'Missing' does not exist" in fails("deleteTopic", "-n", env.ns, "-t", "Missing",
                                                     "-c", CLUSTER)
    assert "group 'NobodyG' does not exist" in fails("deleteSubGroup", "-n", env.ns, "-c", CLUSTER,
                                                     "-g", "NobodyG")
