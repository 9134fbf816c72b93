"""Half messages without a local transaction (``HalfProducer.send_half`` / ``end``) and preset
UNIQ_KEYs, against a real broker on loopback: a half message is invisible until its receipt is
committed (possibly by another producer, from a pickled receipt), a rolled-back one never shows,
a repeated END is a no-op, and a receipt that names no half message is refused."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest
from clientconf import Cluster, eventually

from rocketlite.broker.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.message import Message, decode_messages
from rocketlite.client.producer import Producer, SendStatus
from rocketlite.client.transaction import HalfProducer
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.bodies import MessageQueue

pytestmark = pytest.mark.integration
TOPIC = "HalfTopic"


def visible(cluster: Cluster, topic: str = TOPIC, queues: int = 4) -> list[tuple[bytes, str, int]]:
    """(body, UNIQ_KEY, queue id) of every message stored in ``topic``, by queue then offset."""
    store = cluster.brokers["broker-a"].store
    out = []
    for q in range(queues):
        res = store.get_message(topic, q, 0, 1000)
        out += [(m.body, m.properties["UNIQ_KEY"], q) for m in decode_messages(b"".join(res.messages))]
    return out


async def started(cluster: Cluster, group: str = "HalfGroup") -> HalfProducer:
    cluster.brokers["broker-a"].topics.create_plain(TOPIC, 4)
    await cluster.brokers["broker-a"].register_all()
    p = HalfProducer(group, namesrv_addr=cluster.ns_addr)
    await p.start()
    return p


async def test_half_is_invisible_until_committed_by_another_producer(cluster: Cluster) -> None:
    p = await started(cluster)
    other = HalfProducer("AnyGroup", namesrv_addr=cluster.ns_addr)
    await other.start()
    try:
        mq = MessageQueue(TOPIC, "broker-a", 2)
        r = await p.send_half(Message(TOPIC, b"later", uniq_key="0123456789ABCDEF0123456789ABCDEF"), mq)
        assert r.status is SendStatus.SEND_OK and r.msg_id == "0123456789ABCDEF0123456789ABCDEF"
        assert (r.topic, r.queue_id, r.producer_group) == (TOPIC, 2, "HalfGroup")
        assert r.broker_addr == cluster.addr()
        broker = cluster.brokers["broker-a"]
        assert broker.store.max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 1
        assert visible(cluster) == []
        # The receipt is plain data: another process (here: producer) can decide.
        await other.end(pickle.loads(pickle.dumps(r)), True)
        await eventually(lambda: visible(cluster) == [(b"later", r.msg_id, 2)])
        await other.end(r, True)  # a repeat is a no-op
        await p.end(r, False)  # and so is a late rollback
        assert broker.transactions.end.commits == 1
        assert visible(cluster) == [(b"later", r.msg_id, 2)]
    finally:
        await other.shutdown()
        await p.shutdown()


async def test_rolled_back_half_never_shows_and_bad_receipts_are_refused(cluster: Cluster) -> None:
    p = await started(cluster)
    try:
        r = await p.send_half(Message(TOPIC, b"never"))
        await p.end(r, False)
        await p.end(r, True)  # resolved already: the commit is ignored
        assert cluster.brokers["broker-a"].transactions.end.commits == 0
        assert visible(cluster) == []
        plain = await p.send(Message(TOPIC, b"plain"))
        bad = dataclasses.replace(r, commit_log_offset=r.commit_log_offset + 10_000_000)
        with pytest.raises(MQBrokerError, match="no message"):
            await p.end(bad, True)
        with pytest.raises(MQClientError, match="delivery time"):
            await p.send_half(Message(TOPIC, b"t", deliver_time_ms=1))
        assert [b for b, _, _ in visible(cluster)] == [b"plain"]
        assert plain.msg_id != r.msg_id
    finally:
        await p.shutdown()


async def test_preset_uniq_keys_on_plain_and_batch_sends(cluster: Cluster) -> None:
    await (await started(cluster)).shutdown()
    p = Producer("PlainGroup", namesrv_addr=cluster.ns_addr)
    await p.start()
    try:
        mq = MessageQueue(TOPIC, "broker-a", 0)
        one = await p.send(Message(TOPIC, b"a", uniq_key="KEY-A"), mq)
        batch = await p.send_batch([Message(TOPIC, b"b", uniq_key="KEY-B"),
                                    Message(TOPIC, b"c", uniq_key="KEY-C")], mq)
        assert one.msg_id == "KEY-A" and batch.msg_id == "KEY-B,KEY-C"
        await eventually(lambda: len(visible(cluster)) == 3)
        assert visible(cluster) == [(b"a", "KEY-A", 0), (b"b", "KEY-B", 0), (b"c", "KEY-C", 0)]
        with pytest.raises(MQClientError, match="uniq_key"):
            await p.send(Message(TOPIC, b"x", uniq_key="has space"))
        with pytest.raises(MQClientError, match="uniq_key"):
            await p.send(Message(TOPIC, b"x", uniq_key=""))
    finally:
        await p.shutdown()


async def test_an_online_half_producer_leaves_checks_unanswered(tmp_path: Path) -> None:
    """Nobody ends a half message (its task died): the broker asks the online producer of its
    group, which does not answer, so after transactionCheckMax checks it lands in
    TRANS_CHECK_MAX_TIME_TOPIC without ever becoming visible. A late commit still applies."""
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    cluster = Cluster(tmp_path, ns)
    try:
        broker = await cluster.start_broker("broker-a", transactionTimeOut="1",
                                            transactionCheckInterval="100", transactionCheckMax="2")
        p = await started(cluster)
        try:
            r = await p.send_half(Message(TOPIC, b"orphan"))
            stats = broker.transactions.check.stats
            await eventually(lambda: stats.check_max == 1)
            assert stats.checks_sent == 2 and stats.no_producer == 0  # asked, never answered
            assert broker.transactions.end.commits == broker.transactions.end.rollbacks == 0
            assert visible(cluster) == []
            assert broker.store.max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0) == 1
            await p.end(r, True)  # a commit long overdue (a slow Spark batch) still applies
            await eventually(lambda: visible(cluster) == [(b"orphan", r.msg_id, r.queue_id)])
        finally:
            await p.shutdown()
    finally:
        await cluster.close()
