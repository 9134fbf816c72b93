"""Load generator for a running broker (like RocketMQ's benchmark/producer.sh and consumer.sh).

Speaks Remoting directly with a lean client: each request frame is a pre-encoded template with its
opaque patched in, responses are matched by opaque, so the client spends as little of the shared
CPU as it can. Prints msgs/s and send latency percentiles.

    python bench/broker_bench.py                       # start a broker, run every scenario
    python bench/broker_bench.py --broker 127.0.0.1:10911 --scenario send --inflight 64
    python bench/broker_bench.py --scenario sync       # a SYNC_FLUSH broker

Scenarios:
  send     single-message SEND_MESSAGE_V2, ``--inflight`` requests outstanding
  batch    SEND_BATCH_MESSAGE of ``--batch`` messages, ``--inflight`` outstanding
  consume  PULL_MESSAGE over every queue of a preloaded topic, ``--inflight`` pulls outstanding
  latency  single sends at a fixed ``--rate``, latency percentiles
  sync     ``send`` against a broker started with flushDiskType=SYNC_FLUSH

Without ``--broker`` each scenario starts its own ``rocketlite start`` in a temporary folder (ASYNC
or SYNC flush as the scenario needs) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rocketlite.protocol.command import RemotingCommand  # noqa: E402
from rocketlite.protocol.headers import (  # noqa: E402
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketlite.protocol.message_batch import encode_batch  # noqa: E402

_PREFIX = struct.Struct(">ii")
_LEN = struct.Struct(">i")


# ---------------------------------------------------------------------------------------- client


class Template:
    """A request frame with a placeholder opaque: ``frame(opaque)`` is one ``bytes`` concat."""

    def __init__(self, cmd: RemotingCommand) -> None:
        cmd.opaque = 0
        head, body = cmd.encode_parts()
        header = head[8:]
        marker = b'"opaque":0'
        i = header.index(marker) + len(marker) - 1
        self.left, self.right, self.body = header[:i], header[i + 1 :], body
        self.fixed = len(self.left) + len(self.right)

    def frame(self, opaque: int) -> bytes:
        o = str(opaque).encode()
        hlen = self.fixed + len(o)
        return _PREFIX.pack(4 + hlen + len(self.body), hlen) + self.left + o + self.right + self.body


class LoadConnection(asyncio.Protocol):
    """Pipelined requests on one connection; ``on_reply(opaque, code, ext, body)`` per response."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.waiters: dict[int, asyncio.Future[tuple[int, dict[str, str], bytes]]] = {}
        self.next_opaque = 1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        loads = orjson.loads
        waiters = self.waiters
        while n - pos >= 8:
            length, hlen = _PREFIX.unpack_from(buf, pos)
            end = pos + 4 + length
            if end > n:
                break
            hlen &= 0xFFFFFF
            header = loads(buf[pos + 8 : pos + 8 + hlen])
            fut = waiters.pop(header["opaque"], None)
            if fut is not None and not fut.done():
                fut.set_result((header["code"], header.get("extFields") or {},
                                buf[pos + 8 + hlen : end]))
            pos = end
        self.buf = buf[pos:]

    def connection_lost(self, exc: Exception | None) -> None:
        for fut in self.waiters.values():
            if not fut.done():
                fut.set_exception(ConnectionError("connection lost"))

    def request(self, template: Template) -> asyncio.Future[tuple[int, dict[str, str], bytes]]:
        opaque = self.next_opaque
        self.next_opaque = opaque + 1
        fut = asyncio.get_running_loop().create_future()
        self.waiters[opaque] = fut
        assert self.transport is not None
        self.transport.write(template.frame(opaque))
        return fut


async def connect(addr: str) -> LoadConnection:
    host, port = addr.rsplit(":", 1)
    _, conn = await asyncio.get_running_loop().create_connection(LoadConnection, host, int(port))
    return conn


def percentiles(lat_ns: list[int]) -> dict[str, float]:
    if not lat_ns:
        return {}
    s = sorted(lat_ns)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))] / 1e6  # noqa: E731
    return {"p50_ms": pick(0.50), "p90_ms": pick(0.90), "p99_ms": pick(0.99),
            "p999_ms": pick(0.999), "max_ms": s[-1] / 1e6}


def send_template(topic: str, queue_id: int, body: bytes, batch: int = 0) -> Template:
    props = "TAGS\x01TagA\x02WAIT\x01true\x02"
    h = SendMessageRequestHeader(
        producerGroup="bench_producer", topic=topic, defaultTopic="TBW102",
        defaultTopicQueueNums=8, queueId=queue_id, sysFlag=0,
        bornTimestamp=int(time.time() * 1000), flag=0, properties=props, reconsumeTimes=0,
        unitMode=False, batch=bool(batch) or None,
    )
    if batch:
        payload = encode_batch([body] * batch, [props] * batch)
        return Template(RemotingCommand.request(320, h.to_v2_ext(), payload))
    return Template(RemotingCommand.request(310, h.to_v2_ext(), body))


async def run_sends(addr: str, topics: list[str], queues: int, body: bytes, inflight: int,
                    seconds: float, batch: int = 0, conns: int = 1) -> dict[str, object]:
    """Keep ``inflight`` requests outstanding (split over ``conns`` connections) for ``seconds``."""
    templates = [send_template(t, q, body, batch) for t in topics for q in range(queues)]
    connections = [await connect(addr) for _ in range(conns)]
    per_msg = batch or 1
    lat: list[int] = []
    errors: dict[int, int] = {}
    sent = 0
    stop_at = time.perf_counter() + seconds

    async def worker(conn: LoadConnection, k: int) -> None:
        nonlocal sent
        i = k
        perf = time.perf_counter_ns
        add_lat = lat.append
        while time.perf_counter() < stop_at:
            t = templates[i % len(templates)]
            i += inflight
            t0 = perf()
            code, _, _ = await conn.request(t)
            add_lat(perf() - t0)
            if code:
                errors[code] = errors.get(code, 0) + 1
            else:
                sent += per_msg

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(connections[k % conns], k) for k in range(inflight)))
    dt = time.perf_counter() - t0
    for c in connections:
        assert c.transport is not None
        c.transport.close()
    return {"msgs_per_s": sent / dt, "requests": len(lat), "errors": errors,
            **percentiles(lat)}


async def run_rate(addr: str, topic: str, queues: int, body: bytes, rate: int,
                   seconds: float) -> dict[str, object]:
    """Open-loop sends at ``rate``/s (the loop's timers tick in milliseconds, so sends leave in
    bursts of about ``rate / 1000``); latency from each request's write to its response."""
    templates = [send_template(topic, q, body) for q in range(queues)]
    conn = await connect(addr)
    lat: list[int] = []
    pending: set[asyncio.Future[object]] = set()
    interval_ns = 1_000_000_000 // rate
    start = time.perf_counter_ns()
    total = int(rate * seconds)
    perf = time.perf_counter_ns
    errors = 0

    def done(t_sched: int) -> object:
        def cb(f: asyncio.Future[tuple[int, dict[str, str], bytes]]) -> None:
            nonlocal errors
            lat.append(perf() - t_sched)
            if f.exception() is not None or f.result()[0]:
                errors += 1
        return cb

    for i in range(total):
        t_sched = start + i * interval_ns
        delay = (t_sched - perf()) / 1e9
        if delay > 0.0005:
            await asyncio.sleep(delay)
        f = conn.request(templates[i % len(templates)])
        f.add_done_callback(done(perf()))  # type: ignore[arg-type]
        pending.add(f)  # type: ignore[arg-type]
        f.add_done_callback(pending.discard)  # type: ignore[arg-type]
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*pending), 10)
    dt = (perf() - start) / 1e9
    assert conn.transport is not None
    conn.transport.close()
    return {"rate": rate, "msgs_per_s": len(lat) / dt, "errors": errors, **percentiles(lat)}


async def run_consume(addr: str, topic: str, queues: int, per_queue: int, inflight: int,
                      max_msgs: int) -> dict[str, object]:
    """Pull every queue of ``topic`` from offset 0 to its end; ``inflight`` pulls outstanding."""
    conn = await connect(addr)
    offsets = dict.fromkeys(range(queues), 0)
    got = 0
    lat: list[int] = []

    def template(q: int, off: int) -> Template:
        h = PullMessageRequestHeader(
            consumerGroup="bench_consumer", topic=topic, queueId=q, queueOffset=off,
            maxMsgNums=max_msgs, sysFlag=0x4, commitOffset=0, suspendTimeoutMillis=0,
            subVersion=0, subscription="*",
        )
        return Template(RemotingCommand.request(11, h.to_ext()))

    queue_ids = list(range(queues))
    workers = min(inflight, queues)  # one pull per queue at a time, as a consumer does

    async def worker(k: int) -> None:
        nonlocal got
        perf = time.perf_counter_ns
        while True:
            live = [q for q in queue_ids[k::workers] if offsets[q] < per_queue]
            if not live:
                return
            for q in live:
                t0 = perf()
                code, ext, _body = await conn.request(template(q, offsets[q]))
                lat.append(perf() - t0)
                if code == 0:
                    nxt = int(ext["nextBeginOffset"])
                    got += nxt - offsets[q]
                    offsets[q] = nxt
                elif code in (19, 20, 21):
                    offsets[q] = int(ext.get("nextBeginOffset", offsets[q]))
                    if code == 19:
                        return

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(workers)))
    dt = time.perf_counter() - t0
    assert conn.transport is not None
    conn.transport.close()
    return {"msgs_per_s": got / dt, "messages": got, "pulls": len(lat), **percentiles(lat)}


# ------------------------------------------------------------------------------------ the broker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def broker_process(flush: str) -> Iterator[str]:
    base = Path(tempfile.mkdtemp(prefix="rocketlite-bench-", dir="."))
    ns, port = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketlite", "start", "--store", str(base / "store"),
         "--namesrv-port", str(ns), "--broker-port", str(port), "--flush", flush,
         "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    try:
        deadline = time.monotonic() + 60
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise RuntimeError(f"broker exited with {proc.returncode}")
            if "rocketlite ready" in line:
                break
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(base, ignore_errors=True)


# -------------------------------------------------------------------------------------- scenarios


def fmt(name: str, r: dict[str, object]) -> str:
    lat = ""
    if "p50_ms" in r:
        lat = (f"  p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  "
               f"p99.9 {r['p999_ms']:.2f} ms  max {r['max_ms']:.1f} ms")
    errs = f"  errors {r['errors']}" if r.get("errors") else ""
    return f"{name:<44}{r['msgs_per_s']:>12,.0f} msgs/s{lat}{errs}"


async def scenario(args: argparse.Namespace, name: str, addr: str) -> dict[str, object]:
    body = os.urandom(args.size)
    topics = [f"BenchTopic{i}" for i in range(args.topics)]
    queues = 8
    # Create the topics (auto-creation on first send) before timing.
    await run_sends(addr, topics, queues, body, min(8, args.inflight), 0.2)
    if name in ("send", "sync"):
        return await run_sends(addr, topics, queues, body, args.inflight, args.seconds,
                               conns=args.conns)
    if name == "batch":
        return await run_sends(addr, topics, queues, body, args.inflight, args.seconds,
                               batch=args.batch, conns=args.conns)
    if name == "latency":
        return await run_rate(addr, topics[0], queues, body, args.rate, args.seconds)
    if name == "consume":
        per_queue = args.preload // queues
        for q in range(queues):
            t = send_template("BenchConsume", q, body, batch=250)
            conn = await connect(addr)
            for _ in range(per_queue // 250):
                code, _, _ = await conn.request(t)
                assert code == 0, code
            assert conn.transport is not None
            conn.transport.close()
        return await run_consume(addr, "BenchConsume", queues, per_queue // 250 * 250,
                                 args.inflight, args.pull_batch)
    raise ValueError(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--broker", help="host:port of a running broker (default: start one)")
    ap.add_argument("--scenario", action="append",
                    choices=["send", "batch", "consume", "latency", "sync"],
                    help="repeatable; default: all")
    ap.add_argument("--size", type=int, default=128, help="message body bytes")
    ap.add_argument("--topics", type=int, default=1)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--conns", type=int, default=1, help="connections the in-flight window uses")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--preload", type=int, default=1_000_000, help="messages for consume")
    ap.add_argument("--pull-batch", type=int, default=32, help="maxMsgNums per pull")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    names = args.scenario or ["send", "batch", "consume", "latency", "sync"]
    try:
        import uvloop
    except ImportError:
        uvloop = None
    results: dict[str, object] = {}
    print(f"{args.size} B bodies, {args.topics} topic(s), {args.inflight} in flight "
          f"({args.conns} connection(s)); client and broker on this machine")
    for name in names:
        label = {
            "send": f"send, single messages, {args.inflight} in flight",
            "batch": f"send, batches of {args.batch}, {args.inflight} in flight",
            "consume": f"consume, pulls of {args.pull_batch}, {args.inflight} in flight",
            "latency": f"send at {args.rate:,}/s",
            "sync": f"send SYNC_FLUSH, {args.inflight} in flight",
        }[name]
        flush = "SYNC_FLUSH" if name == "sync" else "ASYNC_FLUSH"
        with contextlib.ExitStack() as stack:
            addr = args.broker or stack.enter_context(broker_process(flush))
            coro = scenario(args, name, addr)
            r = uvloop.run(coro) if uvloop else asyncio.run(coro)
        results[name] = r
        print(fmt(label, r), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
