"""The official 5.x Node.js client, ``rocketmq-client-nodejs`` 1.0.8, against the broker's gRPC
front (``apache.rocketmq.v2.MessagingService``, POP underneath): Producer (normal, FIFO, delay)
and SimpleConsumer (ack, changeInvisibleDuration, redelivery after the invisible time), and
mixing with the 5.x Python client and rocketlite's own Remoting client on one topic. Judged by
what the clients received and by the broker's store after it stopped.
"""

from __future__ import annotations

import asyncio
import signal

import pytest
from grpc_checks import (
    SHORT_LONG_POLLS,
    SHORT_MIN_INVISIBLE,
    SHORT_MIN_INVISIBLE_S,
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

READY_S = 20
DELAY_LATE_MS = 2000  # a due time in ms waits for the timer's next 1 s tick, plus a wake-up
REDELIVERY_S = 15  # a PushConsumer's failed message comes back (or is forwarded) within this


def test_node_producer_send_reaches_store_and_both_consumers(cx: Conformance) -> None:
    """Producer.send of N messages (two keys, tag, user properties): the store holds each once
    as sent, with the client's message id as UNIQ_KEY; a Node SimpleConsumer and rocketlite's
    Remoting consumer each receive all N exactly once, as sent."""
    n = 10
    topic = cx.name("N5_SEND")
    cx.create_topic(topic)
    p = cx.node5("produce", topic, cx.name("P"), "--n", str(n))
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n and all(e["msgId"] for e in sent), p.describe()

    c = cx.node5("simple_consume", topic, cx.name("GS"), "--expect", str(n), "--await-ms", "1000")
    got = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(got, "received"), "Node SimpleConsumer")
    assert_received_as_sent(sent, got, topic, "Node SimpleConsumer")
    assert {e["deliveryAttempt"] for e in got} == {1}, c.describe()

    remote = asyncio.run(remoting_consume(cx.broker.namesrv_addr, topic, cx.name("GR"),
                                          [e["key"] for e in sent]))
    assert_remoting_received(remote, sent, "rocketlite consumer of Node sends")
    state = cx.stop_broker()
    assert_stored_as_sent(state, topic, sent, "store")


@pytest.mark.orderly_groups("GF")
@pytest.mark.broker_conf({"transactionCheckInterval": "1000", "transactionTimeOut": "1000"})
def test_node_fifo_delay_and_transactions(cx: Conformance) -> None:
    """FIFO (3 message groups, FIFO topic, an orderly consumer group): a Node SimpleConsumer
    sees each group in send order.
    TRANSACTION: committed visible, rolled back never, UNKNOWN resolved (COMMIT) by the Node
    client's TransactionChecker through the Telemetry check.
    DELAY (deliveryTimestamp 2.5 s ahead, in milliseconds): a waiting Node SimpleConsumer
    receives each at or after its time, and before the timer's next 1 s tick has long passed."""
    n = 9
    fifo, delayed, txt = cx.name("N5_FIFO"), cx.name("N5_DELAY"), cx.name("N5_TX")
    cx.create_topic(fifo, message_type="FIFO")
    cx.create_topic(delayed)
    cx.create_topic(txt)
    fc = cx.node5("simple_consume", fifo, cx.name("GF"), "--expect", str(n), "--await-ms", "1000",
                  "--batch", "4")
    dc = cx.node5("simple_consume", delayed, cx.name("GD"), "--expect", "3", "--await-ms", "1000")
    tc = cx.node5("simple_consume", txt, cx.name("GT"), "--expect", "2", "--await-ms", "1000",
                  "--linger-ms", "2500")
    for proc in (fc, dc, tc):
        proc.wait_event("ready", READY_S)
    tp = cx.node5("produce", txt, cx.name("P"), "--n", "3", "--mode", "transaction",
                  "--tx", "commit,rollback,unknown", "--checker", "commit", "--wait-checks", "1")
    fp = cx.node5("produce", fifo, cx.name("P"), "--n", str(n), "--mode", "fifo", "--groups", "3")
    dp = cx.node5("produce", delayed, cx.name("P"), "--n", "3", "--mode", "delay",
                  "--delay-ms", "2500")
    fifo_sent = sent_of(fp.finish(FINISH_S))
    delay_sent = sent_of(dp.finish(FINISH_S))

    got = received_of(fc.finish(FINISH_S))
    assert_same_messages(pairs(fifo_sent, "sent"), pairs(first_deliveries(got), "received"),
                         "Node FIFO SimpleConsumer")
    assert_received_as_sent(fifo_sent, got, fifo, "Node FIFO SimpleConsumer")
    assert_fifo_order(got, "Node FIFO SimpleConsumer")

    got = received_of(dc.finish(FINISH_S))
    assert_same_messages(pairs(delay_sent, "sent"), pairs(got, "received"), "Node delayed")
    due = {e["key"]: e["dueMs"] for e in delay_sent}
    early = [(e["key"], e["recvMs"] - due[e["key"]]) for e in got if e["recvMs"] < due[e["key"]]]
    late = [(e["key"], e["recvMs"] - due[e["key"]]) for e in got
            if e["recvMs"] > due[e["key"]] + DELAY_LATE_MS]
    assert not early, f"delivered before their delivery time (ms early): {early}"
    assert not late, f"delivered more than {DELAY_LATE_MS} ms after their time: {late}"
    assert all(e["deliveryTimestamp"] == due[e["key"]] for e in got), (
        "the received deliveryTimestamp differs from the one sent (ms)", got)
    tx_events = tp.finish(FINISH_S)
    fate = {e["key"]: e["fate"] for e in sent_of(tx_events)}
    assert sorted(fate.values()) == ["commit", "rollback", "unknown"], tp.describe()
    assert {e["key"] for e in tp.of("checked")} == {k for k, f in fate.items() if f == "unknown"}
    got = received_of(tc.finish(FINISH_S))
    visible = [e for e in sent_of(tx_events) if fate[e["key"]] != "rollback"]
    assert_same_messages(pairs(visible, "sent"), pairs(got, "received"), "Node transactions")
    assert_received_as_sent(visible, got, txt, "Node transactions")

    state = cx.stop_broker()
    assert_stored_as_sent(state, txt, visible, "store (transactions)")
    assert_stored_as_sent(state, fifo, fifo_sent, "store (FIFO)")
    assert_stored_as_sent(state, delayed, delay_sent, "store (delayed)")


@pytest.mark.broker_conf(SHORT_MIN_INVISIBLE)
def test_node_simple_consumer_redelivery_and_change_invisible(cx: Conformance) -> None:
    """Node SimpleConsumer, two groups: one leaves each message unacked, which comes back after
    its invisible time (the least a receive may ask for: SHORT_MIN_INVISIBLE_S here, 10 s by
    default) with deliveryAttempt 2; one receives with 30 s and changes it to 2 s, so each
    comes back after about 2 s, not 30."""
    n = 4
    topic = cx.name("N5_POP")
    cx.create_topic(topic)
    p = cx.node5("produce", topic, cx.name("P"), "--n", str(n))
    sent = sent_of(p.finish(FINISH_S))
    keys = [e["key"] for e in sent]
    common = ("--expect", str(n), "--await-ms", "1000")
    skipper = cx.node5("simple_consume", topic, cx.name("GK"), *common, "--first", "skip",
                       "--invisible-ms", str(SHORT_MIN_INVISIBLE_S * 1000))
    changer = cx.node5("simple_consume", topic, cx.name("GC"), *common, "--first", "change",
                       "--invisible-ms", "30000", "--change-to-ms", "2000")
    skipped = received_of(skipper.finish(FINISH_S))
    assert_redelivered(skipped, keys, SHORT_MIN_INVISIBLE_S * 1000 - 500,
                       SHORT_MIN_INVISIBLE_S * 1000 + 6000, "unacked messages")
    assert_received_as_sent(sent, skipped, topic, "redelivered messages")
    changed = received_of(changer.finish(FINISH_S))
    assert len(changer.of("changed")) == n, changer.describe()
    assert_redelivered(changed, keys, 1500, 8000, "messages whose invisible time was changed")


def test_node_python_and_remoting_clients_mix_on_one_topic(cx: Conformance) -> None:
    """One topic, three producers (Node 5.x, Python 5.x, rocketlite over Remoting): a Node
    SimpleConsumer receives all their messages as sent, and so does rocketlite's Remoting
    consumer."""
    n = 4
    topic = cx.name("N5_MIX")
    cx.create_topic(topic)
    remote_sent = asyncio.run(remoting_produce(cx.broker.namesrv_addr, cx.name("PR"), topic,
                                               f"{cx.run_id}-r", n))
    node_sent = sent_of(cx.node5("produce", topic, cx.name("P"), "--n", str(n)).finish(FINISH_S))
    py = cx.g5py("produce", topic, cx.name("P"), "--n", str(n), "--start", str(n))
    py_sent = sent_of(py.finish(FINISH_S))
    sent = node_sent + py_sent + remote_sent

    c = cx.node5("simple_consume", topic, cx.name("GS"), "--expect", str(len(sent)),
                 "--await-ms", "1000")
    got = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(got, "received"), "Node consumer of all three")
    assert_received_as_sent(sent, got, topic, "Node consumer of all three")

    remote = asyncio.run(remoting_consume(cx.broker.namesrv_addr, topic, cx.name("GR"),
                                          [e["key"] for e in sent]))
    assert_remoting_received(remote, sent, "Remoting consumer of all three")
    state = cx.stop_broker()
    assert_stored_as_sent(state, topic, sent, "store")



def _redelivered(n: int):  # type: ignore[no-untyped-def]
    """A wait_for predicate: n deliveries the listener returned SUCCESS for."""
    return lambda events: sum(1 for e in events
                              if e["event"] == "received" and not e["fail"]) >= n


@pytest.mark.broker_conf(SHORT_LONG_POLLS)
def test_node_push_consumer_listener_fails_once_then_succeeds(cx: Conformance) -> None:
    """Node PushConsumer whose listener returns FAILURE on each message's first delivery: each
    message is delivered again with deliveryAttempt 2 and then succeeds; nothing arrives a third
    time, and the group's offsets reach the end of every queue.

    The 1.0.8 client reads only an exponential backoff policy from Settings; the server's
    customized one (the group default, as Apache's proxy sends it) leaves it with none, so it
    answers a FAILURE with ChangeInvisibleDuration(0 ms): visible again at once. Apache's proxy
    and broker accept 0 ms (``GrpcValidator.validateInvisibleTime``: minimum 0)."""
    n = 4
    topic, group = cx.name("N5_PUSH"), cx.name("GP")
    cx.create_topic(topic)
    c = cx.node5("push_consume", topic, group, "--expect", str(n), "--fail-times", "1",
                 "--linger-ms", "1000")
    c.wait_event("ready", READY_S)
    p = cx.node5("produce", topic, cx.name("P"), "--n", str(n))
    sent = sent_of(p.finish(FINISH_S))
    c.wait_for(_redelivered(n), REDELIVERY_S,
               f"second delivery of all {n} messages after the listener's FAILURE (the client "
               "changes each one's invisible time to 0 ms; an error answer to that is retried "
               "every second and never logged)")
    events = c.finish(FINISH_S)
    got = received_of(events)
    by_key = deliveries_by_key(got)
    assert sorted(by_key) == sorted(e["key"] for e in sent), c.describe()
    for key, ds in by_key.items():
        assert [d["fail"] for d in ds] == [True, False], (key, ds)
        assert [d["deliveryAttempt"] for d in ds] == [1, 2], (key, ds)
        assert len({d["msgId"] for d in ds}) == 1, (key, ds)
    assert_received_as_sent(sent, got, topic, "Node push consumer")
    assert c.of("done")[0]["close"] == "closed", c.describe()
    state = cx.stop_broker()
    assert state.offsets_of(topic, group) == state.max_offsets_of(topic), state.describe(topic)


@pytest.mark.orderly_groups("GFP", "GFD")
@pytest.mark.broker_conf(SHORT_LONG_POLLS)
def test_node_fifo_push_consumer_order_and_failure_to_dlq(cx: Conformance) -> None:
    """FIFO PushConsumer (FIFO topic, 3 message groups, orderly consumer groups): a listener
    that always succeeds sees each group's messages in send order, each once (deliveryAttempt 1),
    and the group's offsets reach the end of every queue.

    A listener that fails each message's first delivery: the 1.0.8 client, left without a retry
    policy by the server's customized backoff (see the test above), takes max attempts as 1, so
    it does not re-run the listener but forwards each message to ``%DLQ%<group>`` at once
    (ForwardMessageToDeadLetterQueue): each arrives once, in group order, and the DLQ holds them
    all, whole."""
    n = 9
    topic, g_ok, g_dlq = cx.name("N5_FIFO_PUSH"), cx.name("GFP"), cx.name("GFD")
    cx.create_topic(topic, message_type="FIFO")
    ok = cx.node5("push_consume", topic, g_ok, "--expect", str(n), "--linger-ms", "500")
    failing = cx.node5("push_consume", topic, g_dlq, "--expect", "0", "--fail-times", "1",
                       "--linger-ms", "60000")
    for proc in (ok, failing):
        proc.wait_event("ready", READY_S)
    p = cx.node5("produce", topic, cx.name("P"), "--n", str(n), "--mode", "fifo", "--groups", "3")
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n, p.describe()
    failing.wait_for(lambda events: sum(1 for e in events if e["event"] == "received") >= n,
                     REDELIVERY_S, f"first delivery of all {n} messages to the failing listener")
    failing.proc.send_signal(signal.SIGTERM)  # both shut down (<= 5 s: the long polls) at once

    got = received_of(ok.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(got, "received"), "Node FIFO PushConsumer")
    assert_received_as_sent(sent, got, topic, "Node FIFO PushConsumer")
    assert_fifo_order(got, "Node FIFO PushConsumer")
    assert {e["deliveryAttempt"] for e in got} == {1}, ok.describe()

    got = received_of(failing.stop(FINISH_S))  # its shutdown waits for the forwards to settle
    assert_same_messages(pairs(sent, "sent"), pairs(got, "received"), "failing FIFO listener")
    assert_fifo_order(got, "failing FIFO listener")
    assert all(e["fail"] and e["deliveryAttempt"] == 1 for e in got), failing.describe()
    dlq = f"%DLQ%{g_dlq}"
    state = cx.stop_broker()
    assert state.offsets_of(topic, g_ok) == state.max_offsets_of(topic), state.describe(topic)
    assert {stored_keys(m)[0]: m.body for m in state.messages_of(dlq)} == {
        e["key"]: e["body"] for e in sent}, state.describe(dlq)
