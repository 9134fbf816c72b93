"""Consumer retries with the third-party Node.js client ali-ons 3.12.0: a handler that throws makes
ali-ons hand the message back with CONSUMER_SEND_MSG_BACK (36; delayLevel 0, its
maxReconsumeTimes in the header); rocketlite parks it in SCHEDULE_TOPIC_XXXX at delay level
3 + reconsumeTimes, then writes it to ``%RETRY%<group>``, which ali-ons subscribes to and
redelivers with reconsumeTimes + 1; once it was retried maxReconsumeTimes times the next failure
sends it to ``%DLQ%<group>``, readable at once (see ``rocketlite.broker.send_back``).

The broker runs with 18 delay levels of 1 s, so each retry comes back in about a second.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from harness import FINISH_S, Conformance, Event, StoredMessage, received_of
from test_client_interop import body_for, fast_config, produce_with_rocketlite

from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message, MessageExt
from rocketlite.protocol.bodies import ConsumeFromWhere

pytestmark = [pytest.mark.conformance,
              pytest.mark.broker_conf({"messageDelayLevel": " ".join(["1s"] * 18)})]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DLQ_READ_DEADLINE_S = 30.0


def send(cx: Conformance, topic: str, n: int) -> list[Event]:
    messages = [Message(topic, body_for(cx.run_id, i).encode(), tags="TagRetry",
                        keys=f"{cx.run_id}-{i}") for i in range(n)]
    sent = asyncio.run(asyncio.wait_for(
        produce_with_rocketlite(cx.broker.namesrv_addr, cx.name("PID_RL"), messages), 60))
    assert len(sent) == n
    return sent


def deliveries(received: list[Event]) -> dict[str, list[Event]]:
    """Each key's 'received' events, in the order ali-ons delivered them."""
    out: dict[str, list[Event]] = defaultdict(list)
    for e in received:
        out[e["key"]].append(e)
    return dict(out)


def by_key(messages: list[StoredMessage]) -> dict[str | None, list[StoredMessage]]:
    out: dict[str | None, list[StoredMessage]] = defaultdict(list)
    for m in messages:
        out[m.key].append(m)
    return dict(out)


async def read_dlq(namesrv: str, topic: str, n: int) -> list[MessageExt]:
    """The dead letters, read with rocketlite's LitePullConsumer from the first offset, until
    ``n`` of them or the deadline."""
    reader = LitePullConsumer(f"DLQ_READER_{topic[5:]}", config=fast_config(namesrv),
                              consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    reader.subscribe(topic)
    await reader.start()
    got: list[MessageExt] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DLQ_READ_DEADLINE_S
        while len(got) < n and loop.time() < deadline:
            got += await reader.poll(0.5)
        got += await reader.poll(0.5)  # any extra shows now
    finally:
        await asyncio.wait_for(reader.shutdown(), 20)
    return got


def test_failed_messages_are_redelivered_through_the_retry_topic(cx: Conformance) -> None:
    """The handler throws for the first 2 deliveries of each key: ali-ons receives each of the N
    messages exactly 3 times, with reconsumeTimes 0, 1, 2 and the same body, the third succeeds;
    the broker scheduled the 2 retries of each at delay levels 3 and 4 (3 + reconsumeTimes, as
    ali-ons sends delayLevel 0) and wrote them to %RETRY%<group>; nothing is dead-lettered, and the
    group's offsets of the topic and of its retry topic are committed at the queue ends."""
    n, fails = 5, 2
    topic, group = cx.name("RETRY_T"), cx.name("GID_ONS_RETRY")
    retry, dlq = f"%RETRY%{group}", f"%DLQ%{group}"
    cx.create_topic(topic)
    sent = send(cx, topic, n)
    body = {e["key"]: e["body"] for e in sent}

    c = cx.ons("consume", topic, group, "--consume-from", "FIRST", "--expect", str(n),
               "--fail-times", str(fails), "--linger-ms", "3000", "--rebalance-ms", "2000")
    events = c.finish(FINISH_S)
    per_key = deliveries(received_of(events))
    assert set(per_key) == set(body), c.describe()
    for key, got in per_key.items():
        assert [e["reconsumeTimes"] for e in got] == [0, 1, 2], (key, got)
        assert [e["fail"] for e in got] == [True, True, False], (key, got)
        assert {e["body"] for e in got} == {body[key]}, (key, got)
        assert {e["topic"] for e in got} == {topic}, "ali-ons gives a retry its original topic"
        assert {e["tags"] for e in got} == {"TagRetry"}, (key, got)
    assert len([e for e in events if e["event"] == "handler_failed"]) == n * fails, c.describe()

    state = cx.stop_broker()
    retried = by_key(state.messages_of(retry))
    assert {k: len(ms) for k, ms in retried.items()} == dict.fromkeys(body, fails), (
        state.describe(retry))
    assert all(m.body == body[m.key] and m.properties.get("RETRY_TOPIC") == topic
               and m.properties.get("ORIGIN_MESSAGE_ID")
               for ms in retried.values() for m in ms if m.key is not None), state.describe(retry)
    scheduled = by_key(state.messages_of(SCHEDULE_TOPIC))
    assert {k: sorted(int(m.properties["DELAY"]) for m in ms) for k, ms in scheduled.items()} == {
        k: [3, 4] for k in body}, "the broker's delay level for a send-back with delayLevel 0"
    assert state.messages_of(dlq) == [], "nothing was retried maxReconsumeTimes (16) times"
    assert state.offsets_of(topic, group) == state.max_offsets_of(topic), state.describe(topic)
    assert state.offsets_of(retry, group) == state.max_offsets_of(retry), state.describe(retry)


def test_always_failing_messages_end_in_the_dlq(cx: Conformance) -> None:
    """The handler always throws, ali-ons's maxReconsumeTimes is 2: each message is delivered 3
    times (reconsumeTimes 0, 1, 2), then the third send-back puts it in %DLQ%<group>, where
    rocketlite's LitePullConsumer reads it at once: same body and key, reconsumeTimes 3,
    RETRY_TOPIC the original topic, no DELAY; no fourth delivery follows."""
    n, max_reconsume = 3, 2
    topic, group = cx.name("DLQ_T"), cx.name("GID_ONS_DLQ")
    retry, dlq = f"%RETRY%{group}", f"%DLQ%{group}"
    cx.create_topic(topic)
    sent = send(cx, topic, n)
    body = {e["key"]: e["body"] for e in sent}

    c = cx.ons("consume", topic, group, "--consume-from", "FIRST", "--fail-times", "always",
               "--max-reconsume", str(max_reconsume), "--rebalance-ms", "2000")
    c.wait_for(lambda events: sum(1 for e in events if e["event"] == "received"
                                  and e["reconsumeTimes"] == max_reconsume) >= n,
               60, f"the {n} messages' deliveries with reconsumeTimes {max_reconsume}")
    dead = asyncio.run(read_dlq(cx.broker.namesrv_addr, dlq, n))
    assert sorted((m.keys[0], m.body.decode()) for m in dead) == sorted(body.items()), dead
    assert {m.reconsume_times for m in dead} == {max_reconsume + 1}, dead
    assert all(m.properties.get("RETRY_TOPIC") == topic and "DELAY" not in m.properties
               for m in dead), [m.properties for m in dead]

    events = c.stop(FINISH_S)  # by now a 4th delivery would have come (retries take ~1 s)
    per_key = deliveries(received_of(events))
    assert {k: [e["reconsumeTimes"] for e in got] for k, got in per_key.items()} == {
        k: list(range(max_reconsume + 1)) for k in body}, c.describe()
    assert all(e["fail"] for got in per_key.values() for e in got)

    state = cx.stop_broker()
    stored_dead = by_key(state.messages_of(dlq))
    assert {k: [m.body for m in ms] for k, ms in stored_dead.items()} == {
        k: [b] for k, b in body.items()}, state.describe(dlq)
    assert {k: len(ms) for k, ms in by_key(state.messages_of(retry)).items()} == dict.fromkeys(
        body, max_reconsume), state.describe(retry)
