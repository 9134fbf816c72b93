"""Load generator for a running broker (like RocketMQ's benchmark/producer.sh and consumer.sh).

Speaks Remoting directly with a lean client: each request frame is a pre-encoded template with its
opaque patched in, responses are matched by opaque, so the client spends as little of the shared
CPU as it can. Prints msgs/s and send latency percentiles.

    python bench/broker_bench.py                       # start a broker, run every scenario
    python bench/broker_bench.py --broker 127.0.0.1:10911 --scenario send --inflight 64
    python bench/broker_bench.py --scenario sync       # a SYNC_FLUSH broker
    python bench/broker_bench.py --metrics-port 0      # the broker without metrics (default on)
    python bench/broker_bench.py --scenario send --tls # over TLS (tlsServerMode=enforcing)

Scenarios:
  send     single-message SEND_MESSAGE_V2, ``--inflight`` requests outstanding
  batch    SEND_BATCH_MESSAGE of ``--batch`` messages, ``--inflight`` outstanding
  consume  PULL_MESSAGE over every queue of a preloaded topic, ``--inflight`` pulls outstanding
  latency  single sends at a fixed ``--rate``, latency percentiles
  sync     ``send`` against a broker started with flushDiskType=SYNC_FLUSH

Without ``--broker`` each scenario starts its own ``rocketlite start`` in a temporary folder (ASYNC
or SYNC flush as the scenario needs) and stops it afterwards.

``--tls`` wraps every connection of the client in TLS: the broker it starts gets
``tlsServerMode=enforcing`` (or ``--server-tls``'s mode) with a certificate made for 127.0.0.1 by
``trustme`` (the dev extra); with ``--broker``, ``--ca`` names the CA to trust (the system's
without it). ``--server-tls permissive`` without ``--tls``: plain clients on a permissive port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
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


class PullTemplate:
    """A PULL_MESSAGE frame of one queue with two placeholders, the queue offset (in extFields)
    and the opaque (after them): ``frame(opaque, offset)`` is a few concats, as the broker's
    pulls should not wait on the load generator building headers."""

    MARK = 987654321987654321

    def __init__(self, topic: str, queue_id: int, max_msgs: int) -> None:
        h = PullMessageRequestHeader(
            consumerGroup="bench_consumer", topic=topic, queueId=queue_id, queueOffset=self.MARK,
            maxMsgNums=max_msgs, sysFlag=0x4, commitOffset=0, suspendTimeoutMillis=0,
            subVersion=0, subscription="*",
        )
        cmd = RemotingCommand.request(11, h.to_ext())
        cmd.opaque = 0
        header = cmd.encode_parts()[0][8:]
        off_mark = b'"queueOffset":"%d"' % self.MARK
        i = header.index(off_mark) + len(b'"queueOffset":"')
        j = i + len(str(self.MARK))
        k = header.index(b'"opaque":0', j) + len(b'"opaque":')
        self.a, self.b, self.c = header[:i], header[j:k], header[k + 1 :]
        self.fixed = len(self.a) + len(self.b) + len(self.c)

    def frame(self, opaque: int, offset: int) -> bytes:
        o, q = b"%d" % opaque, b"%d" % offset
        hlen = self.fixed + len(o) + len(q)
        return _PREFIX.pack(4 + hlen, hlen) + self.a + q + self.b + o + self.c


OnReply = Callable[[int, dict[str, str], bytes], None]


class LoadConnection(asyncio.Protocol):
    """Pipelined requests on one connection, answered through callbacks (no task or future per
    request): ``request(template, on_reply)`` queues a frame, and every frame queued while a read
    is processed (the usual case: a reply's callback sends the next request) goes out in one
    write when the read ends, as a broker's replies do. ``call`` is the awaitable form."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.callbacks: dict[int, OnReply] = {}
        self.next_opaque = 1
        self.out: list[bytes] = []
        self.in_read = False
        self.flush_scheduled = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        loads = orjson.loads
        callbacks = self.callbacks
        self.in_read = True
        try:
            while n - pos >= 8:
                length, hlen = _PREFIX.unpack_from(buf, pos)
                end = pos + 4 + length
                if end > n:
                    break
                hlen &= 0xFFFFFF
                header = loads(buf[pos + 8 : pos + 8 + hlen])
                pos_body = pos + 8 + hlen
                pos = end
                cb = callbacks.pop(header["opaque"], None)
                if cb is not None:
                    cb(header["code"], header.get("extFields") or {}, buf[pos_body:end])
        finally:
            self.in_read = False
            self.buf = buf[pos:]
        if self.out:
            self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        callbacks, self.callbacks = self.callbacks, {}
        for cb in callbacks.values():
            cb(-1, {}, b"")

    def request(self, template: Template, on_reply: OnReply) -> None:
        opaque = self.next_opaque
        self.next_opaque = opaque + 1
        self.callbacks[opaque] = on_reply
        self.out.append(template.frame(opaque))
        self._schedule_flush()

    def pull(self, template: PullTemplate, offset: int, on_reply: OnReply) -> None:
        opaque = self.next_opaque
        self.next_opaque = opaque + 1
        self.callbacks[opaque] = on_reply
        self.out.append(template.frame(opaque, offset))
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self.in_read and not self.flush_scheduled:
            self.flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self.flush_scheduled = False
        out, self.out = self.out, []
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(out))

    async def call(self, template: Template) -> tuple[int, dict[str, str], bytes]:
        fut: asyncio.Future[tuple[int, dict[str, str], bytes]] = (
            asyncio.get_running_loop().create_future())

        def done(code: int, ext: dict[str, str], body: bytes) -> None:
            if not fut.done():
                fut.set_result((code, ext, body))
        self.request(template, done)
        return await fut

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


CLIENT_TLS: list[ssl.SSLContext] = []  # set by --tls: every connection is TLS with this context


async def connect(addr: str) -> LoadConnection:
    host, port = addr.rsplit(":", 1)
    tls = CLIENT_TLS[0] if CLIENT_TLS else None
    _, conn = await asyncio.get_running_loop().create_connection(
        LoadConnection, host, int(port), ssl=tls, server_hostname=host if tls else None)
    return conn


def tls_setup(stack: contextlib.ExitStack, client: bool, ca: str | None, server_mode: str | None
              ) -> dict[str, str]:
    """With ``client``, the client's TLS context (in ``CLIENT_TLS``); with ``server_mode`` (a
    broker this script starts), the broker.conf keys of that mode with a certificate for
    127.0.0.1 made here (removed at the end)."""
    if server_mode is None:
        if client:
            CLIENT_TLS.append(ssl.create_default_context(cafile=ca))
        return {}
    import trustme

    folder = Path(tempfile.mkdtemp(prefix="rocketlite-bench-tls-"))
    stack.callback(shutil.rmtree, folder, ignore_errors=True)
    authority = trustme.CA()
    pem = folder / "server.pem"
    authority.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    if client:
        ctx = ssl.create_default_context()
        authority.configure_trust(ctx)
        CLIENT_TLS.append(ctx)
    return {"tlsServerMode": server_mode, "tls.server.certPath": str(pem),
            "tls.server.keyPath": str(pem)}


def percentiles(lat_ns: list[int]) -> dict[str, float]:
    if not lat_ns:
        return {}
    s = sorted(lat_ns)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))] / 1e6  # noqa: E731
    return {"p50_ms": pick(0.50), "p90_ms": pick(0.90), "p99_ms": pick(0.99),
            "p999_ms": pick(0.999), "max_ms": s[-1] / 1e6}


def send_template(topic: str, queue_id: int, body: bytes, batch: int = 0,
                  uniq: bool = False) -> Template:
    """A send of ``body`` (or a batch of ``batch`` copies); with ``uniq`` each message carries
    a UNIQ_KEY, as every RocketMQ client's do (the broker indexes every one; a single send's
    template repeats its key)."""
    props = "TAGS\x01TagA\x02WAIT\x01true\x02"
    if uniq and not batch:
        props += f"UNIQ_KEY\x01{queue_id:08X}{time.time_ns():016X}00000000\x02"
    h = SendMessageRequestHeader(
        producerGroup="bench_producer", topic=topic, defaultTopic="TBW102",
        defaultTopicQueueNums=8, queueId=queue_id, sysFlag=0,
        bornTimestamp=int(time.time() * 1000), flag=0, properties=props, reconsumeTimes=0,
        unitMode=False, batch=bool(batch) or None,
    )
    if batch:
        payload = encode_batch([body] * batch, [
            f"{props}UNIQ_KEY\x01{queue_id:08X}{time.time_ns():016X}{i:08X}\x02" if uniq else props
            for i in range(batch)])
        return Template(RemotingCommand.request(320, h.to_v2_ext(), payload))
    return Template(RemotingCommand.request(310, h.to_v2_ext(), body))


async def run_sends(addr: str, topics: list[str], queues: int, body: bytes, inflight: int,
                    seconds: float, batch: int = 0, conns: int = 1, requests: int | None = None
                    ) -> dict[str, object]:
    """Keep ``inflight`` requests outstanding (split over ``conns`` connections) for ``seconds``,
    or until ``requests`` have been sent: each reply's callback sends the next of its slot."""
    templates = [send_template(t, q, body, batch) for t in topics for q in range(queues)]
    n_templates = len(templates)
    connections = [await connect(addr) for _ in range(conns)]
    per_msg = batch or 1
    lat: list[int] = []
    errors: dict[int, int] = {}
    sent = 0
    total = inflight if requests is None else requests
    live = issued = min(inflight, total)
    done = asyncio.get_running_loop().create_future()
    perf = time.perf_counter_ns
    stop_ns = perf() + int(seconds * 1e9)

    def slot(conn: LoadConnection, k: int) -> None:
        i = k
        t0 = perf()

        def on_reply(code: int, ext: dict[str, str], body: bytes) -> None:
            nonlocal i, t0, sent, live, issued
            now = perf()
            lat.append(now - t0)
            if code:
                errors[code] = errors.get(code, 0) + 1
            else:
                sent += per_msg
            if now < stop_ns and code >= 0 and (requests is None or issued < requests):
                issued += 1
                i += inflight
                t0 = now
                conn.request(templates[i % n_templates], on_reply)
                return
            live -= 1
            if live == 0 and not done.done():
                done.set_result(None)

        conn.request(templates[i % n_templates], on_reply)

    t0 = time.perf_counter()
    for k in range(live):
        slot(connections[k % conns], k)
    await done
    dt = time.perf_counter() - t0
    for c in connections:
        c.close()
    return {"msgs_per_s": sent / dt, "messages": sent, "requests": len(lat), "errors": errors,
            **percentiles(lat)}


async def run_rate(addr: str, topic: str, queues: int, body: bytes, rate: int,
                   seconds: float) -> dict[str, object]:
    """Open-loop sends at ``rate``/s (the loop's timers tick in milliseconds, so sends leave in
    bursts of about ``rate / 1000``); latency from each request's write to its response."""
    templates = [send_template(topic, q, body) for q in range(queues)]
    conn = await connect(addr)
    lat: list[int] = []
    interval_ns = 1_000_000_000 // rate
    perf = time.perf_counter_ns
    start = perf()
    total = int(rate * seconds)
    errors = 0
    answered = 0
    all_done = asyncio.get_running_loop().create_future()

    def reply_to(t_sent: int) -> OnReply:
        def cb(code: int, ext: dict[str, str], body: bytes) -> None:
            nonlocal errors, answered
            lat.append(perf() - t_sent)
            answered += 1
            if code:
                errors += 1
            if answered == total and not all_done.done():
                all_done.set_result(None)
        return cb

    for i in range(total):
        t_sched = start + i * interval_ns
        delay = (t_sched - perf()) / 1e9
        if delay > 0.0005:
            await asyncio.sleep(delay)
        conn.request(templates[i % len(templates)], reply_to(perf()))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(10):
            await all_done
    dt = (perf() - start) / 1e9
    conn.close()
    return {"rate": rate, "msgs_per_s": len(lat) / dt, "messages": len(lat), "errors": errors,
            **percentiles(lat)}


async def run_consume(addr: str, topic: str, queues: int, per_queue: int, inflight: int,
                      max_msgs: int) -> dict[str, object]:
    """Pull every queue of ``topic`` from offset 0 to its end, one pull outstanding per queue (as
    a push consumer does), over at most ``inflight`` queues at once."""
    conn = await connect(addr)
    got = 0
    lat: list[int] = []
    errors: dict[int, int] = {}
    perf = time.perf_counter_ns
    live = min(inflight, queues)
    done = asyncio.get_running_loop().create_future()
    waiting = list(range(live, queues))

    templates = [PullTemplate(topic, q, max_msgs) for q in range(queues)]

    def pull(q: int, off: int) -> None:
        t0 = perf()

        def on_reply(code: int, ext: dict[str, str], body: bytes) -> None:
            nonlocal got, live
            lat.append(perf() - t0)
            nxt = int(ext.get("nextBeginOffset", off))
            if code == 0:
                got += nxt - off
            elif code not in (19, 20, 21):
                errors[code] = errors.get(code, 0) + 1
            if code in (0, 20, 21) and nxt < per_queue:
                pull(q, nxt)
            elif waiting:
                pull(waiting.pop(), 0)
            else:
                live -= 1
                if live == 0 and not done.done():
                    done.set_result(None)

        conn.pull(templates[q], off, on_reply)

    t0 = time.perf_counter()
    for q in range(live):
        pull(q, 0)
    await done
    dt = time.perf_counter() - t0
    conn.close()
    return {"msgs_per_s": got / dt, "messages": got, "pulls": len(lat), "errors": errors,
            **percentiles(lat)}


# ------------------------------------------------------------------------------------ the broker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def rocketlite_process(args: list[str], what: str) -> Iterator[subprocess.Popen[str]]:
    """``python -m rocketlite *args`` until its ready line (60 s at most), its console read to
    the end (so it never blocks on the pipe); SIGTERM at the end, SIGKILL after 30 s."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketlite", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    ready = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "rocketlite ready" in line:
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not ready.wait(60) or proc.poll() is not None:
            raise RuntimeError(f"{what} not ready in 60 s (exit code {proc.poll()})")
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def broker_process(flush: str = "ASYNC_FLUSH", store: Path | None = None,
                   conf: dict[str, str] | None = None) -> Iterator[tuple[str, int, str]]:
    """``rocketlite start`` with its store at ``store`` (kept), or in a temporary folder (deleted),
    and ``conf`` as its broker.conf (RocketMQ keys): (broker address, pid, NameServer address)."""
    base = None
    if store is None:
        base = Path(tempfile.mkdtemp(prefix="rocketlite-bench-", dir="."))
        store = base / "store"
    ns, port = free_port(), free_port()
    extra: list[str] = []
    if conf:
        store.mkdir(parents=True, exist_ok=True)
        path = store.parent / f"{store.name}-broker.conf"
        path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        extra = ["--conf", str(path)]
    try:
        with rocketlite_process(
                ["start", "--grpc-port", "0", "--store", str(store), "--namesrv-port", str(ns),
                 "--broker-port", str(port), "--flush", flush, "--log-level", "WARNING", *extra],
                "broker") as proc:
            yield f"127.0.0.1:{port}", proc.pid, f"127.0.0.1:{ns}"
    finally:
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)


# -------------------------------------------------------------------------------------- scenarios


def fmt(name: str, r: dict[str, object]) -> str:
    lat = ""
    if "p50_ms" in r:
        lat = (f"  p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  "
               f"p99.9 {r['p999_ms']:.2f} ms  max {r['max_ms']:.1f} ms")
    errs = f"  errors {r['errors']}" if r.get("errors") else ""
    cpu = f"  client {r['client_cpu_pct']:.0f}% {r['client_us_per_msg']:.1f} us/msg"
    if "broker_cpu_pct" in r:
        cpu += f"  broker {r['broker_cpu_pct']:.0f}% {r['broker_us_per_msg']:.1f} us/msg"
    return f"{name:<44}{r['msgs_per_s']:>12,.0f} msgs/s{lat}{cpu}{errs}"


class CpuMeter:
    """CPU time (user + system) of the broker process, when the bench started it, and of this
    client, over the timed part of a scenario: where the shared cores went, per message."""

    def __init__(self, broker_pid: int | None) -> None:
        self.pid = broker_pid
        self.tick = os.sysconf("SC_CLK_TCK")
        self.t0 = self._now()

    def _broker_s(self) -> float | None:
        if self.pid is None:
            return None
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self.tick  # utime + stime

    def _now(self) -> tuple[float | None, float, float]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return self._broker_s(), ru.ru_utime + ru.ru_stime, time.perf_counter()

    def result(self, messages: int) -> dict[str, float]:
        b1, c1, w1 = self._now()
        b0, c0, w0 = self.t0
        out = {"client_cpu_pct": 100 * (c1 - c0) / (w1 - w0),
               "client_us_per_msg": 1e6 * (c1 - c0) / max(messages, 1)}
        if b0 is not None and b1 is not None:
            out["broker_cpu_pct"] = 100 * (b1 - b0) / (w1 - w0)
            out["broker_us_per_msg"] = 1e6 * (b1 - b0) / max(messages, 1)
        return out


async def scenario(args: argparse.Namespace, name: str, addr: str, pid: int | None
                   ) -> dict[str, object]:
    body = os.urandom(args.size)
    topics = [f"BenchTopic{i}" for i in range(args.topics)]
    queues = 8
    # Create the topics (auto-creation on first send) and warm up before timing.
    await run_sends(addr, topics, queues, body, min(8, args.inflight), 0.5)
    if name == "consume":
        per_queue = args.preload // queues // 250 * 250
        conn = await connect(addr)
        for q in range(queues):
            t = send_template("BenchConsume", q, body, batch=250)
            for _ in range(per_queue // 250):
                code, _, _ = await conn.call(t)
                assert code == 0, code
        conn.close()
    cpu = CpuMeter(pid)
    if name in ("send", "sync"):
        r = await run_sends(addr, topics, queues, body, args.inflight, args.seconds,
                            conns=args.conns)
    elif name == "batch":
        r = await run_sends(addr, topics, queues, body, args.inflight, args.seconds,
                            batch=args.batch, conns=args.conns)
    elif name == "latency":
        r = await run_rate(addr, topics[0], queues, body, args.rate, args.seconds)
    elif name == "consume":
        r = await run_consume(addr, "BenchConsume", queues, per_queue, args.inflight,
                              args.pull_batch)
    else:
        raise ValueError(name)
    r.update(cpu.result(int(r["messages"])))  # type: ignore[call-overload]
    return r


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
    ap.add_argument("--metrics-port", type=int, default=None,
                    help="the started broker's metricsPort (0: metrics off) [default: 5557]")
    ap.add_argument("--tls", action="store_true",
                    help="connect with TLS (a started broker: tlsServerMode=enforcing)")
    ap.add_argument("--ca", help="with --tls and --broker: the CA certificate (PEM) to trust")
    ap.add_argument("--server-tls", choices=["permissive", "enforcing"],
                    help="the started broker's tlsServerMode (default: enforcing with --tls)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    names = args.scenario or ["send", "batch", "consume", "latency", "sync"]
    conf = {} if args.metrics_port is None else {"metricsPort": str(args.metrics_port)}
    outer = contextlib.ExitStack()
    server_mode = args.server_tls or ("enforcing" if args.tls else None)
    if args.tls or server_mode:
        conf.update(tls_setup(outer, args.tls, args.ca, None if args.broker else server_mode))
    try:
        import uvloop
    except ImportError:
        uvloop = None
    results: dict[str, object] = {}
    print(f"{args.size} B bodies, {args.topics} topic(s), {args.inflight} in flight "
          f"({args.conns} connection(s)){', TLS' if args.tls else ''}"
          f"{f', broker tlsServerMode={server_mode}' if server_mode else ''}; client and broker on "
          "this machine")
    with outer:
        run_scenarios(args, names, conf or None, uvloop, results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def run_scenarios(args: argparse.Namespace, names: list[str], conf: dict[str, str] | None,
                  uvloop: object, results: dict[str, object]) -> None:
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
            addr, pid, _ = ((args.broker, None, "") if args.broker
                            else stack.enter_context(broker_process(flush, conf=conf)))
            coro = scenario(args, name, addr, pid)
            r = uvloop.run(coro) if uvloop else asyncio.run(coro)  # type: ignore[attr-defined]
        results[name] = r
        print(fmt(label, r), flush=True)


if __name__ == "__main__":
    main()
