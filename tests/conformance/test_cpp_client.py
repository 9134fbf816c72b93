"""The C++ 4.x client (the PyPI wheel rocketmq==0.4.4, which bundles librocketmq) against
rocketlite: conformance/cpp/*.py run in their own venv with a writable HOME; each scenario is
judged by what the client received and by the broker's files after it stopped.

What the wheel exposes (read from its ``rocketmq/client.py`` and ``ffi.py``; the C library's
exported functions agree): ``Producer.send_sync``, ``send_async``, ``send_oneway``,
``send_orderly(msg, arg)``, ``send_oneway_orderly``, ``send_batch(msgs)``; ``PushConsumer(group,
orderly=False|True, message_model)`` with ``subscribe``/``start``/``shutdown``,
``set_thread_count``, ``set_message_batch_max_size``; ``PullConsumer.pull(topic)``. There is no
consumeFromWhere setting anywhere (a push consumer always uses the C++ default,
CONSUME_FROM_LAST_OFFSET), so the send scenarios read the topic back with the PullConsumer from
queue offset 0, which depends on no start rule.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import remoting_admin
from harness import (
    FINISH_S,
    Conformance,
    Event,
    assert_same_messages,
    pairs,
    received_of,
    sent_of,
)

pytestmark = pytest.mark.conformance

def produce(cx: Conformance, topic: str, n: int, mode: str, *extra: str) -> list[Event]:
    p = cx.cpp("produce", topic, cx.name("PID"), "--n", str(n), "--mode", mode, *extra)
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n, f"the producer reported {len(sent)} of {n} sends\n{p.describe()}"
    assert {e["status"] for e in sent} == {"OK"}, p.describe()
    return sent


def pull_all(cx: Conformance, topic: str, n: int) -> list[Event]:
    c = cx.cpp("pull", topic, cx.name("GID_PULL"), "--expect", str(n))
    return received_of(c.finish(FINISH_S))


def check_stored(cx: Conformance, topic: str, sent: list[Event]) -> None:
    state = cx.stop_broker()
    stored = state.messages_of(topic)
    assert sorted((m.key, m.body) for m in stored) == sorted(pairs(sent, "sent")), (
        state.describe(topic))
    assert sum(state.units_of(topic).values()) == len(sent), state.describe(topic)


def test_send_sync(cx: Conformance) -> None:
    """``send_sync`` (SEND_MESSAGE, 10) N times; read back exactly those N, each with the
    msgId ``send_sync`` returned (the client's UNIQ_KEY, which the broker must keep)."""
    n = 30
    topic = cx.name("CPP_SYNC")
    cx.create_topic(topic)
    sent = produce(cx, topic, n, "sync")
    received = pull_all(cx, topic, n)
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), "send_sync")
    assert {e["key"]: e["msgId"] for e in received} == {e["key"]: e["msgId"] for e in sent}
    check_stored(cx, topic, sent)


def test_send_batch(cx: Conformance) -> None:
    """``send_batch`` of 8 messages at a time (SEND_MESSAGE with ``batch`` = "1", one body of
    encodeMessage records): the broker stores each message as its own record, a batch in one
    queue at consecutive offsets."""
    n, size = 32, 8
    topic = cx.name("CPP_BATCH")
    cx.create_topic(topic)
    sent = produce(cx, topic, n, "batch", "--batch-size", str(size))
    received = pull_all(cx, topic, n)
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), "send_batch")

    where = {e["key"]: (e["queueId"], e["queueOffset"]) for e in received}
    batches: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in sent:
        batches[e["batch"]].append(where[e["key"]])
    for b, places in batches.items():
        queues = {q for q, _ in places}
        offsets = [off for _, off in places]
        assert len(queues) == 1, f"batch {b} was spread over queues {queues}"
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), (
            f"batch {b}'s messages are not at consecutive offsets in send order: {offsets}")
    check_stored(cx, topic, sent)


def test_unknown_topic_is_auto_created_on_send(cx: Conformance) -> None:
    """``send_sync`` to a topic nobody created: the broker creates it from TBW102 on the first
    send (``defaultTopic`` TBW102, ``defaultTopicQueueNums`` 4) and registers it, and the
    NameServer routes it readable from then on.

    Before the send the NameServer must not offer the topic to consumers: Apache answers
    TOPIC_NOT_EXIST (17) and the C++ client sends with TBW102's route; rocketlite answers with a
    write-only route built from TBW102's (so ali-ons, which needs a route, can send too)."""
    n = 12
    topic = cx.name("CPP_AUTO")
    code, before = remoting_admin.route(cx.broker.namesrv_addr, topic)
    assert code == remoting_admin.TOPIC_NOT_EXIST or (
        code == remoting_admin.SUCCESS and remoting_admin.read_queue_count(before) == 0), (
        f"a topic nobody created has readable queues: code {code}, route {before}")
    sent = produce(cx, topic, n, "sync")
    routed = remoting_admin.wait_for_route(cx.broker.namesrv_addr, topic, timeout=10)
    queues = remoting_admin.write_queue_count(routed)
    assert queues == remoting_admin.read_queue_count(routed) == 4, (
        f"created with min(defaultTopicQueueNums 4, TBW102's 8) queues expected: {routed}")
    received = pull_all(cx, topic, n)
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), "auto-created topic")
    assert {e["queueId"] for e in received} <= set(range(queues))
    check_stored(cx, topic, sent)


def test_orderly_consumer_with_lock_batch_mq(cx: Conformance) -> None:
    """``send_orderly`` keeps each shard in one queue; an orderly PushConsumer locks its queues
    with LOCK_BATCH_MQ before it consumes (the C++ client consumes only queues the broker reported
    locked, so receiving anything proves the lock answer) and gets every shard in order: first
    the N messages sent before it started, then N more sent while it runs.

    The first half relies on Apache's QUERY_CONSUMER_OFFSET rule (PROTOCOL.md §2.2): the wheel
    has no consumeFromWhere setting, so a new group uses CONSUME_FROM_LAST_OFFSET, and reads a
    young queue from 0 only because the broker answers 0 when the queue's min offset is 0 and its
    first message is in memory."""
    n, shards = 40, 4
    topic, group = cx.name("CPP_ORDERLY"), cx.name("GID_ORDERLY")
    cx.create_topic(topic)
    before = produce(cx, topic, n, "orderly", "--shards", str(shards))

    c = cx.cpp("push", topic, group, "--orderly", "--expect", str(2 * n), "--linger-ms", "2000")
    try:
        c.wait_for(lambda ev: len({e["key"] for e in ev if e["event"] == "received"}) >= n,
                   60, f"receipt of the {n} messages sent before it started")
    except AssertionError as e:
        raise AssertionError(
            f"{e}\nA new C++ push group starts at CONSUME_FROM_LAST_OFFSET: it reads the backlog "
            "only if QUERY_CONSUMER_OFFSET answers 0 for a queue whose min offset is 0 and whose "
            "first message is in memory (Apache's rule, PROTOCOL.md §2.2). If it got nothing, "
            "check that rule and the LOCK_BATCH_MQ answer ({\"lockOKMQSet\": [...]})") from None
    during = produce(cx, topic, n, "orderly", "--shards", str(shards), "--start", str(n))
    received = received_of(c.finish(FINISH_S))
    sent = before + during
    # The consumer unlocked its queues on shutdown (UNLOCK_BATCH_MQ): another client of the
    # group locks all of them at once, not after the 60 s a lock lives.
    route = remoting_admin.wait_for_route(cx.broker.namesrv_addr, topic)
    broker_name = route["brokerDatas"][0]["brokerName"]
    locked = remoting_admin.lock_batch(cx.broker.broker_addr, broker_name, group,
                                       f"127.0.0.1@conformance-{cx.run_id}", topic,
                                       list(range(4)))
    assert locked == {0, 1, 2, 3}, f"queues still locked after the orderly consumer stopped: " \
        f"only {sorted(locked)} of 0-3 could be locked by another client"
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), "orderly")

    by_shard: dict[int, list[Event]] = defaultdict(list)
    for e in received:
        by_shard[e["shard"]].append(e)
    assert set(by_shard) == set(range(shards)), f"shards received: {sorted(by_shard)}"
    for shard, events in by_shard.items():
        seqs = [e["seq"] for e in events]
        assert seqs == sorted(seqs), f"shard {shard} was consumed out of order: {seqs}"
        assert len({e["queueId"] for e in events}) == 1, f"shard {shard} came from several queues"

    state = cx.stop_broker()
    assert sum(state.units_of(topic).values()) == 2 * n, state.describe(topic)
    assert state.offsets_of(topic, group) == state.max_offsets_of(topic), state.describe(topic)
