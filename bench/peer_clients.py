"""The client side of one run of the peer benchmark, in a fresh process of its own:

    python bench/peer_clients.py '{"client": "redis", "addr": "127.0.0.1:6379", "server_pid": 123,
                                   "count": 200000, "size": 128, "window": 1000, ...}'

prints one JSON line: three phases, each with its message count, seconds, msgs/s and the CPU
seconds of the client (this process) and of the server's process tree over the phase.

1. latency: ``lat_count`` publishes with exactly one in flight, to a destination of their own
   (p50/p99 of publish → ack, in µs); it also warms the connection up.
2. publish: ``count`` messages, ``window`` outstanding (Redis: pipelines of ``window`` commands).
3. consume: every message of the publish phase, from the start, each handed to user code as the
   client library's decoded object. The user code (``Sink``) counts them and checks every
   1000th body (its length, its sequence number, its padding).

Each message body is an 8-byte sequence number and a fixed random padding up to ``size`` bytes.
Every phase is bounded by ``bound_s``: past it the phase stops and reports what it did.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import random
import resource
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any

from broker_bench import percentiles, run_consume, run_sends
from peer_servers import PULL_BATCH, machine_busy_s, tree_cpu_s

_SEQ = struct.Struct(">Q")
SPOT = 1000  # the sink checks one body in SPOT


def padding(size: int) -> bytes:
    return random.Random(size).randbytes(max(0, size - _SEQ.size))


class Sink:
    """The "user code" every consumer hands its messages to: a count and a spot check."""

    def __init__(self, size: int, count: int) -> None:
        self.n = 0
        self.bad = 0
        self.checked = 0
        self.size = size
        self.count = count
        self.pad = padding(size)

    def __call__(self, body: bytes) -> None:
        self.n += 1
        if self.n % SPOT == 0:
            self.check(body)

    def check(self, body: bytes) -> None:
        self.checked += 1
        if (len(body) != self.size or body[_SEQ.size:] != self.pad
                or _SEQ.unpack_from(body)[0] >= self.count):
            self.bad += 1


class Meter:
    """Wall time, this process's CPU, the server tree's CPU and the whole machine's busy CPU (all
    cores: what else ran shows as machine - server - client) between ``__init__`` and ``done``."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self.t0 = self._now()

    def _now(self) -> tuple[float, float, float, float]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return time.perf_counter(), ru.ru_utime + ru.ru_stime, tree_cpu_s(self.pid), machine_busy_s()

    def done(self, messages: int, **extra: object) -> dict[str, object]:
        (w1, c1, s1, m1), (w0, c0, s0, m0) = self._now(), self.t0
        sec = w1 - w0
        return {"messages": messages, "seconds": round(sec, 4),
                "msgs_per_s": round(messages / sec, 1) if sec > 0 else 0.0,
                "cpu_client_s": round(c1 - c0, 3), "cpu_server_s": round(s1 - s0, 3),
                "cpu_machine_s": round(m1 - m0, 3), **extra}


class Progress:
    def __init__(self) -> None:
        self.n = 0
        self.errors = 0
        self.lat: list[int] = []
        self.pct_ms: dict[str, object] = {}


async def windowed(count: int, window: int, submit: Callable[[int], Awaitable[Any]],
                   progress: Progress) -> None:
    """``submit(i)`` for i in range(count) with at most ``window`` outstanding; the oldest is
    awaited when the window is full."""
    pending: collections.deque[Awaitable[Any]] = collections.deque()

    async def settle() -> None:
        try:
            await pending.popleft()
        except Exception:  # noqa: BLE001 - counted, reported in the result
            progress.errors += 1
        else:
            progress.n += 1

    for i in range(count):
        if len(pending) >= window:
            await settle()
        pending.append(submit(i))
    while pending:
        await settle()


class Driver:
    """One peer's client: ``setup``, then the three phases, then ``close``."""

    setup_messages = 0  # messages setup leaves in the consumed destination
    deadline = float("inf")  # time.monotonic() by which the current phase must end

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.host, port = spec["addr"].rsplit(":", 1)
        self.port = int(port)
        self.size: int = spec["size"]
        self.pad = padding(self.size)

    def body(self, i: int) -> bytes:
        return _SEQ.pack(i) + self.pad

    async def setup(self) -> None: ...

    async def close(self) -> None: ...

    async def send_one(self, body: bytes) -> None:
        raise NotImplementedError

    async def latency(self, k: int, progress: Progress) -> None:
        """``k`` sends, one at a time; their times (ns) go to ``progress.lat``."""
        perf = time.perf_counter_ns
        body = self.body(0)
        for _ in range(k):
            if time.monotonic() > self.deadline:
                return
            t0 = perf()
            await self.send_one(body)
            progress.lat.append(perf() - t0)
            progress.n += 1

    async def publish(self, count: int, window: int, progress: Progress) -> None:
        raise NotImplementedError

    async def consume(self, count: int, sink: Sink) -> None:
        raise NotImplementedError

    def libraries(self) -> dict[str, str]:
        return {}


# ---------------------------------------------------------------------------------------- Redis


class RedisDriver(Driver):
    """redis-py with the hiredis parser: XADD in non-transactional pipelines of ``window``, XREAD
    COUNT 1000 from the last id. Its blocking client by default (redis-py's fastest path: about
    twice the asyncio client's rate here; nothing else runs in this process), ``redis.asyncio``
    with ``"redis_asyncio": true``. The blocking loops check the phase's deadline themselves."""

    async def setup(self) -> None:
        import redis
        import redis.asyncio

        self.aio = bool(self.spec.get("redis_asyncio"))
        if self.aio:
            self.r: Any = redis.asyncio.Redis(host=self.host, port=self.port)
        else:
            self.r = redis.Redis(host=self.host, port=self.port, socket_timeout=self.spec["bound_s"])
        await self.done(self.r.ping())

    async def done(self, x: Any) -> Any:
        """The reply of a call: awaited for the asyncio client, as it is for the blocking one."""
        return (await x) if self.aio else x

    async def close(self) -> None:
        await self.done(self.r.aclose() if self.aio else self.r.close())

    async def send_one(self, body: bytes) -> None:
        await self.done(self.r.xadd("lat", {"d": body}))

    async def publish(self, count: int, window: int, progress: Progress) -> None:
        for start in range(0, count, window):
            pipe = self.r.pipeline(transaction=False)
            for i in range(start, min(count, start + window)):
                pipe.xadd("bench", {"d": self.body(i)})
            replies = await self.done(pipe.execute(raise_on_error=False))
            progress.errors += sum(isinstance(x, Exception) for x in replies)
            progress.n += len(replies)
            if time.monotonic() > self.deadline:
                return

    async def consume(self, count: int, sink: Sink) -> None:
        last: bytes | str = "0-0"
        while sink.n < count and time.monotonic() < self.deadline:
            reply = await self.done(self.r.xread({"bench": last}, count=PULL_BATCH, block=1000))
            for _stream, entries in reply:
                for _id, fields in entries:
                    sink(fields[b"d"])
                last = entries[-1][0]

    def libraries(self) -> dict[str, str]:
        from redis.utils import HIREDIS_AVAILABLE

        return {"redis-py": metadata.version("redis") + (" asyncio" if self.spec.get("redis_asyncio")
                                                         else " (blocking client)"),
                "hiredis": metadata.version("hiredis") + ("" if HIREDIS_AVAILABLE else " NOT IN USE")}


# ----------------------------------------------------------------------------------------- NATS


class NatsDriver(Driver):
    """nats-py JetStream: a file-storage stream; ``publish_async`` with ``window`` pending; a
    durable pull consumer (AckPolicy NONE) fetching 1000 at a time."""

    async def setup(self) -> None:
        import nats
        from nats.js.api import StorageType

        self.nc = await nats.connect(f"nats://{self.host}:{self.port}", max_reconnect_attempts=0)
        self.js = self.nc.jetstream(publish_async_max_pending=self.spec["window"])
        for name in ("BENCH", "LAT"):
            await self.js.add_stream(name=name, subjects=[name.lower()], storage=StorageType.FILE)

    async def close(self) -> None:
        await self.nc.close()

    async def send_one(self, body: bytes) -> None:
        await self.js.publish("lat", body)

    async def publish(self, count: int, window: int, progress: Progress) -> None:
        # nats-py's own window: publish_async waits while publish_async_max_pending are out.
        def acked(f: asyncio.Future[Any]) -> None:
            if f.cancelled() or f.exception() is not None:
                progress.errors += 1
            else:
                progress.n += 1

        for i in range(count):
            (await self.js.publish_async("bench", self.body(i))).add_done_callback(acked)
        await self.js.publish_async_completed()

    async def consume(self, count: int, sink: Sink) -> None:
        import nats.errors
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        sub = await self.js.pull_subscribe(
            "bench", durable="bench", stream="BENCH",
            config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL))
        while sink.n < count:
            with contextlib.suppress(nats.errors.TimeoutError):
                for m in await sub.fetch(PULL_BATCH, timeout=2):
                    sink(m.data)

    def libraries(self) -> dict[str, str]:
        return {"nats-py": metadata.version("nats-py")}


# ------------------------------------------------------------------------------------- RabbitMQ


class RabbitDriver(Driver):
    """aio-pika: persistent messages to the default exchange on a channel with publisher confirms
    (a task per publish, ``window`` unconfirmed); ``basic.consume`` with prefetch 2000, acked
    (multiple) every 500. ``queue_type``: ``classic`` (durable) or ``stream``."""

    def __init__(self, spec: dict[str, Any], queue_type: str) -> None:
        super().__init__(spec)
        self.queue_type = queue_type

    async def setup(self) -> None:
        import aio_pika

        self.aio_pika = aio_pika
        self.conn = await aio_pika.connect(f"amqp://guest:guest@{self.host}:{self.port}/")
        self.ch = await self.conn.channel(publisher_confirms=True)
        await self.ch.set_qos(prefetch_count=2000)
        args = {"x-queue-type": self.queue_type}
        self.queue = await self.ch.declare_queue("bench", durable=True, arguments=args)
        await self.ch.declare_queue("lat", durable=True, arguments=args)
        self.exchange = self.ch.default_exchange

    async def close(self) -> None:
        await self.conn.close()

    def _message(self, body: bytes) -> Any:
        return self.aio_pika.Message(body, delivery_mode=self.aio_pika.DeliveryMode.PERSISTENT)

    async def send_one(self, body: bytes) -> None:
        await self.exchange.publish(self._message(body), routing_key="lat")

    async def publish(self, count: int, window: int, progress: Progress) -> None:
        loop = asyncio.get_running_loop()
        await windowed(count, window, lambda i: loop.create_task(
            self.exchange.publish(self._message(self.body(i)), routing_key="bench")), progress)

    async def consume(self, count: int, sink: Sink) -> None:
        finished = asyncio.Event()
        unacked = 0

        async def on_message(m: Any) -> None:
            nonlocal unacked
            sink(m.body)
            unacked += 1
            if unacked >= 500 or sink.n >= count:
                unacked = 0
                await m.ack(multiple=True)
            if sink.n >= count:
                finished.set()

        args = {"x-stream-offset": "first"} if self.queue_type == "stream" else None
        tag = await self.queue.consume(on_message, arguments=args)
        await finished.wait()
        await self.queue.cancel(tag)

    def libraries(self) -> dict[str, str]:
        return {"aio-pika": metadata.version("aio-pika"), "aiormq": metadata.version("aiormq")}


# ----------------------------------------------------------------------------------- rocketlite


class RocketliteDriver(Driver):
    """``rocketlite.client``: Producer.send_async with ``async_window`` = ``window`` (and as many
    futures outstanding); a LitePullConsumer from the first offset, ``poll`` handing over
    MessageExt objects; ``send`` for the latency phase."""

    topic = "BenchPeers"
    setup_messages = 1  # the send that creates the topic (auto-creation), sequence number 0

    async def setup(self) -> None:
        from rocketlite.client import Message, Producer

        self.Message = Message
        self.producer = Producer("BenchPeersProducer", namesrv_addr=self.spec["addr"],
                                 async_window=self.spec["window"])
        await self.producer.start()
        await self.producer.send(Message(self.topic, self.body(0)))
        await self.producer.send(Message("BenchPeersLat", self.body(0)))

    async def close(self) -> None:
        await self.producer.shutdown()

    async def send_one(self, body: bytes) -> None:
        await self.producer.send(self.Message("BenchPeersLat", body))

    async def publish(self, count: int, window: int, progress: Progress) -> None:
        await windowed(count, window,
                       lambda i: self.producer.send_async(self.Message(self.topic, self.body(i))),
                       progress)

    async def consume(self, count: int, sink: Sink) -> None:
        from rocketlite.client import LitePullConsumer
        from rocketlite.protocol.bodies import ConsumeFromWhere

        c = LitePullConsumer("BenchPeersGroup", namesrv_addr=self.spec["addr"],
                             pull_batch_size=PULL_BATCH,
                             consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        c.subscribe(self.topic)
        await c.start()
        try:
            while sink.n < count:
                for m in await c.poll(timeout=1.0):
                    sink(m.body)
        finally:
            await c.shutdown()

    def libraries(self) -> dict[str, str]:
        return {"rocketlite.client": "(this tree)"}


class LeanDriver(Driver):
    """``bench/broker_bench.py``'s lean Remoting generator: pre-encoded SEND_MESSAGE_V2 frames of
    one body over 8 queues, ``window`` outstanding; raw PULL_MESSAGE over the 8 queues (records
    counted, not decoded: no user code sees them, so bodies are not checked)."""

    topic = "BenchPeersLean"
    queues = 8
    setup_messages = 8  # one per queue, creating the topic

    async def setup(self) -> None:
        self.broker = self.spec["broker"]
        await run_sends(self.broker, [self.topic], self.queues, self.body(0), self.queues, 30.0,
                        requests=self.queues)

    async def latency(self, k: int, progress: Progress) -> None:
        # run_sends keeps its own latencies: one send at a time, like the other peers' phase
        r = await run_sends(self.broker, ["BenchPeersLat"], 1, self.body(0), 1,
                            self.spec["bound_s"] - 1, requests=k)
        progress.n = int(r["messages"])  # type: ignore[call-overload]
        progress.pct_ms = {k: v for k, v in r.items() if k.endswith("_ms")}

    async def publish(self, count: int, window: int, progress: Progress) -> None:
        r = await run_sends(self.broker, [self.topic], self.queues, self.body(0), window,
                            self.spec["bound_s"] - 1, requests=count)
        progress.n = int(r["messages"])  # type: ignore[call-overload]
        progress.errors = sum(r["errors"].values())  # type: ignore[attr-defined]

    async def consume(self, count: int, sink: Sink) -> None:
        r = await run_consume(self.broker, self.topic, self.queues, 2**62, self.queues, PULL_BATCH)
        sink.n = int(r["messages"])  # type: ignore[call-overload]

    def libraries(self) -> dict[str, str]:
        return {"bench/broker_bench.py": "(lean Remoting generator)"}


DRIVERS: dict[str, Callable[[dict[str, Any]], Driver]] = {
    "redis": RedisDriver,
    "nats": NatsDriver,
    "rabbitmq-classic": lambda spec: RabbitDriver(spec, "classic"),
    "rabbitmq-stream": lambda spec: RabbitDriver(spec, "stream"),
    "rocketlite": RocketliteDriver,
    "lean": LeanDriver,
}


async def bounded(coro: Awaitable[Any], bound_s: float) -> bool:
    """Run ``coro`` for at most ``bound_s``; whether it finished."""
    try:
        async with asyncio.timeout(bound_s):
            await coro
    except TimeoutError:
        return False
    return True


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    d = DRIVERS[spec["client"]](spec)
    pid, bound, count = spec["server_pid"], spec["bound_s"], spec["count"]
    out: dict[str, Any] = {"client": spec["client"], "libraries": d.libraries()}
    async with asyncio.timeout(bound):
        await d.setup()
    try:
        prog = Progress()
        m = Meter(pid)
        d.deadline = time.monotonic() + bound
        ok = await bounded(d.latency(spec["lat_count"], prog), bound)
        pct = prog.pct_ms or percentiles(prog.lat)
        out["latency"] = m.done(prog.n, completed=ok and prog.n >= spec["lat_count"], **{
            k.replace("_ms", "_us"): round(float(v) * 1000, 1) for k, v in pct.items()})

        prog = Progress()
        m = Meter(pid)
        d.deadline = time.monotonic() + bound
        ok = await bounded(d.publish(count, spec["window"], prog), bound)
        out["publish"] = m.done(prog.n, completed=ok and prog.n + prog.errors >= count,
                                errors=prog.errors)

        sink = Sink(spec["size"], count)
        expected = prog.n + d.setup_messages
        m = Meter(pid)
        d.deadline = time.monotonic() + bound
        ok = await bounded(d.consume(expected, sink), bound)
        out["consume"] = m.done(sink.n, completed=ok and sink.n >= expected, expected=expected,
                                checked=sink.checked, bad=sink.bad)
    finally:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await d.close()
    return out


def main() -> None:
    spec = json.loads(sys.argv[1])
    coro = run(spec)
    if spec.get("loop", "uvloop") == "uvloop":
        import uvloop

        result = uvloop.run(coro)
    else:
        result = asyncio.run(coro)
    result["pid"] = os.getpid()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
