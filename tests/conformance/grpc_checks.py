"""Judging the official 5.x gRPC clients' scenarios (``conformance/grpc-python``,
``conformance/nodejs5``): what the scenario events say was received, compared with what was sent
and with what the broker's store holds. Shared by ``test_grpc_python.py`` and
``test_grpc_nodejs.py``; the processes themselves are started by ``harness.Conformance``.

Both clients' scenarios print the same event shapes: ``sent {key, body, msgId, ...}`` and
``received {key, keys, body, msgId, topic, tag, properties, messageGroup, deliveryAttempt,
recvMs, ...}``; message ``i`` of a run has keys ``<run>-<i>`` and ``<run>-<i>#k2`` and the user
properties ``run`` and ``idx`` (plus ``shard``/``seq`` for FIFO). The other side of the mixing
scenarios is rocketlite's own client over Remoting (``remoting_produce``/``remoting_consume``),
run in the test's process with ``asyncio.run``, never at the same time as a blocking wait.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Sequence

from harness import Event, StoredMessage, StoreState

from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer, SendStatus
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.formats.properties import KEYS, TAGS, UNIQ_KEY
from rocketlite.protocol.bodies import ConsumeFromWhere

TAG = "TagA"  # the scenarios' default tag
# broker.conf of a test whose 5.x PushConsumer stops: its shutdown waits for the long polls it
# has in flight, which the front holds up to this (default 20 s; the least it may be is 5 s)
SHORT_LONG_POLLS = {"grpcClientConsumerMaxLongPollingTimeoutMillis": "5000"}
# broker.conf of a test that waits for a received message's invisible time to pass: the least
# invisible time a receive may ask for (minInvisibleTimeMillsForRecv; 10 s by default, Apache's
# proxy's) at SHORT_MIN_INVISIBLE_S, which that test then asks for
SHORT_MIN_INVISIBLE_S = 4
SHORT_MIN_INVISIBLE = {"minInvisibleTimeMillsForRecv": str(SHORT_MIN_INVISIBLE_S * 1000)}


def first_deliveries(received: Iterable[Event]) -> list[Event]:
    """The first delivery of each key, in arrival order."""
    seen: set[str] = set()
    out = []
    for e in received:
        if e["key"] not in seen:
            seen.add(e["key"])
            out.append(e)
    return out


def deliveries_by_key(received: Iterable[Event]) -> dict[str, list[Event]]:
    out: dict[str, list[Event]] = defaultdict(list)
    for e in received:
        out[e["key"]].append(e)
    return out


def assert_received_as_sent(sent: Sequence[Event], received: Sequence[Event], topic: str,
                            label: str, tag: str = TAG) -> None:
    """Every received message of ``sent`` carries the body, topic, tag, both keys, the user
    properties and the message id it was sent with, and its body digest checked out (the client
    flags a message whose ``body_digest`` does not match as corrupted)."""
    by_key = {e["key"]: e for e in sent}
    problems = []
    for r in received:
        s = by_key.get(r["key"])
        if s is None:
            continue
        want_keys = sorted([s["key"], f"{s['key']}#k2"])
        checks = {
            "body": (r["body"], s["body"]),
            "topic": (r["topic"], topic),
            "tag": (r["tag"], tag),
            "keys": (sorted(r["keys"]), want_keys),
            "msgId": (r["msgId"], s["msgId"]),
            "corrupted": (r["corrupted"], False),
        }
        idx = s["key"].rsplit("-", 1)[1]
        props = r.get("properties") or {}
        checks["properties"] = ({k: props.get(k) for k in ("run", "idx")},
                                {"run": s["key"].rsplit("-", 1)[0], "idx": idx})
        for what, (got, want) in checks.items():
            if got != want:
                problems.append(f"{r['key']} {what}: got {got!r}, sent {want!r}")
    assert not problems, f"{label}: {len(problems)} differences, e.g. " + "; ".join(problems[:8])


def assert_fifo_order(received: Sequence[Event], label: str) -> None:
    """Within each message group, the first deliveries arrive in send order (``seq`` 0, 1, ...),
    and every message carries its group."""
    by_group: dict[str, list[int]] = defaultdict(list)
    for e in first_deliveries(received):
        props = e.get("properties") or {}
        group = e.get("messageGroup")
        assert group, f"{label}: {e['key']} was received without its message_group: {e}"
        by_group[group].append(int(props["seq"]))
    for group, seqs in by_group.items():
        assert seqs == list(range(len(seqs))), (
            f"{label}: message group {group} arrived out of order: seq {seqs}")


def assert_fifo_blocked(received: Sequence[Event], label: str) -> None:
    """A FIFO group's next message waits for the one before it: with every first delivery left
    unacked (its invisible time changed), each group's deliveries go seq 0 attempt 1, seq 0
    attempt 2, seq 1 attempt 1, ... (an unordered consumer would get seq 1 before seq 0's
    second attempt)."""
    by_group: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in received:
        by_group[str(e.get("messageGroup"))].append(
            (int((e.get("properties") or {})["seq"]), e["deliveryAttempt"]))
    for group, got in by_group.items():
        want = [(seq, attempt) for seq in range(len(got) // 2) for attempt in (1, 2)]
        assert got == want, (f"{label}: message group {group} was delivered as (seq, attempt) "
                             f"{got}, {want} expected")


def assert_redelivered(received: Sequence[Event], keys: Iterable[str], min_gap_ms: int,
                       max_gap_ms: int, label: str) -> None:
    """Each of ``keys`` arrived exactly twice: delivery_attempt 1, then 2 between ``min_gap_ms``
    and ``max_gap_ms`` later (its invisible time, then POP's revive)."""
    by_key = deliveries_by_key(received)
    problems = []
    for key in keys:
        ds = by_key.get(key, [])
        attempts = [d["deliveryAttempt"] for d in ds]
        if attempts != [1, 2]:
            problems.append(f"{key}: delivery attempts {attempts}, [1, 2] expected")
            continue
        gap = ds[1]["recvMs"] - ds[0]["recvMs"]
        if not min_gap_ms <= gap <= max_gap_ms:
            problems.append(f"{key}: redelivered {gap} ms after the first delivery, "
                            f"{min_gap_ms}..{max_gap_ms} expected")
    assert not problems, f"{label}: " + "; ".join(problems[:8])


def stored_keys(m: StoredMessage) -> list[str]:
    return sorted((m.properties.get(KEYS) or "").split())


def assert_stored_as_sent(state: StoreState, topic: str, sent: Sequence[Event],
                          label: str, tag: str = TAG) -> list[StoredMessage]:
    """The store holds each sent message once in ``topic``, with its body, tag, both keys, user
    properties, and the client's message id as UNIQ_KEY."""
    by_key: dict[str, list[StoredMessage]] = defaultdict(list)
    for m in state.messages_of(topic):
        ks = stored_keys(m)
        if ks:
            by_key[ks[0]].append(m)
    problems = []
    for s in sent:
        found = by_key.get(s["key"], [])
        if len(found) != 1:
            problems.append(f"{s['key']}: {len(found)} records in {topic}, 1 expected")
            continue
        m = found[0]
        want = {"body": s["body"], "tag": tag, "keys": sorted([s["key"], f"{s['key']}#k2"]),
                "uniq": s["msgId"], "run": s["key"].rsplit("-", 1)[0],
                "idx": s["key"].rsplit("-", 1)[1]}
        got = {"body": m.body, "tag": m.properties.get(TAGS), "keys": stored_keys(m),
               "uniq": m.properties.get(UNIQ_KEY), "run": m.properties.get("run"),
               "idx": m.properties.get("idx")}
        problems += [f"{s['key']} {what}: stored {got[what]!r}, sent {want[what]!r}"
                     for what in want if got[what] != want[what]]
    assert not problems, (f"{label}: {len(problems)} differences, e.g. " + "; ".join(problems[:8])
                          + "\n" + state.describe(topic))
    return [by_key[s["key"]][0] for s in sent]


# -- rocketlite's own client over Remoting, the other side of the mixing scenarios ---------------

REMOTING_DEADLINE_S = 30.0
LINGER_S = 1.0  # after the expected keys arrived, extras (duplicates), if any, arrive now


def remoting_config(namesrv: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, rebalance_interval=1.0, persist_offset_interval=1.0,
                        heartbeat_interval=2.0)


async def remoting_consume(namesrv: str, topic: str, group: str,
                           keys: Iterable[str]) -> list[MessageExt]:
    """rocketlite's PushConsumer (Remoting pull) from the first offset until every one of
    ``keys`` arrived (then ``LINGER_S`` more), or fail at the deadline; shutdown commits."""
    want = set(keys)
    got: list[MessageExt] = []
    enough = asyncio.Event()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        got.extend(m for m in msgs if m.topic == topic)
        if want <= {k for m in got for k in m.keys}:
            enough.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(group, config=remoting_config(namesrv),
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "*")
    c.register_listener(listener)
    await c.start()
    try:
        try:
            await asyncio.wait_for(enough.wait(), REMOTING_DEADLINE_S)
        except TimeoutError:
            seen = {k for m in got for k in m.keys}
            raise AssertionError(f"rocketlite PushConsumer: {len(want & seen)} of {len(want)} "
                                 f"keys within {REMOTING_DEADLINE_S} s") from None
        await asyncio.sleep(LINGER_S)
    finally:
        await asyncio.wait_for(c.shutdown(), 20)
    return got


async def remoting_produce(namesrv: str, group: str, topic: str, run_id: str, n: int,
                           tag: str = TAG) -> list[Event]:
    """Send n messages shaped as the 5.x scenarios send them (two keys, tag, user properties
    ``run``/``idx``) with rocketlite's Producer over Remoting; 'sent' events like theirs."""
    sent: list[Event] = []
    async with Producer(group, namesrv_addr=namesrv) as p:
        for i in range(n):
            key = f"{run_id}-{i}"
            body = f"rocketlite remoting {run_id} #{i} — 消息"
            m = Message(topic, body.encode(), tags=tag, keys=[key, f"{key}#k2"],
                        properties={"run": run_id, "idx": str(i)})
            r = await asyncio.wait_for(p.send(m), 15)
            assert r.status is SendStatus.SEND_OK, r
            sent.append({"event": "sent", "key": key, "body": body, "msgId": r.msg_id})
    return sent


def assert_remoting_received(got: Sequence[MessageExt], sent: Sequence[Event], label: str,
                             tag: str = TAG) -> None:
    """rocketlite's consumer got each sent message exactly once, with its body, tag, keys, user
    properties and message id (UNIQ_KEY)."""
    by_key: dict[str, list[MessageExt]] = defaultdict(list)
    for m in got:
        by_key[min(m.keys)].append(m)
    problems = []
    for s in sent:
        ms = by_key.get(s["key"], [])
        if len(ms) != 1:
            problems.append(f"{s['key']}: received {len(ms)} times")
            continue
        m = ms[0]
        want = (s["body"], tag, sorted([s["key"], f"{s['key']}#k2"]), s["msgId"],
                s["key"].rsplit("-", 1)[1])
        have = (m.body.decode("utf-8", "replace"), m.tags, sorted(m.keys), m.msg_id,
                m.properties.get("idx"))
        if have != want:
            problems.append(f"{s['key']}: (body, tag, keys, msgId, idx) {have} != sent {want}")
    extra = sorted(set(by_key) - {s["key"] for s in sent})
    if extra:
        problems.append(f"received messages never sent: {extra[:5]}")
    assert not problems, f"{label}: " + "; ".join(problems[:8])
