"""The blocking wrappers against a real broker on loopback. The cluster lives in the test's event
loop, so every sync scenario runs in a worker thread (``asyncio.to_thread``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest
from clientconf import Cluster

from rocketlite.client.errors import MQClientError
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import SendResult, SendStatus
from rocketlite.client.push_consumer import ConsumeStatus
from rocketlite.client.sync import SyncProducer, SyncPushConsumer
from rocketlite.protocol.bodies import ConsumeFromWhere

pytestmark = pytest.mark.integration
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def fast(ns: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=ns, rebalance_interval=0.5, persist_offset_interval=0.5,
                        heartbeat_interval=1.0)


def wait_for(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def consume(ns: str, group: str, topic: str, n: int, handler_sleep: float = 0.0,
            concurrency: int = 4) -> list[bytes]:
    got: list[bytes] = []
    lock = threading.Lock()

    def handler(msgs: list[MessageExt]) -> ConsumeStatus:
        if handler_sleep:
            time.sleep(handler_sleep)  # blocks its pool thread, not the loop
        with lock:
            got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    c = SyncPushConsumer(group, config=fast(ns), consume_from_where=FIRST, consume_concurrency=concurrency)
    c.subscribe(topic, "*")
    c.register_listener(handler)
    with c:
        wait_for(lambda: len(got) >= n)
    assert not c.thread.is_alive()
    return sorted(got)


async def test_sync_send_is_ok_and_consumable(cluster: Cluster) -> None:
    def scenario() -> tuple[SendResult, list[bytes], threading.Thread]:
        with SyncProducer("PG", namesrv_addr=cluster.ns_addr) as p:
            assert len(p.publish_queues("ST1")) == 4
            r = p.send(Message("ST1", b"hello"))
            p.send_batch([Message("ST1", b"b1"), Message("ST1", b"b2")])
            p.send_oneway(Message("ST1", b"one"))
            assert p.thread.is_alive() and p.thread.daemon
        return r, consume(cluster.ns_addr, "SCG1", "ST1", 4), p.thread

    r, bodies, thread = await asyncio.to_thread(scenario)
    assert r.status is SendStatus.SEND_OK and r.queue.topic == "ST1"
    assert bodies == [b"b1", b"b2", b"hello", b"one"]
    assert not thread.is_alive()


async def test_send_async_futures_and_callbacks(cluster: Cluster) -> None:
    n = 50

    def scenario() -> tuple[list[SendResult], list[str]]:
        seen: list[str] = []
        lock = threading.Lock()

        def cb(f: concurrent.futures.Future[SendResult]) -> None:
            with lock:
                seen.append(f.result().msg_id)

        with SyncProducer("PG", namesrv_addr=cluster.ns_addr) as p:
            futs = [p.send_async(Message("ST2", b"a%d" % i), callback=cb) for i in range(n)]
            assert all(isinstance(f, concurrent.futures.Future) for f in futs)
            results = [f.result(10) for f in concurrent.futures.as_completed(futs, timeout=10)]
        return results, seen

    results, seen = await asyncio.to_thread(scenario)
    assert len(results) == n and all(r.status is SendStatus.SEND_OK for r in results)
    assert sorted(seen) == sorted(r.msg_id for r in results)
    bodies = await asyncio.to_thread(consume, cluster.ns_addr, "SCG2", "ST2", n)
    assert bodies == sorted(b"a%d" % i for i in range(n))


async def test_blocking_handler_still_consumes_everything(cluster: Cluster) -> None:
    n = 40

    def scenario() -> list[bytes]:
        with SyncProducer("PG", namesrv_addr=cluster.ns_addr) as p:
            for i in range(n):
                assert p.send(Message("ST3", b"m%d" % i)).status is SendStatus.SEND_OK
        return consume(cluster.ns_addr, "SCG3", "ST3", n, handler_sleep=0.05, concurrency=8)

    bodies = await asyncio.to_thread(scenario)
    assert bodies == sorted(b"m%d" % i for i in range(n))


async def test_calls_after_shutdown_raise_and_the_thread_is_gone(cluster: Cluster) -> None:
    def scenario() -> None:
        p = SyncProducer("PG", namesrv_addr=cluster.ns_addr)
        p.start()
        assert p.send(Message("ST4", b"x")).status is SendStatus.SEND_OK
        p.shutdown()
        p.shutdown()  # idempotent
        assert not p.thread.is_alive()
        with pytest.raises(MQClientError, match="shut down"):
            p.send(Message("ST4", b"y"))
        with pytest.raises(MQClientError, match="shut down"):
            p.send_async(Message("ST4", b"y"))

        c = SyncPushConsumer("SCG4", namesrv_addr=cluster.ns_addr)
        c.shutdown()
        assert not c.thread.is_alive()
        with pytest.raises(MQClientError, match="shut down"):
            c.subscribe("ST4", "*")

    before = {t.name for t in threading.enumerate()}
    await asyncio.to_thread(scenario)
    leftover = {t.name for t in threading.enumerate()} - before
    assert not {name for name in leftover if name.startswith("rocketlite-Sync")}


async def test_async_side_errors_are_reraised_as_is(cluster: Cluster) -> None:
    def scenario() -> None:
        with SyncProducer("PG", namesrv_addr=cluster.ns_addr) as p, pytest.raises(MQClientError, match="emp"):
            p.send(Message("ST5", b""))
        idle = SyncProducer("PG", namesrv_addr=cluster.ns_addr)
        with pytest.raises(MQClientError, match="not started"):  # from the async Producer
            idle.send(Message("ST5", b"x"))
        idle.shutdown()
        c = SyncPushConsumer("SCG5", namesrv_addr=cluster.ns_addr)
        with pytest.raises(MQClientError, match="listener"):
            c.start()
        c.shutdown()

    await asyncio.to_thread(scenario)
