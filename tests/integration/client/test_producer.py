"""The producer against a real broker on loopback: every send mode, what the broker stored, and
the errors a user sees."""

from __future__ import annotations

import asyncio
import collections

import pytest
from clientconf import Cluster

from brokerhelp import pull_queue
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.message import Message, decode_messages
from rocketlite.client.producer import Producer, SendStatus, select_by_hash
from rocketlite.common.errors import RemotingError
from rocketlite.formats.message_record import SYSFLAG_COMPRESSED
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration


async def stored(cluster: Cluster, topic: str, queues: int = 4) -> list:
    client = RemotingClient()
    try:
        out = []
        for q in range(queues):
            for rec in await pull_queue(client, cluster.addr(), topic, q):
                out += decode_messages(rec.encode())
        return out
    finally:
        await client.close()


async def test_sync_send_stores_body_tags_keys_and_properties(cluster: Cluster) -> None:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        r = await p.send(Message("T1", b"hello", tags="TagA", keys=["k1", "k2"], properties={"a": "1"}))
    assert r.status is SendStatus.SEND_OK
    assert r.queue.topic == "T1" and r.queue.brokerName == "broker-a"
    (m,) = await stored(cluster, "T1")
    assert m.body == b"hello" and m.tags == "TagA" and m.keys == ["k1", "k2"]
    assert m.properties["a"] == "1"
    assert m.msg_id == r.msg_id == m.uniq_key and len(r.msg_id) == 32
    assert m.offset_msg_id == r.offset_msg_id
    assert (m.queue_id, m.queue_offset) == (r.queue.queueId, r.queue_offset)


async def test_unknown_topic_goes_through_tbw102_and_is_created(cluster: Cluster) -> None:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        results = [await p.send(Message("FreshTopic", b"x%d" % i)) for i in range(8)]
    assert {r.queue.queueId for r in results} == {0, 1, 2, 3}  # round robin over 4 queues
    assert cluster.brokers["broker-a"].topics.get("FreshTopic") is not None
    assert sorted(m.body for m in await stored(cluster, "FreshTopic")) == sorted(b"x%d" % i for i in range(8))


async def test_async_sends_keep_a_window_and_all_complete(cluster: Cluster) -> None:
    n = 2000
    async with Producer("PG", namesrv_addr=cluster.ns_addr, async_window=64) as p:
        await p.send(Message("TA", b"warm"))
        peak = 0
        futs = []
        for i in range(n):
            futs.append(p.send_async(Message("TA", b"m%d" % i)))
            peak = max(peak, p._inflight)
        results = await asyncio.gather(*futs)
        await p.flush()
    assert peak == 64
    assert all(r.status is SendStatus.SEND_OK for r in results)
    per_queue = collections.defaultdict(list)
    for r in results:
        per_queue[r.queue.queueId].append(r.queue_offset)
    for offsets in per_queue.values():  # each queue's offsets are distinct, no gaps
        assert len(set(offsets)) == len(offsets)
    assert len(await stored(cluster, "TA")) == n + 1


async def test_async_callback_runs_with_the_future(cluster: Cluster) -> None:
    seen: list[str] = []
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        fut = p.send_async(Message("TCB", b"x"), callback=lambda f: seen.append(f.result().msg_id))
        r = await fut
        await asyncio.sleep(0)
    assert seen == [r.msg_id]


async def test_oneway_send_is_stored(cluster: Cluster) -> None:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await p.send(Message("TO", b"first"))
        for i in range(10):
            await p.send_oneway(Message("TO", b"o%d" % i))
        for _ in range(200):
            if len(await stored(cluster, "TO")) == 11:
                break
            await asyncio.sleep(0.02)
    assert len(await stored(cluster, "TO")) == 11


async def test_batch_send_gives_one_id_per_message(cluster: Cluster) -> None:
    msgs = [Message("TB", b"b%d" % i, keys=f"key{i}") for i in range(50)]
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        r = await p.send_batch(msgs)
    ids = r.msg_id.split(",")
    assert len(ids) == 50 and len(set(ids)) == 50
    got = [m for m in await stored(cluster, "TB") if m.queue_id == r.queue.queueId]
    assert [m.body for m in got] == [m.body for m in msgs]
    assert [m.uniq_key for m in got] == ids
    assert [m.queue_offset for m in got] == list(range(r.queue_offset, r.queue_offset + 50))


@pytest.mark.parametrize("codec", ["zlib", "lz4", "zstd"])
async def test_large_bodies_are_compressed_and_read_back(cluster: Cluster, codec: str) -> None:
    body = b"compressible " * 1000
    async with Producer("PG", namesrv_addr=cluster.ns_addr, compression=codec) as p:
        await p.send(Message("TZ", body))
        await p.send(Message("TZ", b"small"))
    big, small = sorted(await stored(cluster, "TZ"), key=lambda m: m.commit_log_offset)
    assert big.body == body and big.sys_flag & SYSFLAG_COMPRESSED
    assert small.body == b"small" and not small.sys_flag & SYSFLAG_COMPRESSED
    assert big.store_timestamp >= big.born_timestamp - 1000


async def test_selector_keeps_a_sharding_key_on_one_queue(cluster: Cluster) -> None:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        queues = set()
        for i in range(20):
            r = await p.send(Message("TS", b"%d" % i), selector=select_by_hash, arg="order-42")
            queues.add(r.queue)
        other = await p.send(Message("TS", b"x"), queue=next(iter(queues)))
    assert len(queues) == 1 and other.queue in queues


async def test_bad_messages_are_refused_before_sending(cluster: Cluster) -> None:
    async with Producer("PG", namesrv_addr=cluster.ns_addr, max_message_size=1024) as p:
        with pytest.raises(MQClientError, match="reserved"):
            await p.send(Message("T", b"x", properties={"UNIQ_KEY": "mine"}))
        with pytest.raises(MQClientError, match="max_message_size"):
            await p.send(Message("T", b"x" * 2048))
        with pytest.raises(MQClientError, match="topic"):
            await p.send(Message("bad topic!", b"x"))
        with pytest.raises(MQClientError, match="empty"):
            await p.send(Message("T", b""))
        with pytest.raises(MQClientError, match="separators"):
            await p.send(Message("T", b"x", properties={"k": "a\x02b"}))


async def test_broker_refusal_carries_its_code(cluster: Cluster) -> None:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await p.send(Message("TP", b"x"))
        queue = (await p.publish_queues("TP"))[0]
        from rocketlite.protocol.bodies import MessageQueue

        with pytest.raises(MQBrokerError) as e:
            await p.send(Message("SCHEDULE_TOPIC_XXXX", b"x"), queue=MessageQueue(
                "SCHEDULE_TOPIC_XXXX", queue.brokerName, 0))
    assert e.value.code in (ResponseCode.NO_PERMISSION, ResponseCode.TOPIC_NOT_EXIST)


async def test_not_started_and_no_nameserver_are_clear_errors() -> None:
    p = Producer("PG", namesrv_addr="127.0.0.1:1")
    with pytest.raises(MQClientError, match="not started"):
        await p.send(Message("T", b"x"))
    await p.start()
    try:
        with pytest.raises(MQClientError, match="NameServer"):
            await p.send(Message("T", b"x"))
    finally:
        await p.shutdown()


async def test_the_async_binary_frame_is_stored_as_the_generic_one(cluster: Cluster) -> None:
    """send_async's template frames (ROCKETMQ binary header, send_codec.SendFrame) and send's
    generic JSON command carry the same header: the broker stores the same record fields."""
    def message(i: int) -> Message:
        return Message("TWire", b"\xe9body" * (1 + i * 700), tags="TagW", keys=["k1", "k\u00e92"],
                       properties={"a": "1", "\u00fc": "\u20ac x"}, flag=-7, wait_store_msg_ok=False)

    async with Producer("PGW", namesrv_addr=cluster.ns_addr, compress_over=2000) as p:
        generic = [await p.send(message(i), (await p.publish_queues("TWire"))[1]) for i in range(2)]
        fast = await asyncio.gather(*(p.send_async(message(i)) for i in range(2)))
        assert "TWire" in p._lanes  # the template path sent them
    by_key = {m.uniq_key: m for m in await stored(cluster, "TWire")}
    assert len(by_key) == 4
    for i, (g, f) in enumerate(zip(generic, fast, strict=True)):
        mg, mf = by_key[g.msg_id], by_key[f.msg_id]
        assert (mf.queue_id, mf.queue_offset, mf.offset_msg_id) == (f.queue.queueId, f.queue_offset,
                                                                  f.offset_msg_id)
        assert mf.body == mg.body == message(i).body
        assert (mf.sys_flag, mf.flag, mf.tags, mf.keys) == (mg.sys_flag, mg.flag, "TagW", ["k1", "k\u00e92"])
        assert mf.flag == -7 and bool(mf.sys_flag & SYSFLAG_COMPRESSED) == (i == 1)
        assert abs(mf.born_timestamp - mg.born_timestamp) < 60_000
        fprops = {k: v for k, v in mf.properties.items() if k not in ("UNIQ_KEY", "CLUSTER")}
        gprops = {k: v for k, v in mg.properties.items() if k not in ("UNIQ_KEY", "CLUSTER")}
        assert fprops == gprops and fprops["a"] == "1" and fprops["\u00fc"] == "\u20ac x"
        assert fprops["WAIT"] == "false"
        assert mf.properties["UNIQ_KEY"] == f.msg_id


async def test_async_broker_refusal_carries_its_code(cluster: Cluster) -> None:
    """An error reply to a template frame reaches the future (after the async retries)."""
    async with Producer("PG", namesrv_addr=cluster.ns_addr, retry_times_when_send_async_failed=1) as p:
        for _ in range(3):  # the first through the route lookup, then from the lanes
            with pytest.raises(MQBrokerError) as e:
                await p.send_async(Message("SCHEDULE_TOPIC_XXXX", b"x"))
            assert e.value.code in (ResponseCode.NO_PERMISSION, ResponseCode.TOPIC_NOT_EXIST)
        assert "SCHEDULE_TOPIC_XXXX" in p._lanes
        assert p._inflight == 0


async def test_shutdown_with_a_backlog_completes_every_send_and_closes(cluster: Cluster) -> None:
    p = Producer("PG", namesrv_addr=cluster.ns_addr, async_window=64, async_backlog=2000)
    await p.start()
    await p.send(Message("TShut", b"route"))  # the route is known: sends take the fast path
    futs = [p.send_async(Message("TShut", b"m%d" % i)) for i in range(1000)]
    await asyncio.wait_for(p.shutdown(), 30)  # no flush first: the backlog drains during it
    assert all(f.done() for f in futs)
    assert all(f.result().status is SendStatus.SEND_OK for f in futs)
    assert len(await stored(cluster, "TShut")) == 1001


async def test_a_failing_waiter_does_not_stop_the_others_or_the_close(cluster: Cluster) -> None:
    from rocketlite.protocol.codes import RequestCode
    from rocketlite.remoting.pending import FutureWaiter, next_opaque

    class Boom:
        def reply_received(self, result: object) -> None:
            raise RuntimeError("a waiter's own bug")

    client = RemotingClient()
    conn = await client.connection(cluster.ns_addr)
    loop = asyncio.get_running_loop()
    futs = []
    for i in range(4):
        waiter = Boom() if i % 2 == 0 else FutureWaiter(fut := loop.create_future())
        if i % 2:
            futs.append(fut)
        cmd = RemotingCommand.request(int(RequestCode.GET_KV_CONFIG), {"namespace": "x", "key": "k"})
        cmd.opaque = next_opaque()
        conn.send_request(cmd.encode(), b"", cmd.opaque, cmd.code, 5.0, waiter)  # type: ignore[arg-type]
    replies = await asyncio.wait_for(asyncio.gather(*futs), 5)  # read past the failing waiters
    assert all(isinstance(r, RemotingCommand) for r in replies)
    pending = [Boom(), FutureWaiter(last := loop.create_future()), Boom()]
    for waiter in pending:  # requests the NameServer never answers: the close fails them all
        cmd = RemotingCommand.request(int(RequestCode.GET_KV_CONFIG), {"namespace": "x", "key": "k"})
        conn.send_request(b"", b"", next_opaque(), cmd.code, 60.0, waiter)  # type: ignore[arg-type]
    conn.abort()
    await asyncio.wait_for(conn.wait_closed(), 5)  # the close went through every waiter
    with pytest.raises(RemotingError):
        await last
    await client.close()
