"""ali-ons 3.12.0 (Node.js, pure JavaScript) against rocketlite: conformance/ali-ons/*.js run as
subprocesses; each scenario is judged by what the client received and by the broker's files after
it stopped, not only by the scripts' exit codes.

ali-ons's send fails when the NameServer does not know the topic (it never falls back to TBW102,
PROTOCOL.md §2.2), so each scenario first creates its topic as ``mqadmin updateTopic`` would
(UPDATE_AND_CREATE_TOPIC, 4 queues) and waits for the NameServer to route it.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
import remoting_admin
from harness import (
    FINISH_S,
    ClientProcess,
    Conformance,
    Event,
    assert_same_messages,
    pairs,
    received_of,
    sent_of,
)

pytestmark = pytest.mark.conformance

def produce(cx: Conformance, topic: str, n: int, start: int = 0, *extra: str) -> list[Event]:
    p = cx.ons("produce", topic, cx.name("PID"), "--n", str(n), "--start", str(start), *extra)
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n, f"the producer reported {len(sent)} of {n} sends\n{p.describe()}"
    return sent


def latest_assignment(p: ClientProcess) -> Event | None:
    assigned = p.of("assigned")
    return assigned[-1] if assigned else None


def wait_assigned(p: ClientProcess, queues: int, timeout: float = 30) -> Event:
    """Wait until the consumer's latest rebalance gave it exactly ``queues`` queues."""
    def check(_events: list[Event]) -> Event | None:
        last = latest_assignment(p)
        return last if last is not None and len(last["queues"]) == queues else None

    found: Event = p.wait_for(check, timeout, f"a rebalance giving it {queues} queues")
    return found


def wait_distinct(procs: list[ClientProcess], n: int, timeout: float, what: str) -> None:
    """Wait until the consumers together received ``n`` distinct keys."""
    deadline = time.monotonic() + timeout
    while True:
        keys = {e["key"] for p in procs for e in p.of("received")}
        if len(keys) >= n:
            return
        ended = [p for p in procs if p.proc.poll() is not None]
        if ended or time.monotonic() > deadline:
            why = f"{ended[0].name} ended" if ended else f"{timeout} s passed"
            raise AssertionError(f"{what}: {len(keys)} of {n} distinct keys received when {why}\n"
                                 + "\n".join(p.describe() for p in procs))
        time.sleep(0.1)


def test_producer_and_push_consumer(cx: Conformance) -> None:
    """N messages (every 10th over 4 KiB, which ali-ons zlib-compresses) through SEND_MESSAGE_V2,
    then a push consumer from the first offset receives exactly those N, with the msgIds the
    sends returned; the broker stored them once each and committed the consumer's offsets."""
    n = 40
    topic, group = cx.name("ONS_BASIC"), cx.name("GID")
    cx.create_topic(topic)
    sent = produce(cx, topic, n, 0, "--big-every", "10")

    c = cx.ons("consume", topic, group, "--consume-from", "FIRST", "--expect", str(n))
    received = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), "ali-ons consumer")
    assert {e["key"]: e["msgId"] for e in received} == {e["key"]: e["msgId"] for e in sent}, (
        "a received message's msgId differs from the one its send returned")
    assert {e["key"]: e["queueId"] for e in received} == {e["key"]: e["queueId"] for e in sent}

    state = cx.stop_broker()
    stored = state.messages_of(topic)
    assert sorted((m.key, m.body) for m in stored) == sorted(pairs(sent, "sent")), state.describe(
        topic)
    assert sum(1 for m in stored if m.sys_flag & 0x1) == n // 10, (
        "bodies over 4 KiB arrive zlib-compressed with sysFlag bit 0 and must be stored as sent")
    per_queue = Counter(e["queueId"] for e in sent)
    assert {q: k for q, k in state.units_of(topic).items() if k} == dict(per_queue), (
        state.describe(topic))
    assert state.offsets_of(topic, group) == state.max_offsets_of(topic), state.describe(topic)


def test_consumer_restart_resumes_from_committed_offset(cx: Conformance) -> None:
    """A consumer stops in the middle of the backlog; more messages arrive while the group has no
    consumer; a new consumer of the group receives everything the first did not acknowledge.

    At-least-once, exactly: the first consumer closes from inside the handler of its last
    message, so that message's offset is not committed and it is the one duplicate allowed."""
    n = 30
    topic, group = cx.name("ONS_RESTART"), cx.name("GID")
    cx.create_topic(topic)
    batch1 = produce(cx, topic, n)

    first = cx.ons("consume", topic, group, "--consume-from", "FIRST", "--stop-after",
                   str(n // 2))
    run1 = pairs(received_of(first.finish(FINISH_S)), "received")
    assert len(set(run1)) == n // 2, first.describe()
    last_of_run1 = run1[-1]

    # What the first consumer committed (UPDATE_CONSUMER_OFFSET on close), asked of the broker
    committed = {q: remoting_admin.query_consumer_offset(cx.broker.broker_addr, group, topic, q)
                 for q in range(4)}
    batch2 = produce(cx, topic, n, n)
    everything = pairs(batch1 + batch2, "sent")
    second = cx.ons("consume", topic, group, "--consume-from", "FIRST", "--expect",
                    str(2 * n - len(set(run1))), "--linger-ms", "2000")
    run2_events = received_of(second.finish(FINISH_S))
    run2 = pairs(run2_events, "received")

    # The second consumer starts each queue exactly at the committed offset: of the backlog it
    # receives the messages at or past it, and the first consumer had received all before it.
    place = {e["key"]: (e["queueId"], e["queueOffset"]) for e in batch1}
    resumed = {place[e["key"]] for e in run2_events if e["key"] in place}
    past_committed = {(q, off) for q, off in place.values() if off >= committed[q]}
    assert resumed == past_committed, (
        f"committed offsets {committed}: the restarted consumer received backlog messages "
        f"{sorted(resumed)}, those at or past the committed offsets are {sorted(past_committed)}")
    assert {place[k] for k, _ in run1} >= set(place.values()) - past_committed, (
        f"committed offsets {committed} skip messages the first consumer never received")

    again = [m for m in run2 if m in set(run1)]
    assert again in ([], [last_of_run1]), (
        f"the restarted consumer received {len(again)} messages the first one had acknowledged "
        f"(only the unacknowledged last one, {last_of_run1}, may come again): {again[:5]}")
    assert_same_messages(everything, run1 + run2, "restart", duplicates_allowed=[last_of_run1])

    state = cx.stop_broker()
    assert len(state.messages_of(topic)) == 2 * n, state.describe(topic)
    assert state.offsets_of(topic, group) == state.max_offsets_of(topic), state.describe(topic)


def test_consume_from_first_vs_last_offset(cx: Conformance) -> None:
    """A new group with CONSUME_FROM_FIRST_OFFSET reads the backlog; a new group with
    CONSUME_FROM_LAST_OFFSET reads everything sent after it started, and of the backlog exactly
    the queues it started at 0.

    Where a new LAST group starts depends on the broker, as in Apache RocketMQ: ali-ons asks
    QUERY_CONSUMER_OFFSET first; Apache answers 0 when the queue's min offset is 0 and its first
    message is still in memory (ConsumerManageProcessor.queryConsumerOffset, PROTOCOL.md §2.2),
    and ali-ons then starts at 0; otherwise it answers 22 and ali-ons starts at GET_MAX_OFFSET.
    So each queue must start at 0 or at its max offset, and deliver accordingly."""
    n = 20
    topic, g_first, g_last = cx.name("ONS_FROM"), cx.name("GID_FIRST"), cx.name("GID_LAST")
    cx.create_topic(topic)
    backlog = produce(cx, topic, n)
    backlog_per_queue = Counter(e["queueId"] for e in backlog)

    first = cx.ons("consume", topic, g_first, "--consume-from", "FIRST", "--expect", str(n))
    assert_same_messages(pairs(backlog, "sent"), pairs(received_of(first.finish(FINISH_S)),
                                                       "received"), "FIRST")

    last = cx.ons("consume", topic, g_last, "--consume-from", "LAST")  # until SIGTERM
    start = {int(q): off for q, off in wait_assigned(last, 4)["offsets"].items()}
    for q, off in start.items():
        assert off in (0, backlog_per_queue[q]), (
            f"CONSUME_FROM_LAST_OFFSET started queue {q} at {off}: neither 0 nor its max offset "
            f"{backlog_per_queue[q]}\n{last.describe()}")
    from_zero = {q for q, off in start.items() if off == 0 and backlog_per_queue[q]}
    print(f"LAST group started at {start}; backlog queues read from 0 (Apache's in-memory rule):"
          f" {sorted(from_zero)}")

    fresh = produce(cx, topic, n, n)
    expected = pairs(fresh + [e for e in backlog if e["queueId"] in from_zero], "sent")
    wait_distinct([last], len(expected), FINISH_S, "LAST consumer")
    time.sleep(1.5)  # extras, if any, arrive now
    received = received_of(last.stop(FINISH_S))
    assert_same_messages(expected, pairs(received, "received"), "LAST")

    state = cx.stop_broker()
    assert state.offsets_of(topic, g_first) == dict(backlog_per_queue), state.describe(topic)
    assert state.offsets_of(topic, g_last) == state.max_offsets_of(topic), state.describe(topic)


def test_two_consumers_in_one_group_split_the_queues(cx: Conformance) -> None:
    """Two consumer processes of one group: once both rebalanced (GET_CONSUMER_LIST_BY_GROUP lists
    both), each owns 2 of the 4 queues, and together they receive the N messages exactly once,
    each only from its own queues."""
    n = 40
    topic, group = cx.name("ONS_SPLIT"), cx.name("GID")
    cx.create_topic(topic)
    fast = ("--consume-from", "FIRST", "--rebalance-ms", "1000")
    a = cx.ons("consume", topic, group, *fast)
    wait_assigned(a, 4)
    b = cx.ons("consume", topic, group, *fast)
    queues_b = set(wait_assigned(b, 2)["queues"])
    queues_a = set(wait_assigned(a, 2)["queues"])
    assert queues_a.isdisjoint(queues_b) and queues_a | queues_b == {0, 1, 2, 3}, (
        f"the rebalance gave {queues_a} and {queues_b}")

    sent = produce(cx, topic, n)
    wait_distinct([a, b], n, FINISH_S, "two consumers")
    time.sleep(1.5)  # extras, if any, arrive now
    got_a, got_b = received_of(a.stop(FINISH_S)), received_of(b.stop(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(got_a + got_b, "received"), "split")
    assert {e["queueId"] for e in got_a} <= queues_a, "consumer A received from B's queues"
    assert {e["queueId"] for e in got_b} <= queues_b, "consumer B received from A's queues"
    assert got_a and got_b, "one consumer received nothing"

    state = cx.stop_broker()
    assert state.offsets_of(topic, group) == state.max_offsets_of(topic), state.describe(topic)


def test_send_to_a_topic_nobody_created(cx: Conformance) -> None:
    """ali-ons sends only with a route for the topic itself (it never falls back to TBW102).
    Apache's NameServer answers TOPIC_NOT_EXIST (17) for a topic nobody created and the send
    fails with "No topic route info"; rocketlite's answers with a write-only route made from
    TBW102's, the first send creates the topic (min(defaultTopicQueueNums 4, TBW102's 8)
    queues) and every send after it goes to one of those queues. Either way the route must
    offer consumers no queue before the topic exists."""
    n = 20
    topic, group = cx.name("ONS_AUTO"), cx.name("GID")
    code, before = remoting_admin.route(cx.broker.namesrv_addr, topic)
    assert remoting_admin.read_queue_count(before) == 0, (
        f"a topic nobody created has readable queues: code {code}, route {before}")
    p = cx.ons("produce", topic, cx.name("PID"), "--n", str(n))
    if code == remoting_admin.TOPIC_NOT_EXIST:  # Apache: ali-ons cannot send (PROTOCOL.md §2.2)
        assert p.wait(FINISH_S) != 0 and not p.of("sent"), p.describe()
        assert "No topic route info" in json.dumps(p.of("fatal")), p.describe()
        return
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n, f"the producer reported {len(sent)} of {n} sends\n{p.describe()}"
    routed = remoting_admin.wait_for_route(cx.broker.namesrv_addr, topic)
    queues = remoting_admin.read_queue_count(routed)
    assert queues == remoting_admin.write_queue_count(routed) == 4, (
        f"route {routed} after sends to queues {[e['queueId'] for e in sent]}")
    assert {e["queueId"] for e in sent} <= set(range(queues)), p.describe()

    c = cx.ons("consume", topic, group, "--consume-from", "FIRST", "--expect", str(n))
    received = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), "auto-created topic")

    state = cx.stop_broker()
    assert sorted((m.key, m.body) for m in state.messages_of(topic)) == sorted(
        pairs(sent, "sent")), state.describe(topic)
    assert state.offsets_of(topic, group) == state.max_offsets_of(topic), state.describe(topic)
