"""Send and receive msgs/s through the official 5.x Python client over gRPC, next to the same
client shape over Remoting with rocketlite's own client, and the broker's CPU per message for each.

    python bench/grpc_bench.py                      # start a broker, 20 000 messages each way
    python bench/grpc_bench.py --n 5000 --window 32 --body-bytes 1024
    python bench/grpc_bench.py --no-match-rate      # without the paced Remoting rows

Rows (one broker for all, started here with its own store and ports; the gRPC rows on topic
BenchGrpc, the Remoting rows on BenchRemoting, each consumer row with its own group):
  grpc send       ``Producer.send_async`` of rocketmq-python-client 5.1.2 (its venv,
                  ``.conformance-venv5``; ``conformance/grpc-python/bench_client.py``), --window
                  in flight
  grpc receive    its ``SimpleConsumer.receive(32)`` + one ``ack`` per message (POP underneath),
                  a pool of --window ack threads
  remoting send   rocketlite's ``Producer.send_async``, --window in flight (in this process),
                  as fast as it goes
  remoting pull   rocketlite's ``PushConsumer`` (PULL_MESSAGE, batches of 32, offsets committed):
                  not the gRPC receive's shape, kept as the Remoting consumer's best case
  remoting pop    rocketlite's ``SimpleConsumer.receive(32)`` (POP_MESSAGE) + one ``ack``
                  (ACK_MESSAGE) per message, --window acks in flight, up to 4 x --window
                  pending (the grpc receive row's shape over Remoting), as fast as it goes
  remoting send @grpc rate, remoting pop @grpc rate (``--match-rate``, the default, with the gRPC
                  rows): the same two rows paced by a token bucket to the msgs/s the grpc send
                  (receive) row reached: the sending (receiving) loop takes a token per message;
                  the bucket holds at most max(32, --window) tokens, so time lost to a stall is
                  not made up at the unpaced rate (the summary shows the rate reached)

The broker's CPU time (utime + stime from /proc/<pid>/stat) is read at the start and the end of
each row's timed part; ``broker us/msg`` is the difference per message, the figure that says what
the gRPC front costs next to Remoting on the shared cores. The official client reaches a few
thousand msgs/s, the unpaced Remoting rows tens of thousands: at that rate the broker reads many
requests a wake-up and writes many replies a syscall, so its CPU per message is lower for that
reason alone. The paced rows remove that difference: the same rate, the same window. /proc counts
CPU time in ticks of 10 ms: 3.3 us a message over 3,000 messages, 0.5 us over 20,000. The last
lines give, per direction, gRPC broker us/msg over Remoting broker us/msg, unpaced and paced (send
over remoting send; receive over remoting pop). ``--json`` prints the rows as one object, row name
to figures; the paced rows add ``target_msgs_per_s``, the grpc rows ``broker_ratio_unpaced`` and
``broker_ratio_matched`` (the summary's ratios).

The 5.x client is a subprocess; its own start (QueryRoute, Telemetry) is outside the timed part.
Run ``scripts/conformance_setup.sh`` first (it makes the venv).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from broker_bench import CpuMeter, free_port
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.client.simple_consumer import PopMessage, SimpleConsumer
from rocketlite.protocol.bodies import ConsumeFromWhere
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import CreateTopicRequestHeader
from rocketlite.remoting.client import RemotingClient

ROOT = Path(__file__).resolve().parent.parent
VENV5 = Path(os.environ.get("CONFORMANCE_VENV5", ROOT / ".conformance-venv5"))
BENCH_CLIENT = ROOT / "conformance" / "grpc-python" / "bench_client.py"
READY_TIMEOUT_S = 60.0
ROW_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class BrokerAddrs:
    namesrv: str
    broker: str
    grpc: str
    pid: int


@contextlib.contextmanager
def broker_with_front() -> Iterator[BrokerAddrs]:
    """``rocketlite start`` with the gRPC front on a free port, its store in a temporary folder
    (deleted after); stopped with SIGTERM (SIGKILL after 30 s)."""
    base = Path(tempfile.mkdtemp(prefix="rocketlite-bench-", dir="."))
    ns, port, grpc = free_port(), free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketlite", "start", "--store", str(base / "store"),
         "--namesrv-port", str(ns), "--broker-port", str(port), "--grpc-port", str(grpc),
         "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    ready = threading.Event()
    console: collections.deque[str] = collections.deque(maxlen=50)

    def drain() -> None:  # read the console to its end, so the broker never blocks on the pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            console.append(line)
            if "rocketlite ready" in line:
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not ready.wait(READY_TIMEOUT_S) or proc.poll() is not None:
            raise RuntimeError(f"broker not ready in {READY_TIMEOUT_S} s (exit code "
                               f"{proc.poll()}):\n{''.join(console)}")
        yield BrokerAddrs(f"127.0.0.1:{ns}", f"127.0.0.1:{port}", f"127.0.0.1:{grpc}", proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(base, ignore_errors=True)


async def create_topics(addrs: BrokerAddrs, topics: list[str], queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC for each, as ``mqadmin updateTopic`` does (the 5.x client's
    QueryRoute needs the topic to exist)."""
    client = RemotingClient()
    try:
        for topic in topics:
            h = CreateTopicRequestHeader(topic=topic, defaultTopic="TBW102", readQueueNums=queues,
                                         writeQueueNums=queues, perm=6,
                                         topicFilterType="SINGLE_TAG")
            r = await client.invoke(addrs.broker, RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext()), 5.0)
            if r.code != 0:
                raise RuntimeError(f"UPDATE_AND_CREATE_TOPIC {topic}: {r.code} {r.remark}")
    finally:
        await client.close()


def grpc_row(addrs: BrokerAddrs, op: str, topic: str, args: argparse.Namespace,
             home: Path) -> dict[str, float]:
    """Run bench_client.py (the 5.x client, its venv); broker CPU from its 'ready' to 'done'."""
    python = VENV5 / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} is missing: run scripts/conformance_setup.sh first")
    argv = [str(python), str(BENCH_CLIENT), "--endpoints", addrs.grpc, "--topic", topic,
            "--group", f"{topic}_G", "--run-id", "bench", "--op", op, "--n", str(args.n),
            "--window", str(args.window), "--body-bytes", str(args.body_bytes),
            "--deadline-ms", str(int(ROW_TIMEOUT_S * 1000))]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["HOME"] = str(home)  # the client logs under $HOME/logs/rocketmq_python
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=BENCH_CLIENT.parent, env=env)
    assert proc.stdout is not None
    meter: CpuMeter | None = None
    done: dict[str, float] | None = None
    lines: collections.deque[str] = collections.deque(maxlen=20)
    for line in proc.stdout:
        lines.append(line)
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "ready":
            meter = CpuMeter(addrs.pid)
        elif event.get("event") == "done" and meter is not None:
            done = {"messages": event["messages"], "msgs_per_s": event["msgsPerS"],
                    "errors": event["errors"], **meter.result(int(event["messages"]))}
    proc.wait(30)
    if done is None:
        raise RuntimeError(f"grpc {op}: no result (exit {proc.returncode}):\n{''.join(lines)}")
    return done


class TokenBucket:
    """Pacing to ``rate`` messages a second: ``take(k)`` spends k tokens and, when that leaves the
    bucket in debt, sleeps until the debt is refilled. Tokens refill continuously up to ``burst``
    (what an oversleep may be caught up by at once); the bucket starts empty."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = 0.0
        self.last = time.perf_counter()

    async def take(self, k: int = 1) -> None:
        now = time.perf_counter()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate) - k
        self.last = now
        if self.tokens < 0:
            await asyncio.sleep(-self.tokens / self.rate)


def pacer(rate: float | None, window: int) -> TokenBucket | None:
    return None if rate is None else TokenBucket(rate, max(32, window))


async def remoting_send(addrs: BrokerAddrs, topic: str, args: argparse.Namespace,
                        rate: float | None = None) -> dict[str, float]:
    """``args.n`` messages by ``send_async``, --window in flight; at ``rate`` msgs/s if given."""
    body = b"x" * args.body_bytes
    async with Producer(f"{topic}_P", namesrv_addr=addrs.namesrv) as p:
        p.async_window = args.window
        await p.send(Message(topic, body, tags="Bench"))  # the route, outside the timed part
        bucket = pacer(rate, args.window)
        meter = CpuMeter(addrs.pid)
        t0 = time.perf_counter()
        pending: collections.deque[asyncio.Future[object]] = collections.deque()
        for _ in range(args.n - 1):
            if bucket is not None:
                await bucket.take()
            pending.append(p.send_async(Message(topic, body, tags="Bench")))  # type: ignore[arg-type]
            if len(pending) >= args.window:
                await pending.popleft()
        await p.flush()
        for f in pending:
            await f
        seconds = time.perf_counter() - t0
    out = {"messages": args.n, "msgs_per_s": (args.n - 1) / seconds, "errors": 0,
           **meter.result(args.n - 1)}
    if rate is not None:
        out["target_msgs_per_s"] = rate
    return out


async def remoting_pop(addrs: BrokerAddrs, topic: str, group: str, args: argparse.Namespace,
                       rate: float | None = None) -> dict[str, float]:
    """The grpc receive row's shape over Remoting: ``receive(32)`` in a loop (POP, long poll
    2 s, invisible 30 s), each message acked by its own ACK_MESSAGE, --window acks in flight and
    up to 4 x --window pending (bench_client.py's ack thread pool), until ``args.n`` messages
    were acked; at ``rate`` msgs/s if given (a token per message received)."""
    errors = 0
    window = asyncio.Semaphore(args.window)

    async def ack(c: SimpleConsumer, m: PopMessage) -> None:
        nonlocal errors
        async with window:
            try:
                await c.ack(m)
            except (MQBrokerError, MQClientError):  # counted, as bench_client.py counts them
                errors += 1

    async with SimpleConsumer(group, namesrv_addr=addrs.namesrv, subscriptions={topic: "*"},
                              await_duration=2,
                              consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET) as c:
        bucket = pacer(rate, args.window)
        pending: collections.deque[asyncio.Task[None]] = collections.deque()
        received = 0
        meter = CpuMeter(addrs.pid)
        t0 = time.perf_counter()
        async with asyncio.timeout(ROW_TIMEOUT_S):
            while received < args.n:
                msgs = await c.receive(32, 30)
                received += len(msgs)
                pending.extend(asyncio.create_task(ack(c, m)) for m in msgs)
                while len(pending) > 4 * args.window:
                    await pending.popleft()
                if bucket is not None and msgs:
                    await bucket.take(len(msgs))
            for t in pending:
                await t
        seconds = time.perf_counter() - t0
    out = {"messages": received, "msgs_per_s": received / seconds, "errors": errors,
           **meter.result(received)}
    if rate is not None:
        out["target_msgs_per_s"] = rate
    return out


async def remoting_receive(addrs: BrokerAddrs, topic: str, n: int) -> dict[str, float]:
    got = 0
    finished = asyncio.Event()

    def handler(batch: list[MessageExt]) -> ConsumeStatus:
        nonlocal got
        got += len(batch)
        if got >= n:
            finished.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(f"{topic}_G", config=ClientConfig(namesrv_addr=addrs.namesrv),
                     pull_batch_size=32, consume_message_batch_max_size=32,
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic)
    c.register_listener(handler)
    meter = CpuMeter(addrs.pid)
    t0 = time.perf_counter()
    await c.start()
    async with asyncio.timeout(ROW_TIMEOUT_S):
        await finished.wait()
    seconds = time.perf_counter() - t0
    result = {"messages": got, "msgs_per_s": got / seconds, "errors": 0, **meter.result(got)}
    await c.shutdown()
    return result


def row(name: str, r: dict[str, float]) -> str:
    broker = (f"{r['broker_us_per_msg']:>10.1f} {r['broker_cpu_pct']:>7.0f}%"
              if "broker_us_per_msg" in r else f"{'-':>10} {'-':>8}")
    errors = f"  errors {int(r['errors'])}" if r.get("errors") else ""
    return f"{name:<26}{int(r['messages']):>9}{r['msgs_per_s']:>12,.0f}  {broker}{errors}"


SUMMARY = (("send", "grpc send", "remoting send"), ("receive", "grpc receive", "remoting pop"))
"""(direction, gRPC row, the Remoting row of the same shape; its paced twin adds RATE)."""
RATE = " @grpc rate"


def ratio(results: dict[str, dict[str, float]], grpc: str, remoting: str) -> float | None:
    g, r = results.get(grpc, {}), results.get(remoting, {})
    if "broker_us_per_msg" not in g or not r.get("broker_us_per_msg"):
        return None
    return g["broker_us_per_msg"] / r["broker_us_per_msg"]


def summary(results: dict[str, dict[str, float]]) -> list[str]:
    """Per direction: gRPC broker us/msg over Remoting's, unpaced and at the gRPC row's rate;
    the grpc row gets them as ``broker_ratio_unpaced`` and ``broker_ratio_matched``."""
    lines = []
    for direction, grpc, remoting in SUMMARY:
        parts = []
        for label, key, name in (("unpaced", "broker_ratio_unpaced", remoting),
                                 ("at the gRPC rate", "broker_ratio_matched", remoting + RATE)):
            x = ratio(results, grpc, name)
            if x is not None:
                results[grpc][key] = x
                r = results[name]
                reached = (f" at {r['msgs_per_s']:,.0f} of {r['target_msgs_per_s']:,.0f} msgs/s"
                           if "target_msgs_per_s" in r else "")
                parts.append(f"{label} {x:.2f}x ({results[grpc]['broker_us_per_msg']:.1f} / "
                             f"{r['broker_us_per_msg']:.1f} us, {name}{reached})")
        if parts:
            lines.append(f"{direction}: gRPC / Remoting broker us/msg: " + "; ".join(parts))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="messages per row")
    ap.add_argument("--window", type=int, default=64, help="sends (or ack threads) in flight")
    ap.add_argument("--body-bytes", type=int, default=128)
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--rows", default="grpc,remoting",
                    help="which rows: grpc, remoting or both (comma separated)")
    ap.add_argument("--match-rate", action=argparse.BooleanOptionalAction, default=True,
                    help="also run the remoting send and pop rows paced to the grpc rows' "
                         "msgs/s (needs the grpc rows)")
    ap.add_argument("--json", action="store_true", help="also print the rows as JSON")
    args = ap.parse_args()
    if args.n < 2 or args.window < 1 or args.body_bytes < 1 or args.queues < 1:
        ap.error("--n >= 2, --window, --body-bytes and --queues >= 1")
    rows = {r.strip() for r in args.rows.split(",") if r.strip()}
    if not rows or rows - {"grpc", "remoting"}:
        ap.error("--rows takes grpc, remoting or grpc,remoting")
    results: dict[str, dict[str, float]] = {}
    with broker_with_front() as addrs, tempfile.TemporaryDirectory() as home:
        grpc_topic, remoting_topic = "BenchGrpc", "BenchRemoting"
        asyncio.run(create_topics(addrs, [grpc_topic, remoting_topic], args.queues))
        if "grpc" in rows:
            results["grpc send"] = grpc_row(addrs, "send", grpc_topic, args, Path(home))
            results["grpc receive"] = grpc_row(addrs, "receive", grpc_topic, args, Path(home))
        if "remoting" in rows:
            # Every Remoting row's messages come from the unpaced send (n on BenchRemoting; the
            # paced send adds n more): each consumer row has its own group from offset 0.
            results["remoting send"] = asyncio.run(remoting_send(addrs, remoting_topic, args))
            if args.match_rate and "grpc send" in results:
                results["remoting send" + RATE] = asyncio.run(remoting_send(
                    addrs, remoting_topic, args, results["grpc send"]["msgs_per_s"]))
            results["remoting pull"] = asyncio.run(remoting_receive(addrs, remoting_topic,
                                                                    args.n))
            results["remoting pop"] = asyncio.run(remoting_pop(
                addrs, remoting_topic, f"{remoting_topic}_POP", args))
            if args.match_rate and "grpc receive" in results:
                results["remoting pop" + RATE] = asyncio.run(remoting_pop(
                    addrs, remoting_topic, f"{remoting_topic}_POP_RATE", args,
                    results["grpc receive"]["msgs_per_s"]))
    print(f"{args.n} messages of {args.body_bytes} B per row, window {args.window}, "
          f"{args.queues} queues, one broker (pid CPU from /proc/<pid>/stat)")
    print(f"{'row':<26}{'messages':>9}{'msgs/s':>12}  {'broker us/msg':>10} {'CPU':>8}")
    for name, r in results.items():
        print(row(name, r))
    for line in summary(results):
        print(line)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
