"""``rocketlite admin`` (the real CLI, a subprocess) against a broker fed by ali-ons 3.12.0 and the
C++ 4.x client: what the commands show is what those clients did.

Each client has its own topic and groups: an ali-ons producer and push consumer, a C++ producer
(``send_orderly``, which sets the user properties ``shard`` and ``seq``) and push consumer. The
producers stay connected after their sends (``--hold``) so the broker lists them; the consumers run
until every message arrived and their commits reached the broker (polled). Then:

* ``producerConnection`` / ``consumerConnection``: each client with the id its heartbeats carry
  (ali-ons ``<ip>@<pid>``, as the client reports it; the C++ client ``<pid>-<ip>@DEFAULT``, as it
  logs it when it starts), the language its request headers claim (ali-ons says ``JAVA``, the C++
  client ``CPP``) and its version ordinal (ali-ons V3_4_9 = 121, the C++ 0.4.4 wheel V3_1_8 = 63),
  shown by name in the tables as mqadmin shows it; the consumers' subscriptions (the topic and
  their retry topic, ``*``), consume type, model and start rule.
* ``consumerProgress``: per queue, broker offset = consumer offset = the messages the consumer
  received from that queue (its highest queue offset + 1), diff 0.
* ``topicStatus``: per queue, min offset 0, the same max offset, the last store time.
* ``queryMsgByKey`` / ``queryMsgById``: a message found by the key its producer set and by the id
  its send returned, with the tag, keys, user properties, queue place and body the client sent.
* ``statsAll``: per topic, the messages stored, and the client's group with lag 0, one member
  (the tps figures are the last minute's: they depend on timing, only their bound is checked).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from harness import FINISH_S, ClientProcess, Conformance, Event, received_of, sent_of

pytestmark = pytest.mark.conformance

N = 12
QUEUES = 4
PICK = 5  # the message looked up by key and id
ADMIN_TIMEOUT_S = 60  # one CLI run (a few seconds each on a loaded machine)
POLL_S = 45  # a producer is listed after its first heartbeat; the consumers commit every 5 s
# The clients outlive the admin phase (~20 CLI runs): their own deadline (the harness's 90 s by
# default; the last --deadline-ms given wins) stays under pytest's 300 s for the test.
CLIENT_DEADLINE = ("--deadline-ms", "240000")
SAMPLE_S = 5  # the broker samples its rates every flushConsumerOffsetInterval (5000 ms)
ONS_VERSION, CPP_VERSION = (121, "V3_4_9"), (63, "V3_1_8")


def admin(cx: Conformance, command: str, *args: str, as_json: bool = True) -> Any:
    """``rocketlite admin <command> -n <namesrv> ... [--json]``: its JSON, or its stdout text;
    fails with the output when it exits non-zero."""
    argv = [sys.executable, "-m", "rocketlite", "admin", command, "-n", cx.broker.namesrv_addr,
            *args, *(["--json"] if as_json else [])]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=ADMIN_TIMEOUT_S,
                       stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert r.returncode == 0, f"admin {command} {' '.join(args)} exited {r.returncode}:\n" \
        f"{r.stdout}{r.stderr}"
    return json.loads(r.stdout) if as_json else r.stdout


def admin_may_fail(cx: Conformance, command: str, *args: str) -> Any:
    """``admin`` for a poll: None while the command exits 1 (e.g. no connection yet)."""
    try:
        return admin(cx, command, *args)
    except AssertionError:
        return None


def poll(what: str, probe: Callable[[], Any], timeout: float = POLL_S) -> Any:
    """``probe()`` until it returns something truthy; fail after ``timeout`` with its last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(1)
    raise AssertionError(f"no {what} within {timeout} s; last seen: {json.dumps(last)[:2000]}")


def per_queue(received: list[Event]) -> dict[int, int]:
    """Queue id -> messages the consumer received from it, each offset from 0 once, so also the
    queue's max offset."""
    counts = Counter(e["queueId"] for e in received)
    top = {q: 1 + max(e["queueOffset"] for e in received if e["queueId"] == q) for q in counts}
    assert dict(counts) == top, f"the consumer received gaps or duplicates: {counts} vs {top}"
    return {q: top.get(q, 0) for q in range(QUEUES)}


def wait_keys(p: ClientProcess, n: int) -> list[Event]:
    p.wait_for(lambda ev: len({e["key"] for e in ev if e["event"] == "received"}) >= n,
               FINISH_S, f"{n} distinct keys")
    return received_of(p.events)


def cpp_client_id(cx: Conformance, group: str) -> str:
    """The id the C++ client logs when its client of ``group`` starts (the one it heartbeats)."""
    line = re.compile(rf"MQClient start,groupname:{re.escape(group)},clientID:([^,]+),")

    def logged() -> str | None:
        for log in sorted((cx.home / "logs" / "rocketmq-cpp").glob("*")):
            if m := line.search(log.read_text(errors="replace")):
                return m.group(1)
        return None

    found: str = poll(f"start line of the C++ client of {group} in {cx.home}/logs", logged, 10)
    return found


def connection(conns: list[dict[str, Any]], client_id: str, version: tuple[int, str],
               language: str) -> None:
    """``conns`` is the one connection of ``client_id`` with this language and version."""
    assert [(c["clientId"], c["language"], c["version"], c["versionDesc"]) for c in conns] == \
        [(client_id, language, *version)], conns
    assert conns[0]["clientAddr"].startswith("127.0.0.1:"), conns


def caught_up(cx: Conformance, group: str, topic: str, want: dict[int, int]) -> Any:
    """consumerProgress of ``group`` once its offsets on ``topic`` are ``want``, else None."""
    found = admin_may_fail(cx, "consumerProgress", "-g", group)
    if not found:
        return None
    queues = {q["queueId"]: q for q in found[0]["queues"] if q["topic"] == topic}
    done = {qid: q["consumerOffset"] for qid, q in queues.items()} == want
    return found[0] if done else None


def check_progress(p: dict[str, Any], group: str, topic: str, want: dict[int, int],
                   status: list[dict[str, Any]]) -> None:
    assert (p["group"], p["online"], p["consumeType"], p["messageModel"], p["diffTotal"]) == \
        (group, 1, "CONSUME_PASSIVELY", "CLUSTERING", 0), p
    mine = [q for q in p["queues"] if q["topic"] == topic]
    last = {q["queueId"]: q["lastUpdateTimestamp"] for q in status}
    assert [(q["brokerName"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"],
             q["lastTimestamp"]) for q in mine] == \
        [("broker-a", qid, want[qid], want[qid], 0, last[qid]) for qid in range(QUEUES)], p
    others = [q for q in p["queues"] if q["topic"] != topic]  # nothing was retried
    assert all(q["topic"] == f"%RETRY%{group}" and q["brokerOffset"] == 0 for q in others), p


def check_status(status: list[dict[str, Any]], want: dict[int, int]) -> None:
    assert [(q["brokerName"], q["queueId"], q["minOffset"], q["maxOffset"]) for q in status] == \
        [("broker-a", qid, 0, want[qid]) for qid in range(QUEUES)], status
    assert all(q["lastUpdateTimestamp"] > 0 for q in status), status


def check_stats(stats: list[dict[str, Any]], topic: str, group: str) -> None:
    (s,) = stats
    assert (s["topic"], s["queues"], s["messages"], s["putTotal"]) == (topic, QUEUES, N, N), s
    assert [(g["group"], g["accumulation"], g["online"]) for g in s["groups"]] == \
        [(group, 0, 1)], s
    # the last minute's rates: the broker samples at least 5 s apart, so no more than N / 5 s
    assert 0 <= s["putTps"] <= N / SAMPLE_S and 0 <= s["groups"][0]["consumeTps"] <= N / SAMPLE_S, s


def check_message(m: dict[str, Any], topic: str, sent: Event, place: tuple[int, int]) -> None:
    """A queried message (JSON, body base64) is what the producer sent, where it was consumed."""
    assert (m["topic"], m["tags"], m["keys"], m["queueId"], m["queueOffset"]) == \
        (topic, "TagA", [sent["key"]], *place), m
    assert base64.b64decode(m["body"]).decode() == sent["body"], m
    assert (m["properties"]["KEYS"], m["properties"]["TAGS"]) == (sent["key"], "TagA"), m
    assert m["storeTimestamp"] >= m["bornTimestamp"] > 0, m


def test_admin_commands_show_what_the_clients_did(cx: Conformance) -> None:
    t_ons, t_cpp = cx.name("ADM_ONS"), cx.name("ADM_CPP")
    pid_ons, gid_ons = cx.name("PID_ONS"), cx.name("GID_ONS")
    pid_cpp, gid_cpp = cx.name("PID_CPP"), cx.name("GID_CPP")
    for t in (t_ons, t_cpp):
        cx.create_topic(t, QUEUES)

    # ali-ons's first producer heartbeat would come 30 s after it started: every second instead
    ons_p = cx.ons("produce", t_ons, pid_ons, "--n", str(N), "--hold", "--heartbeat-ms", "1000",
                   *CLIENT_DEADLINE)
    cpp_p = cx.cpp("produce", t_cpp, pid_cpp, "--n", str(N), "--mode", "orderly", "--hold",
                   *CLIENT_DEADLINE)
    ons_c = cx.ons("consume", t_ons, gid_ons, "--consume-from", "FIRST", *CLIENT_DEADLINE)
    cpp_c = cx.cpp("push", t_cpp, gid_cpp, *CLIENT_DEADLINE)
    ons_p.wait_event("holding", FINISH_S)
    cpp_p.wait_event("holding", FINISH_S)
    sent_ons, sent_cpp = sent_of(ons_p.events), sent_of(cpp_p.events)
    got_ons, got_cpp = wait_keys(ons_c, N), wait_keys(cpp_c, N)
    want_ons, want_cpp = per_queue(got_ons), per_queue(got_cpp)
    assert {q: n for q, n in want_ons.items() if n} == Counter(e["queueId"] for e in sent_ons)
    ids = {"ons_p": ons_p.wait_event("ready", 5)["clientId"],
           "ons_c": ons_c.wait_event("ready", 5)["clientId"],
           "cpp_p": cpp_client_id(cx, pid_cpp), "cpp_c": cpp_client_id(cx, gid_cpp)}
    print(f"client ids: {ids}")
    for name, p in (("ons_p", ons_p), ("ons_c", ons_c)):  # ali-ons: <ip>@<instanceName = pid>
        assert ids[name].endswith(f"@{p.of('start')[0]['pid']}"), ids

    # producerConnection: listed once a heartbeat named the group
    for group, topic, cid, version, lang in ((pid_ons, t_ons, ids["ons_p"], ONS_VERSION, "JAVA"),
                                             (pid_cpp, t_cpp, ids["cpp_p"], CPP_VERSION, "CPP")):
        conns = poll(f"producerConnection of {group}", partial(
            admin_may_fail, cx, "producerConnection", "-g", group, "-t", topic))
        print(f"producerConnection {group}: {conns}")
        connection(conns, cid, version, lang)

    # consumerConnection
    for group, topic, cid, version, lang, start in (
            (gid_ons, t_ons, ids["ons_c"], ONS_VERSION, "JAVA", "CONSUME_FROM_FIRST_OFFSET"),
            (gid_cpp, t_cpp, ids["cpp_c"], CPP_VERSION, "CPP", "CONSUME_FROM_LAST_OFFSET")):
        cc = admin(cx, "consumerConnection", "-g", group)
        print(f"consumerConnection {group}: {cc}")
        connection(cc["connectionSet"], cid, version, lang)
        assert {t: s["subString"] for t, s in cc["subscriptionTable"].items()} == \
            {topic: "*", f"%RETRY%{group}": "*"}, cc
        assert (cc["consumeType"], cc["messageModel"], cc["consumeFromWhere"]) == \
            ("CONSUME_PASSIVELY", "CLUSTERING", start), cc

    # consumerProgress (once the commits arrived), topicStatus, statsAll
    for group, topic, want in ((gid_ons, t_ons, want_ons), (gid_cpp, t_cpp, want_cpp)):
        progress = poll(f"{group}'s commits of {want}",
                        partial(caught_up, cx, group, topic, want))
        status = admin(cx, "topicStatus", "-t", topic)
        print(f"consumerProgress {group}: {progress}\ntopicStatus {topic}: {status}")
        check_status(status, want)
        check_progress(progress, group, topic, want, status)
        stats = admin(cx, "statsAll", "-t", topic)
        print(f"statsAll {topic}: {stats}")
        check_stats(stats, topic, group)

    # queryMsgByKey / queryMsgById on a message each producer sent
    for topic, sent, got in ((t_ons, sent_ons, got_ons), (t_cpp, sent_cpp, got_cpp)):
        pick = next(e for e in sent if e["key"].endswith(f"-{PICK}"))
        place = next((e["queueId"], e["queueOffset"]) for e in got if e["key"] == pick["key"])
        (by_key,) = admin(cx, "queryMsgByKey", "-t", topic, "-k", pick["key"])
        by_id = admin(cx, "queryMsgById", "-i", pick["msgId"], "-t", topic)
        print(f"queryMsgByKey {topic} {pick['key']}: {by_key}\nqueryMsgById {pick['msgId']}: "
              f"{by_id}")
        for m in (by_key, by_id):
            check_message(m, topic, pick, place)
            assert pick["msgId"] in (m["msgId"], m["offsetMsgId"]), m
        assert by_key["commitLogOffset"] == by_id["commitLogOffset"]
    assert {k: by_id["properties"][k] for k in ("shard", "seq")} == \
        {"shard": str(PICK % 4), "seq": str(PICK // 4)}, by_id  # set by the C++ producer

    # the tables, as an operator reads them: mqadmin's columns, the version by name
    text = admin(cx, "consumerConnection", "-g", gid_ons, as_json=False)
    print(text)
    assert re.search(rf"{re.escape(ids['ons_c'])}\s.*127\.0\.0\.1:\d+\s.*JAVA\s.*V3_4_9", text), text
    text = admin(cx, "producerConnection", "-g", pid_cpp, "-t", t_cpp, as_json=False)
    print(text)
    assert re.search(rf"^0001\s+{re.escape(ids['cpp_p'])}\s+127\.0\.0\.1:\d+\s+CPP\s+V3_1_8$",
                     text, re.M), text
    text = admin(cx, "consumerProgress", "-g", gid_cpp, as_json=False)
    print(text)
    assert "Diff Total: 0" in text and t_cpp in text, text

    for p in (ons_p, cpp_p, ons_c, cpp_c):
        p.stop(FINISH_S)
    state = cx.stop_broker()
    assert state.offsets_of(t_ons, gid_ons) == {q: n for q, n in want_ons.items() if n}, \
        state.describe(t_ons)
    assert state.offsets_of(t_cpp, gid_cpp) == {q: n for q, n in want_cpp.items() if n}, \
        state.describe(t_cpp)
