"""Load generator built on rocketlite's own client (``rocketlite.client``): the broker benchmark's
figures with the first-party producer and push consumer doing the work, so the client's own cost
shows (compare with ``broker_bench.py``, whose lean hand-rolled client spends as little as it can).

    python bench/client_bench.py                      # start a broker, run every scenario
    python bench/client_bench.py --scenario async --seconds 10
    python bench/client_bench.py --scenario async --trace   # with enable_trace (message trace)
    python bench/client_bench.py --scenario async --acl     # aclEnable, every request signed

Scenarios:
  sync     ``await producer.send()`` in a loop: one in flight, bounded by the round trip
  async    ``producer.send_async()`` from one plain loop, ``--window`` in flight
  batch    ``send_batch`` of ``--batch`` messages, ``--window`` batches in flight
  consume  a PushConsumer over a preloaded topic (``--preload`` messages)
  micro    no broker: ``send_async`` into an in-process fake connection answered from reply
           templates outside the timed part; the client's CPU per message (``process_time``)
           over ``--messages`` messages in rounds of ``--window``. Run alone (not with the
           others). For a figure that does not move with the machine's load, count instructions:
           valgrind --tool=callgrind at two ``--messages`` values (4000, 14000, after a warm-up
           run), the difference per message. ``broker_bench`` puts ITS tree's src first on
           sys.path: to measure another tree, run that tree's bench/client_bench.py.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import re
import struct
import tempfile
import time
from pathlib import Path

from broker_bench import CpuMeter, broker_process, fmt, percentiles
from rocketlite.client.instance import ClientConfig, ClientInstance
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.client.trace import TraceDispatcher
from rocketlite.protocol.bodies import BrokerData, ConsumeFromWhere, QueueData, TopicRouteData
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection


async def run_sync(p: Producer, body: bytes, seconds: float) -> dict[str, object]:
    lat: list[int] = []
    end = time.monotonic() + seconds
    t0 = time.perf_counter()
    while time.monotonic() < end:
        s = time.perf_counter_ns()
        await p.send(Message("BenchClient", body))
        lat.append(time.perf_counter_ns() - s)
    return {"messages": len(lat), "msgs_per_s": len(lat) / (time.perf_counter() - t0), **percentiles(lat)}


async def run_async(p: Producer, body: bytes, seconds: float, window: int) -> dict[str, object]:
    p.async_window = window
    done = errors = 0

    def on_done(f: asyncio.Future[object]) -> None:
        nonlocal done, errors
        done += 1
        if f.exception() is not None:
            errors += 1

    end = time.monotonic() + seconds
    t0 = time.perf_counter()
    pending: collections.deque[asyncio.Future[object]] = collections.deque()
    while time.monotonic() < end:
        pending.append(p.send_async(Message("BenchClient", body), callback=on_done))  # type: ignore[arg-type]
        if len(pending) >= 2 * window:  # the window is full and as many wait: let replies come
            await pending.popleft()
    await p.flush()
    return {"messages": done, "msgs_per_s": done / (time.perf_counter() - t0), "errors": errors}


async def run_batch(p: Producer, body: bytes, seconds: float, window: int, batch: int) -> dict[str, object]:
    msgs = [Message("BenchBatch", body) for _ in range(batch)]
    sent = 0
    end = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal sent
        while time.monotonic() < end:
            await p.send_batch(msgs)
            sent += batch

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(window)))
    return {"messages": sent, "msgs_per_s": sent / (time.perf_counter() - t0)}


async def run_consume(ns: str, p: Producer, body: bytes, preload: int, pid: int | None,
                      trace: bool = False) -> dict[str, object]:
    msgs = [Message("BenchConsumeC", body) for _ in range(250)]
    for _ in range(preload // 250):
        await p.send_batch(msgs)
    got = 0
    finished = asyncio.Event()

    def handler(batch: list[MessageExt]) -> ConsumeStatus:
        nonlocal got
        got += len(batch)
        if got >= preload:
            finished.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("BenchGroup", config=ClientConfig(namesrv_addr=ns, credentials=p.config.credentials),
                     pull_batch_size=32,
                     consume_message_batch_max_size=32, enable_trace=trace,
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe("BenchConsumeC")
    c.register_listener(handler)
    cpu = CpuMeter(pid)
    t0 = time.perf_counter()
    await c.start()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(120):
            await finished.wait()
    elapsed = time.perf_counter() - t0
    await c.shutdown()
    return {"messages": got, "msgs_per_s": got / elapsed, **cpu.result(got), **_trace_counts(c.trace)}


def _trace_counts(d: TraceDispatcher | None) -> dict[str, object]:
    """With ``--trace``: the trace messages sent and failed, the records dropped by the full queue."""
    return {} if d is None else {"trace_msgs": d.sent, "trace_failed": d.failed, "trace_dropped": d.discarded}


async def scenario(args: argparse.Namespace, name: str, ns: str, pid: int | None) -> dict[str, object]:
    body = os.urandom(args.size)
    creds = ACL_CREDENTIALS if args.acl else None
    async with Producer("BenchProducer", namesrv_addr=ns, enable_trace=args.trace, credentials=creds) as p:
        await p.send(Message("BenchClient", body))  # routes, connection, topic creation
        await p.send(Message("BenchBatch", body))
        if name == "consume":
            return await run_consume(ns, p, body, args.preload, pid, args.trace)
        cpu = CpuMeter(pid)
        if name == "sync":
            r = await run_sync(p, body, args.seconds)
        elif name == "async":
            r = await run_async(p, body, args.seconds, args.window)
        else:
            r = await run_batch(p, body, args.seconds, max(1, args.window // 16), args.batch)
        r.update(cpu.result(int(r["messages"])))  # type: ignore[call-overload]
        if p.trace is not None:
            await p.trace.flush()
        r.update(_trace_counts(p.trace))
        return r


ACL_CREDENTIALS = ("bench-key", "bench-secret")
ACL_FILE = f"""accounts:
  - accessKey: {ACL_CREDENTIALS[0]}
    secretKey: {ACL_CREDENTIALS[1]}
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""


def acl_conf(stack: contextlib.ExitStack) -> dict[str, str]:
    """broker.conf keys of a broker with ``aclEnable`` over a plain_acl.yml with the bench's
    account (in a temporary folder, removed at the end)."""
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rocketlite-acl-")))
    (folder / "plain_acl.yml").write_text(ACL_FILE)
    return {"aclEnable": "true", "aclFile": str(folder / "plain_acl.yml")}


_PREFIX = struct.Struct(">iI")
_OPAQUE = re.compile(rb'"opaque":(\d+)')


class _FakeTransport:
    """Collects what the client writes; the micro scenario answers it."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass

    def close(self) -> None:
        pass


class _Replies:
    """SEND_MESSAGE's replies to the requests of a written run, each in its request's serialize
    type, from one template per type with the opaque patched in: no request is decoded, so the
    fake broker costs little even where it is counted (callgrind)."""

    def __init__(self) -> None:
        self.templates: dict[int, bytes] = {}

    def __call__(self, data: bytes) -> bytes:
        out = []
        pos = 0
        while pos < len(data):
            length, ori = _PREFIX.unpack_from(data, pos)
            stype = ori >> 24
            if stype:
                opaque = int.from_bytes(data[pos + 13:pos + 17], "big")
            else:
                m = _OPAQUE.search(data, pos + 8, pos + 8 + (ori & 0xFFFFFF))
                assert m is not None
                opaque = int(m[1])
            pos += 4 + length
            t = self.templates.get(stype)
            if t is None:
                r = RemotingCommand(0, "JAVA", opaque=0x7FFFFFFF, flag=1, serialize_type=stype, ext_fields={
                    "msgId": "0A0000010000000000000000", "queueId": "1", "queueOffset": "12345",
                    "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
                t = self.templates[stype] = r.encode()[8:]
            if stype:
                header = t[:5] + opaque.to_bytes(4, "big") + t[9:]
            else:
                header = t.replace(b'"opaque":2147483647', b'"opaque":%d' % opaque)
            out.append(_PREFIX.pack(4 + len(header), (stype << 24) | len(header)) + header)
        return b"".join(out)


async def run_micro(body: bytes, messages: int, window: int) -> dict[str, object]:
    """The client's CPU per async send without a broker (see the module docstring)."""
    addr = "127.0.0.1:1"
    p = Producer("BenchProducer", namesrv_addr="127.0.0.1:2", async_window=window)
    inst = p.instance = ClientInstance(p.config)
    p._started = True
    inst.broker_addrs["b"] = {0: addr}
    p.on_route("BenchClient", TopicRouteData(
        queueDatas=[QueueData(brokerName="b", readQueueNums=4, writeQueueNums=4, perm=6)],
        brokerDatas=[BrokerData(brokerName="b", brokerAddrs={0: addr})]))
    transport = _FakeTransport()
    conn = Connection(None, limits=inst.remoting.limits)
    conn.connection_made(transport)  # type: ignore[arg-type]
    inst.remoting._conns[addr] = conn
    replies = _Replies()
    done = 0

    def on_done(f: asyncio.Future[object]) -> None:
        nonlocal done
        done += 1
        f.result()

    spent = 0.0
    clock = time.process_time
    for _ in range(messages // window):
        t0 = clock()
        for _ in range(window):
            p.send_async(Message("BenchClient", body), callback=on_done)  # type: ignore[arg-type]
        await asyncio.sleep(0)  # the coalesced writes go out
        spent += clock() - t0
        data = replies(b"".join(transport.out))
        transport.out.clear()
        t0 = clock()
        conn.data_received(data)
        for _ in range(3):
            await asyncio.sleep(0)  # the futures' callbacks
        spent += clock() - t0
    assert done == messages // window * window, done
    return {"messages": done, "client_us_per_msg": 1e6 * spent / done}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--namesrv", help="host:port of a running NameServer (default: start a broker)")
    ap.add_argument("--scenario", action="append", choices=["sync", "async", "batch", "consume", "micro"])
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--preload", type=int, default=200_000)
    ap.add_argument("--messages", type=int, default=200_000, help="micro: messages sent")
    ap.add_argument("--trace", action="store_true", help="producer and consumer with enable_trace")
    ap.add_argument("--acl", action="store_true",
                    help="a broker with aclEnable; producer and consumer sign with credentials")
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    if args.scenario == ["micro"]:
        coro = run_micro(os.urandom(args.size), args.messages, args.window)
        r = uvloop.run(coro) if uvloop else asyncio.run(coro)
        print(f"micro: send_async(), window {args.window}, no broker: {r['messages']:,} messages, "
              f"client {r['client_us_per_msg']:.2f} us/msg (process_time)", flush=True)
        return
    print(f"rocketlite client as the load generator; {args.size} B bodies; client and broker on this "
          f"machine{'; ACL on, requests signed' if args.acl else ''}")
    for name in args.scenario or ["sync", "async", "batch", "consume"]:
        label = {"sync": "send(), 1 in flight", "async": f"send_async(), window {args.window}",
                 "batch": f"send_batch() of {args.batch}, {max(1, args.window // 16)} in flight",
                 "consume": f"PushConsumer, {args.preload:,} preloaded"}[name]
        with contextlib.ExitStack() as stack:
            ns, pid = ((args.namesrv, None) if args.namesrv
                       else stack.enter_context(broker_process(
                           "ASYNC_FLUSH", conf=acl_conf(stack) if args.acl else None))[2:0:-1])
            coro = scenario(args, name, ns, pid)
            r = uvloop.run(coro) if uvloop else asyncio.run(coro)
        traced = (f"  trace: {r['trace_msgs']:,} trace messages ({r['trace_failed']} failed), "
                  f"{r['trace_dropped']:,} records dropped" if "trace_msgs" in r else "")
        print(fmt(label, r) + f"  ({r['messages']:,} messages){traced}", flush=True)


if __name__ == "__main__":
    main()
