"""The official 5.x Python client, ``rocketmq-python-client==5.1.2`` (its own venv), against the
broker's gRPC front (``apache.rocketmq.v2.MessagingService``, POP underneath): Producer (normal,
FIFO, delay, transactions with the orphaned-transaction check on the Telemetry stream),
SimpleConsumer (ack, change_invisible_duration, redelivery after the invisible time) and
PushConsumer (a listener that fails once), and mixing with rocketlite's own Remoting client on one
topic. Judged by what the clients received and by the broker's store after it stopped.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from grpc_checks import (
    SHORT_MIN_INVISIBLE,
    SHORT_MIN_INVISIBLE_S,
    assert_fifo_blocked,
    assert_fifo_order,
    assert_received_as_sent,
    assert_redelivered,
    assert_remoting_received,
    assert_stored_as_sent,
    deliveries_by_key,
    first_deliveries,
    remoting_consume,
    remoting_produce,
    stored_keys,
)
from harness import FINISH_S, Conformance, assert_same_messages, pairs, received_of, sent_of

pytestmark = pytest.mark.conformance

READY_S = 20  # a scenario's client is up (QueryRoute, Telemetry settings) within this
DELAY_LATE_MS = 1500  # a delayed message arrives within its second, plus a long-poll wake-up
MIN_INVISIBLE_S = 10  # the front's minInvisibleTimeMillsForRecv (Apache's proxy default)


def test_producer_send_reaches_store_grpc_and_remoting_consumers(cx: Conformance) -> None:
    """Producer.send of N messages (two keys, tag, user properties): each send answers OK with
    the client's message id; the store holds each once with its body, tag, keys, properties and
    that id as UNIQ_KEY; a gRPC SimpleConsumer and rocketlite's Remoting consumer each receive
    all N exactly once, as sent."""
    n = 10
    topic = cx.name("G5_SEND")
    cx.create_topic(topic)
    p = cx.g5py("produce", topic, cx.name("P"), "--n", str(n))
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n and all(e["msgId"] for e in sent), p.describe()

    c = cx.g5py("simple_consume", topic, cx.name("GS"), "--expect", str(n), "--await-s", "1")
    got = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(got, "received"), "gRPC SimpleConsumer")
    assert_received_as_sent(sent, got, topic, "gRPC SimpleConsumer")
    assert {e["deliveryAttempt"] for e in got} == {1}, c.describe()

    remote = asyncio.run(remoting_consume(cx.broker.namesrv_addr, topic, cx.name("GR"),
                                          [e["key"] for e in sent]))
    assert_remoting_received(remote, sent, "rocketlite consumer of gRPC sends")

    state = cx.stop_broker()
    assert_stored_as_sent(state, topic, sent, "store")


@pytest.mark.orderly_groups("GFS", "GFP", "GFB")
def test_fifo_groups_arrive_in_order(cx: Conformance) -> None:
    """FIFO: messages with a message_group (3 groups) on a FIFO topic, consumed by orderly
    consumer groups (consumeMessageOrderly, as ``updateSubGroup -o true``); a SimpleConsumer and a
    PushConsumer (two consumer groups) each see every group's messages in send order, each
    message with its group; a third group's SimpleConsumer leaves every first delivery unacked
    (invisible time changed to 1 s) and gets no message of a group before the one ahead of it
    was acked."""
    n = 15
    topic = cx.name("G5_FIFO")
    cx.create_topic(topic, message_type="FIFO")
    simple = cx.g5py("simple_consume", topic, cx.name("GFS"), "--expect", str(n),
                     "--await-s", "1", "--batch", "4")
    push = cx.g5py("push_consume", topic, cx.name("GFP"), "--expect", str(n))
    blocked = cx.g5py("simple_consume", topic, cx.name("GFB"), "--expect", str(n),
                      "--await-s", "1", "--batch", "1", "--first", "change", "--change-to-s", "1")
    for proc in (simple, push, blocked):
        proc.wait_event("ready", READY_S)
    p = cx.g5py("produce", topic, cx.name("P"), "--n", str(n), "--mode", "fifo", "--groups", "3")
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n, p.describe()
    for proc, label in ((simple, "FIFO SimpleConsumer"), (push, "FIFO PushConsumer")):
        got = received_of(proc.finish(FINISH_S))
        assert_same_messages(pairs(sent, "sent"), pairs(first_deliveries(got), "received"), label)
        assert_received_as_sent(sent, got, topic, label)
        assert_fifo_order(got, label)
    got = received_of(blocked.finish(FINISH_S))
    assert_fifo_blocked(got, "FIFO SimpleConsumer leaving first deliveries unacked")
    state = cx.stop_broker()
    assert_stored_as_sent(state, topic, sent, "store")


def test_delayed_messages_arrive_in_their_second_never_early(cx: Conformance) -> None:
    """DELAY: delivery_timestamp 2-3 s ahead (the 5.1.2 client sends it in whole seconds); a
    waiting SimpleConsumer receives each message at or after that time, within its second."""
    n = 3
    topic = cx.name("G5_DELAY")
    cx.create_topic(topic)
    c = cx.g5py("simple_consume", topic, cx.name("GD"), "--expect", str(n), "--await-s", "1")
    c.wait_event("ready", READY_S)
    p = cx.g5py("produce", topic, cx.name("P"), "--n", str(n), "--mode", "delay", "--delay-s", "3")
    sent = sent_of(p.finish(FINISH_S))
    got = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(got, "received"), "delayed messages")
    due = {e["key"]: e["dueMs"] for e in sent}
    assert all(due[e["key"]] - e["sentMs"] >= 1900 for e in sent), sent  # really ahead
    early = [(e["key"], e["recvMs"] - due[e["key"]]) for e in got if e["recvMs"] < due[e["key"]]]
    late = [(e["key"], e["recvMs"] - due[e["key"]]) for e in got
            if e["recvMs"] > due[e["key"]] + DELAY_LATE_MS]
    assert not early, f"delivered before their delivery time (ms early): {early}"
    assert not late, f"delivered more than {DELAY_LATE_MS} ms after their time: {late}"
    assert all(e["deliveryTimestamp"] == due[e["key"]] for e in got), (
        "the received delivery_timestamp differs from the one sent", got)


@pytest.mark.broker_conf({"transactionCheckInterval": "1000", "transactionTimeOut": "1000"})
def test_transactions_commit_rollback_and_orphan_check(cx: Conformance) -> None:
    """TRANSACTION: a committed half message becomes visible, a rolled back one never does, and
    one left UNKNOWN is resolved (COMMIT) by the client's TransactionChecker when the broker's
    check reaches it through the Telemetry stream (recover_orphaned_transaction_command)."""
    topic = cx.name("G5_TX")
    cx.create_topic(topic)
    c = cx.g5py("simple_consume", topic, cx.name("GT"), "--expect", "2", "--await-s", "1",
                "--linger-ms", "2500")
    c.wait_event("ready", READY_S)
    p = cx.g5py("produce", topic, cx.name("P"), "--n", "3", "--mode", "transaction",
                "--tx", "commit,rollback,unknown", "--checker", "commit", "--wait-checks", "1")
    events = p.finish(FINISH_S)
    fate = {e["key"]: e["fate"] for e in sent_of(events)}
    assert sorted(fate.values()) == ["commit", "rollback", "unknown"], p.describe()
    assert all(e["txId"] for e in sent_of(events)), "a half message's send answered no txId"
    checked = {e["key"] for e in p.of("checked")}
    assert checked == {k for k, f in fate.items() if f == "unknown"}, (
        f"the checker was asked about {checked}, fates {fate}\n{p.describe()}")

    got = received_of(c.finish(FINISH_S))
    visible = {k for k, f in fate.items() if f != "rollback"}
    assert_same_messages([(k, b) for k, b in pairs(sent_of(events), "sent") if k in visible],
                         pairs(got, "received"), "transactional messages")
    assert_received_as_sent(sent_of(events), got, topic, "transactional messages")

    state = cx.stop_broker()
    in_topic = {stored_keys(m)[0] for m in state.messages_of(topic)}
    assert in_topic == visible, f"the topic holds {in_topic}, {visible} expected"


@pytest.mark.broker_conf(SHORT_MIN_INVISIBLE)
def test_simple_consumer_ack_change_invisible_and_redelivery(cx: Conformance) -> None:
    """SimpleConsumer, three groups on one topic: one acks on receipt (each message once); one
    leaves each message unacked, which comes back after its invisible time (the least a receive
    may ask for: SHORT_MIN_INVISIBLE_S here, 10 s by default) with delivery_attempt 2; one
    receives with 30 s and changes it to 2 s, so each comes back after about 2 s, not 30."""
    n = 4
    topic = cx.name("G5_POP")
    cx.create_topic(topic)
    p = cx.g5py("produce", topic, cx.name("P"), "--n", str(n))
    sent = sent_of(p.finish(FINISH_S))
    keys = [e["key"] for e in sent]
    common = ("--expect", str(n), "--await-s", "1")
    acker = cx.g5py("simple_consume", topic, cx.name("GA"), *common)
    skipper = cx.g5py("simple_consume", topic, cx.name("GK"), *common, "--first", "skip",
                      "--invisible-s", str(SHORT_MIN_INVISIBLE_S))
    changer = cx.g5py("simple_consume", topic, cx.name("GC"), *common, "--first", "change",
                      "--invisible-s", "30", "--change-to-s", "2")
    got = received_of(acker.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(got, "received"), "acking consumer")
    assert {e["deliveryAttempt"] for e in got} == {1}
    skipped = received_of(skipper.finish(FINISH_S))
    assert_redelivered(skipped, keys, SHORT_MIN_INVISIBLE_S * 1000 - 500,
                       SHORT_MIN_INVISIBLE_S * 1000 + 6000, "unacked messages")
    assert_received_as_sent(sent, skipped, topic, "redelivered messages")
    changed = received_of(changer.finish(FINISH_S))
    assert len(changer.of("changed")) == n, changer.describe()
    assert_redelivered(changed, keys, 1500, 8000, "messages whose invisible time was changed")


@pytest.mark.broker_conf({"flushConsumerOffsetInterval": "300"})
def test_pop_state_survives_a_broker_sigkill(cx: Conformance) -> None:
    """POP after a crash: a SimpleConsumer receives 4 messages (invisible 10 s), acks the even
    ones and leaves the odd ones; once the consumer offsets were flushed (every 300 ms here) the
    broker is SIGKILLed and started again on its store; a new SimpleConsumer of the group gets
    the odd ones back after their invisible time, attempt 2, and not the acked ones."""
    n = 4
    topic, group = cx.name("G5_KILL"), cx.name("GK")
    cx.create_topic(topic)
    sent = sent_of(cx.g5py("produce", topic, cx.name("P"), "--n", str(n)).finish(FINISH_S))
    c1 = cx.g5py("simple_consume", topic, group, "--expect", str(n), "--first", "odd",
                 "--invisible-s", str(MIN_INVISIBLE_S), "--await-s", "1")
    first = received_of(c1.finish(FINISH_S))
    assert sorted((e["key"], e["deliveryAttempt"]) for e in first) == [
        (e["key"], 1) for e in sorted(sent, key=lambda e: e["key"])], c1.describe()
    odd = sorted(e["key"] for e in sent if int(e["key"].rsplit("-", 1)[1]) % 2)
    time.sleep(1.0)  # a few flushConsumerOffsetInterval: the popped offsets are on disk
    cx.kill_and_restart_broker()

    c2 = cx.g5py("simple_consume", topic, group, "--expect", str(len(odd)), "--await-s", "1")
    again = received_of(c2.finish(FINISH_S))
    back = {e["key"]: e for e in again}
    assert sorted(back) == odd, f"after the restart the group got {sorted(back)}, {odd} expected"
    first_ms = {e["key"]: e["recvMs"] for e in first}
    for key, e in back.items():
        assert e["deliveryAttempt"] == 2, e
        assert e["recvMs"] - first_ms[key] >= MIN_INVISIBLE_S * 1000 - 500, (
            f"{key} came back {e['recvMs'] - first_ms[key]} ms after its first delivery")
    assert_received_as_sent(sent, again, topic, "messages back after the restart")


def test_push_consumer_listener_fails_once_then_succeeds(cx: Conformance) -> None:
    """PushConsumer whose listener returns FAILURE on each message's first delivery: each message
    is delivered again (delivery_attempt 2) and then succeeds; nothing arrives a third time."""
    n = 4
    topic = cx.name("G5_PUSH")
    cx.create_topic(topic)
    c = cx.g5py("push_consume", topic, cx.name("GP"), "--expect", str(n), "--fail-times", "1",
                "--linger-ms", "1000")
    c.wait_event("ready", READY_S)
    p = cx.g5py("produce", topic, cx.name("P"), "--n", str(n))
    sent = sent_of(p.finish(FINISH_S))
    got = received_of(c.finish(FINISH_S))
    by_key = deliveries_by_key(got)
    assert sorted(by_key) == sorted(e["key"] for e in sent), c.describe()
    for key, ds in by_key.items():
        assert [d["fail"] for d in ds] == [True, False], (key, ds)
        assert [d["deliveryAttempt"] for d in ds] == [1, 2], (key, ds)
    assert_received_as_sent(sent, got, topic, "push consumer")


@pytest.mark.group_conf({"GDLQ": {"retryMaxTimes": 1}})
def test_push_consumer_always_failing_ends_in_the_dlq(cx: Conformance) -> None:
    """maxReconsumeTimes: a group with retryMaxTimes 1 (Settings: 2 delivery attempts) whose
    PushConsumer listener always fails: each message is delivered twice, never a third time, and
    ends in %DLQ%<group> whole, where a Remoting consumer reads it."""
    n = 3
    topic, group = cx.name("G5_DLQ"), cx.name("GDLQ")
    cx.create_topic(topic)
    c = cx.g5py("push_consume", topic, group, "--expect", "0", "--fail-times", "1000",
                "--linger-ms", "60000")
    c.wait_event("ready", READY_S)
    sent = sent_of(cx.g5py("produce", topic, cx.name("P"), "--n", str(n)).finish(FINISH_S))
    dlq = f"%DLQ%{group}"
    remote = asyncio.run(remoting_consume(cx.broker.namesrv_addr, dlq, cx.name("GR"),
                                          [e["key"] for e in sent]))
    got = received_of(c.stop(FINISH_S))
    for key, ds in deliveries_by_key(got).items():
        assert [(d["deliveryAttempt"], d["fail"]) for d in ds] == [(1, True), (2, True)], (key, ds)
    assert sorted(deliveries_by_key(got)) == sorted(e["key"] for e in sent), c.describe()
    assert sorted(min(m.keys) for m in remote) == sorted(e["key"] for e in sent)
    assert {min(m.keys): m.body.decode() for m in remote} == {e["key"]: e["body"] for e in sent}
    state = cx.stop_broker()
    assert sorted(stored_keys(m)[0] for m in state.messages_of(dlq)) == sorted(
        e["key"] for e in sent), state.describe(dlq)


def test_remoting_and_grpc_clients_mix_on_one_topic(cx: Conformance) -> None:
    """Mixing 4.x and 5.x on one topic: rocketlite's Remoting producer's messages reach a gRPC
    SimpleConsumer, and the gRPC Producer's messages reach rocketlite's Remoting push consumer,
    each with body, tag, keys, properties and message id."""
    n = 6
    topic = cx.name("G5_MIX")
    cx.create_topic(topic)
    remote_run = f"{cx.run_id}-r"  # keys <run>-r-<i>: the scenarios count them as their run's
    remote_sent = asyncio.run(remoting_produce(cx.broker.namesrv_addr, cx.name("PR"), topic,
                                               remote_run, n))
    g = cx.g5py("produce", topic, cx.name("P"), "--n", str(n))
    grpc_sent = sent_of(g.finish(FINISH_S))

    c = cx.g5py("simple_consume", topic, cx.name("GS"), "--expect", str(2 * n), "--await-s", "1")
    got = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(grpc_sent + remote_sent, "sent"), pairs(got, "received"),
                         "gRPC consumer of both producers")
    from_remoting = [e for e in got if e["key"].startswith(f"{remote_run}-")]
    assert_received_as_sent(remote_sent, from_remoting, topic, "gRPC consumer of Remoting sends")
    assert_received_as_sent(grpc_sent, got, topic, "gRPC consumer of gRPC sends")

    remote = asyncio.run(remoting_consume(cx.broker.namesrv_addr, topic, cx.name("GR"),
                                          [e["key"] for e in grpc_sent + remote_sent]))
    assert_remoting_received(remote, grpc_sent + remote_sent, "Remoting consumer of both")
    state = cx.stop_broker()
    assert_stored_as_sent(state, topic, grpc_sent + remote_sent, "store")
