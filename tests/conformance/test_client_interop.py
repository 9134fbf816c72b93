"""rocketlite's own client (``rocketlite.client``) against the third-party Node.js client ali-ons
3.12.0, both ways, through one real broker process: what one client sends the other receives,
exactly once, with the same bodies, keys and tag; the broker's files after it stopped hold the
messages as sent and the consumer group's committed offsets at the queue ends.

The rocketlite side runs in this process, in its own event loop (``asyncio.run``), never at the
same time as a blocking wait on an ali-ons script; each side has a deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from harness import FINISH_S, Conformance, Event, assert_same_messages, pairs, received_of, sent_of

from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer, SendStatus
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.protocol.bodies import ConsumeFromWhere

pytestmark = pytest.mark.conformance

RECEIVE_DEADLINE_S = 60.0
LINGER_S = 1.5  # after the expected messages arrived, extras (duplicates), if any, arrive now
BIG_BODY_BYTES = 6000  # over the producer's compress_over (4096): sent zlib-compressed


def fast_config(namesrv: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, rebalance_interval=1.0, persist_offset_interval=1.0,
                        heartbeat_interval=2.0)


async def consume_with_rocketlite(namesrv: str, topic: str, group: str, n: int) -> list[MessageExt]:
    """A rocketlite PushConsumer from the first offset until it has ``n`` distinct keys (then
    ``LINGER_S`` more), or until the deadline; shutdown commits the offsets."""
    got: list[MessageExt] = []
    keys: set[str] = set()
    enough = asyncio.Event()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        for m in msgs:
            if m.topic == topic:
                got.append(m)
                keys.update(m.keys)
        if len(keys) >= n:
            enough.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(group, config=fast_config(namesrv),
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "*")
    c.register_listener(listener)
    await c.start()
    try:
        try:
            await asyncio.wait_for(enough.wait(), RECEIVE_DEADLINE_S)
        except TimeoutError:
            raise AssertionError(f"rocketlite PushConsumer: {len(keys)} of {n} distinct keys within "
                                 f"{RECEIVE_DEADLINE_S} s; queues {sorted(map(str, c.queues))}") from None
        await asyncio.sleep(LINGER_S)
    finally:
        await asyncio.wait_for(c.shutdown(), 20)
    return got


async def produce_with_rocketlite(namesrv: str, group: str, messages: list[Message]) -> list[Event]:
    """Send ``messages`` one at a time with rocketlite's Producer; 'sent' events like produce.js."""
    sent: list[Event] = []
    async with Producer(group, namesrv_addr=namesrv) as p:
        for m in messages:
            r = await asyncio.wait_for(p.send(m), 15)
            assert r.status is SendStatus.SEND_OK, r
            sent.append({"event": "sent", "key": m.key_list()[0], "body": m.body.decode(),
                         "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
                         "queueId": r.queue.queueId, "queueOffset": r.queue_offset})
    return sent


def body_for(run_id: str, i: int, big: bool = False) -> str:
    """As conformance/ali-ons/common.js bodyFor: non-ASCII text, and some over 4 KiB."""
    body = f"rocketlite interop {run_id} #{i} — 消息"
    j = 0
    while big and len(body.encode()) < BIG_BODY_BYTES:
        body += f" {run_id}:{i}:{j}"
        j += 1
    return body


def test_ali_ons_producer_to_rocketlite_push_consumer(cx: Conformance) -> None:
    """ali-ons sends N messages (key each, tag, every 10th over 4 KiB and zlib-compressed by
    ali-ons); rocketlite's async PushConsumer from the first offset receives exactly those N, with
    their keys, tag, msgIds and queue places; its shutdown commits the offsets at the queue ends."""
    n, tag = 30, "TagIn"
    topic, group = cx.name("INTEROP_IN"), cx.name("GID_RL")
    cx.create_topic(topic)
    p = cx.ons("produce", topic, cx.name("PID"), "--n", str(n), "--tag", tag, "--big-every", "10")
    sent = sent_of(p.finish(FINISH_S))
    assert len(sent) == n, f"the producer reported {len(sent)} of {n} sends\n{p.describe()}"

    t0 = time.monotonic()
    got = asyncio.run(consume_with_rocketlite(cx.broker.namesrv_addr, topic, group, n))
    assert time.monotonic() - t0 < RECEIVE_DEADLINE_S + 30

    assert all(len(m.keys) == 1 for m in got), [m.keys for m in got]
    received = [(m.keys[0], m.body.decode("utf-8")) for m in got]
    assert_same_messages(pairs(sent, "sent"), received, "rocketlite PushConsumer")
    assert {m.tags for m in got} == {tag}
    assert {m.keys[0]: m.msg_id for m in got} == {e["key"]: e["msgId"] for e in sent}, (
        "a received message's msgId differs from the one ali-ons's send returned")
    assert {m.keys[0]: (m.queue_id, m.queue_offset) for m in got} == {
        e["key"]: (e["queueId"], e["queueOffset"]) for e in sent}
    assert sum(1 for m in got if m.sys_flag & 0x1) == n // 10, "ali-ons compresses bodies over 4 KiB"

    state = cx.stop_broker()
    stored = state.messages_of(topic)
    assert sorted((m.key, m.body) for m in stored) == sorted(pairs(sent, "sent")), state.describe(topic)
    assert {m.properties.get("TAGS") for m in stored} == {tag}
    assert {q: k for q, k in state.units_of(topic).items() if k} == dict(
        Counter(e["queueId"] for e in sent)), state.describe(topic)
    assert state.offsets_of(topic, group) == state.max_offsets_of(topic), state.describe(topic)


def test_rocketlite_producer_to_ali_ons_push_consumer(cx: Conformance) -> None:
    """rocketlite's Producer sends N messages (key each, tag; one body over 4 KiB, which it
    zlib-compresses); an ali-ons push consumer from the first offset receives exactly those N,
    decompressed, with their keys, tag, offset msgIds and queue places, and commits the queue ends."""
    n, tag = 30, "TagOut"
    topic, group = cx.name("INTEROP_OUT"), cx.name("GID_ONS")
    cx.create_topic(topic)
    big = {7}
    messages = [Message(topic, body_for(cx.run_id, i, i in big).encode(), tags=tag,
                        keys=f"{cx.run_id}-{i}") for i in range(n)]
    assert all(len(messages[i].body) >= 4096 for i in big)
    sent = asyncio.run(asyncio.wait_for(
        produce_with_rocketlite(cx.broker.namesrv_addr, cx.name("PID_RL"), messages), 60))
    assert len(sent) == n

    c = cx.ons("consume", topic, group, "--consume-from", "FIRST", "--expect", str(n))
    received = received_of(c.finish(FINISH_S))
    assert_same_messages(pairs(sent, "sent"), pairs(received, "received"), "ali-ons consumer")
    assert {e["tags"] for e in received} == {tag}, c.describe()
    # ali-ons 3.12.0 gives a received message the broker's offset msgId (it ignores UNIQ_KEY)
    assert {e["key"]: e["msgId"] for e in received} == {e["key"]: e["offsetMsgId"] for e in sent}, (
        "a received message's msgId differs from the offset msgId rocketlite's send returned")
    assert {e["key"]: (e["queueId"], int(e["queueOffset"])) for e in received} == {
        e["key"]: (e["queueId"], e["queueOffset"]) for e in sent}

    state = cx.stop_broker()
    stored = state.messages_of(topic)
    assert sorted((m.key, m.body) for m in stored) == sorted(pairs(sent, "sent")), state.describe(topic)
    assert sorted(m.key for m in stored if m.sys_flag & 0x1) == [f"{cx.run_id}-{i}" for i in sorted(big)], (
        "the big body must be stored zlib-compressed, as sent")
    assert {m.properties.get("TAGS") for m in stored} == {tag}
    assert state.offsets_of(topic, group) == state.max_offsets_of(topic), state.describe(topic)
