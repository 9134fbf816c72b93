"""Send and receive msgs/s through the official 5.x Python client over gRPC, next to the same
client shape over Remoting with rocketlite's own client, and the broker's CPU per message for each.

    python bench/grpc_bench.py                      # start a broker, 20 000 messages each way
    python bench/grpc_bench.py --n 5000 --window 32 --body-bytes 1024

Rows (each on its own topic, one broker for all, started here with its own store and ports):
  grpc send       ``Producer.send_async`` of rocketmq-python-client 5.1.2 (its venv,
                  ``.conformance-venv5``; ``conformance/grpc-python/bench_client.py``), --window
                  in flight
  grpc receive    its ``SimpleConsumer.receive(32)`` + one ``ack`` per message (POP underneath),
                  a pool of --window ack threads
  remoting send   rocketlite's ``Producer.send_async``, --window in flight (in this process)
  remoting recv   rocketlite's ``PushConsumer`` (PULL_MESSAGE, batches of 32, offsets committed)

The broker's CPU time (utime + stime from /proc/<pid>/stat) is read at the start and the end of
each row's timed part; ``broker us/msg`` is the difference per message, the figure that says what
the gRPC front costs next to Remoting on the shared cores. The 5.x client is a subprocess; its
own start (QueryRoute, Telemetry) is outside the timed part. Run ``scripts/conformance_setup.sh``
first (it makes the venv).
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
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
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


async def remoting_send(addrs: BrokerAddrs, topic: str, args: argparse.Namespace
                        ) -> dict[str, float]:
    body = b"x" * args.body_bytes
    async with Producer(f"{topic}_P", namesrv_addr=addrs.namesrv) as p:
        p.async_window = args.window
        await p.send(Message(topic, body, tags="Bench"))  # the route, outside the timed part
        meter = CpuMeter(addrs.pid)
        t0 = time.perf_counter()
        pending: collections.deque[asyncio.Future[object]] = collections.deque()
        for _ in range(args.n - 1):
            pending.append(p.send_async(Message(topic, body, tags="Bench")))  # type: ignore[arg-type]
            if len(pending) >= args.window:
                await pending.popleft()
        await p.flush()
        for f in pending:
            await f
        seconds = time.perf_counter() - t0
    return {"messages": args.n, "msgs_per_s": (args.n - 1) / seconds, "errors": 0,
            **meter.result(args.n - 1)}


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
    return f"{name:<16}{int(r['messages']):>9}{r['msgs_per_s']:>12,.0f}  {broker}{errors}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="messages per row")
    ap.add_argument("--window", type=int, default=64, help="sends (or ack threads) in flight")
    ap.add_argument("--body-bytes", type=int, default=128)
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--rows", default="grpc,remoting",
                    help="which rows: grpc, remoting or both (comma separated)")
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
            results["remoting send"] = asyncio.run(remoting_send(addrs, remoting_topic, args))
            results["remoting recv"] = asyncio.run(remoting_receive(addrs, remoting_topic,
                                                                    args.n))
    print(f"{args.n} messages of {args.body_bytes} B per row, window {args.window}, "
          f"{args.queues} queues, one broker (pid CPU from /proc/<pid>/stat)")
    print(f"{'row':<16}{'messages':>9}{'msgs/s':>12}  {'broker us/msg':>10} {'CPU':>8}")
    for name, r in results.items():
        print(row(name, r))
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
