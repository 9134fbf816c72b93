"""The load scenario of the chaos suite (issue 22), shared by ``tests/chaos/test_load.py`` (a
CI-sized run that asserts) and ``scripts/chaos_load.py`` (the full run: 1,000 client connections
for 5 minutes, which prints the figures).

One ``rocketlite start`` process (NameServer and broker) and ``workers`` client processes
(this file run as a script, ``--worker``). The ``clients`` client instances are half producers,
half push consumers, each its own ``ClientInstance`` and so its own broker connection (plus one
to the NameServer). Topics have ``queues`` queues and one consumer group each, with ``queues``
consumers, so every consumer owns a queue; producer ``i`` sends to topic ``i % topics`` at
``rate`` messages a second (a random phase, so the sends spread over the second).

Each message's body is its id (``<producer>-<seq>``). A producer records the ids the broker
acknowledged (SEND_OK); a consumer the ids it received. When the send phase ends, the run waits
for the consumers to drain: every acknowledged id received by its topic's group, checked on the
union over all workers (a message handed to two consumers during a rebalance counts once; the
copies are reported as duplicates). While it runs, the broker's anonymous RSS (``RssAnon``: the
heap; the mapped store files are ``RssFile``, the page cache's business) and its open file
descriptors are sampled every second.

Verdicts (``LoadReport.failures``): an acknowledged message never consumed (loss, or a stuck
consumer: the report names the groups still behind), the broker process gone, anonymous RSS
above its cap or still growing at the end (the last quarter's median above the second quarter's
by more than ``growth_mb``), file descriptors above what the connections and the queues' files
explain.

Worker protocol (stdin/stdout lines): the worker prints ``STARTED`` once its clients run, writes
``progress-<w>.json`` (distinct ids received per topic) every second, prints ``SENT`` with its
acknowledged ids written to ``acked-<w>.json`` when its send phase ends, and on ``exit`` from
stdin stops its clients, writes ``received-<w>.json`` and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # run as a script (a worker, or via scripts/chaos_load.py)
    sys.path.insert(0, str(HERE))

from brokerhelp import ServerProcess, create_topic, free_port  # noqa: E402
from rocketlite.client import ConsumeStatus, Producer, PushConsumer  # noqa: E402
from rocketlite.client.errors import MQBrokerError, MQClientError  # noqa: E402
from rocketlite.client.instance import ClientConfig  # noqa: E402
from rocketlite.client.message import Message, MessageExt  # noqa: E402
from rocketlite.client.send_types import SendStatus  # noqa: E402
from rocketlite.protocol.bodies import ConsumeFromWhere  # noqa: E402
from rocketlite.remoting.client import RemotingClient  # noqa: E402

STARTED, SENT = "STARTED", "SENT"
T = TypeVar("T")


@dataclass(frozen=True)
class LoadPlan:
    clients: int = 1000
    """Client instances (each one broker connection): half producers, half push consumers."""
    seconds: float = 300.0
    """The send phase."""
    workers: int = 4
    """Client processes."""
    rate: float = 2.0
    """Sends per second per producer."""
    queues: int = 4
    """Queues per topic, and consumers per topic's group."""
    drain_s: float = 120.0
    """How long the consumers get to receive every acknowledged message after the send phase."""
    rss_cap_mb: float = 1024.0
    """The broker's anonymous RSS may never exceed this."""
    growth_mb: float = 64.0
    """Nor grow by more than this from the run's second quarter to its last."""

    @property
    def producers(self) -> int:
        return self.clients // 2

    @property
    def topics(self) -> int:
        return max(1, (self.clients - self.producers) // self.queues)

    @property
    def consumers(self) -> int:
        return self.topics * self.queues


@dataclass
class Sample:
    t: float
    rss_anon_mb: float
    rss_file_mb: float
    fds: int


@dataclass
class LoadReport:
    plan: LoadPlan
    acked: int = 0
    send_errors: int = 0
    consumed: int = 0
    duplicates: int = 0
    missing: dict[str, int] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    drain_s: float = 0.0
    failures: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        s = self.samples
        rss = [x.rss_anon_mb for x in s] or [0.0]
        fds = [x.fds for x in s] or [0]
        return [
            f"load: {self.plan.clients} clients ({self.plan.producers} producers, "
            f"{self.plan.consumers} push consumers in {self.plan.topics} groups) in "
            f"{self.plan.workers} processes, {self.plan.seconds:.0f} s at {self.plan.rate:g} "
            f"msgs/s each",
            f"  sent: {self.acked} acknowledged, {self.send_errors} send errors (not acknowledged)",
            f"  consumed: {self.consumed} distinct ({self.duplicates} redelivered copies), "
            f"drained {self.drain_s:.1f} s after the send phase",
            f"  broker RssAnon MiB: start {rss[0]:.0f} peak {max(rss):.0f} end {rss[-1]:.0f}; "
            f"RssFile MiB peak {max((x.rss_file_mb for x in s), default=0):.0f}",
            f"  broker fds: start {fds[0]} peak {max(fds)} end {fds[-1]}",
            f"  acknowledged and never consumed: {sum(self.missing.values())}"
            + (f" (topics {dict(sorted(self.missing.items())[:5])})" if self.missing else ""),
            "  verdict: " + ("; ".join(self.failures) if self.failures else "ok"),
        ]


def _proc_status(pid: int) -> tuple[float, float]:
    """(RssAnon, RssFile) of ``pid`` in MiB."""
    anon = file = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                anon = int(line.split()[1]) / 1024
            elif line.startswith("RssFile:"):
                file = int(line.split()[1]) / 1024
    return anon, file


def sample(pid: int, t0: float) -> Sample:
    anon, file = _proc_status(pid)
    return Sample(time.monotonic() - t0, anon, file, len(os.listdir(f"/proc/{pid}/fd")))


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run(plan: LoadPlan, tmp: Path, log: Callable[[str], object] = print) -> LoadReport:
    """The whole scenario in ``tmp``; the report (``failures`` empty: passed)."""
    _raise_fd_limit()  # inherited by the broker and the workers: 2 fds per client instance
    report = LoadReport(plan)
    ns_port, broker_port = free_port(), free_port()
    broker = ServerProcess(["start", "--store", str(tmp / "store"), "--namesrv-port", str(ns_port),
                            "--broker-port", str(broker_port), "--grpc-port", "0",
                            "--metrics-port", "0", "--dashboard-port", "0"], tmp / "broker.log")
    workers = _Workers(tmp, plan)
    try:
        broker.wait_ready(60)
        asyncio.run(_create_topics(f"127.0.0.1:{broker_port}", plan))
        t0 = time.monotonic()
        report.samples.append(sample(broker.proc.pid, t0))
        workers.start(f"127.0.0.1:{ns_port}")
        log(f"load: {plan.clients} clients started in {time.monotonic() - t0:.1f} s")
        end = time.monotonic() + plan.seconds
        while time.monotonic() < end and broker.proc.poll() is None:
            time.sleep(1.0)
            report.samples.append(sample(broker.proc.pid, t0))
        if broker.proc.poll() is None:
            workers.expect(SENT, 60)
            expected = _merge(tmp, "acked", plan.workers, set)
            report.acked = sum(map(len, expected.values()))
            report.send_errors = _total(tmp, "errors", plan.workers)
            drain_start = time.monotonic()
            while time.monotonic() - drain_start < plan.drain_s and broker.proc.poll() is None:
                report.samples.append(sample(broker.proc.pid, t0))
                got = _merge(tmp, "progress", plan.workers, int)
                if all(got.get(t, 0) >= len(ids) for t, ids in expected.items()):
                    break
                time.sleep(1.0)
            report.drain_s = time.monotonic() - drain_start
            report.failures += workers.exit()
            received = _merge(tmp, "received", plan.workers, set)
            report.duplicates = _total(tmp, "copies", plan.workers)
            report.consumed = sum(map(len, received.values()))
            report.missing = {t: len(ids - received.get(t, set())) for t, ids in expected.items()
                              if ids - received.get(t, set())}
        _judge(report, broker.proc.poll())
        return report
    finally:
        workers.kill()
        broker.stop(60) if broker.proc.poll() is None else broker.kill()


class _Workers:
    """The client processes (this file run with ``--worker``), spoken to by lines."""

    def __init__(self, tmp: Path, plan: LoadPlan) -> None:
        self.tmp, self.plan = tmp, plan
        self.procs: list[subprocess.Popen[str]] = []
        self.logs: list[IO[str]] = []

    def start(self, ns: str) -> None:
        for w in range(self.plan.workers):
            self.logs.append((self.tmp / f"worker-{w}.log").open("w"))
            self.procs.append(subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--worker", str(w),
                 "--namesrv", ns, "--dir", str(self.tmp), "--plan", json.dumps(self.plan.__dict__)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.logs[-1], text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1")))
        self.expect(STARTED, 120)

    def expect(self, word: str, timeout: float) -> None:
        """Each worker prints ``word`` within ``timeout`` seconds (or AssertionError)."""
        deadline = time.monotonic() + timeout
        for w, p in enumerate(self.procs):
            assert p.stdout is not None
            while True:
                line = p.stdout.readline()
                if not line:
                    raise AssertionError(f"worker {w} ended before {word} (exit {p.wait(10)}): "
                                         f"see {self.tmp}/worker-{w}.log")
                if line.strip() == word:
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"worker {w}: no {word} within {timeout} s")

    def exit(self) -> list[str]:
        """Tell every worker to stop and write what it received; the failures of those that
        did not exit cleanly."""
        for p in self.procs:
            assert p.stdin is not None
            p.stdin.write("exit\n")
            p.stdin.flush()
        return [f"worker {w} exited with {p.returncode}" for w, p in enumerate(self.procs)
                if p.wait(60) != 0]

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(30)
            for pipe in (p.stdin, p.stdout):
                if pipe is not None:
                    pipe.close()
        for f in self.logs:
            f.close()


def _judge(report: LoadReport, broker_exit: int | None) -> None:
    plan, s = report.plan, report.samples
    if broker_exit is not None:
        report.failures.append(f"the broker exited with {broker_exit}")
    if report.missing:
        report.failures.append(
            f"{sum(report.missing.values())} acknowledged messages never consumed (groups of "
            f"topics {sorted(report.missing)[:5]} stuck or lost)")
    if report.acked == 0:
        report.failures.append("no message was acknowledged")
    peak = max(x.rss_anon_mb for x in s)
    if peak > plan.rss_cap_mb:
        report.failures.append(f"broker RssAnon peaked at {peak:.0f} MiB > {plan.rss_cap_mb:.0f}")
    q = max(1, len(s) // 4)
    if len(s) >= 8:
        second = statistics.median(x.rss_anon_mb for x in s[q:2 * q])
        last = statistics.median(x.rss_anon_mb for x in s[-q:])
        if last > second + plan.growth_mb:
            report.failures.append(f"broker RssAnon still growing: {second:.0f} MiB in the run's "
                                   f"second quarter, {last:.0f} MiB in its last")
    # a broker and a NameServer connection per client; two per mapped ConsumeQueue file (the
    # store's and the one ``mmap`` duplicates), one file per queue in a run this size
    fd_cap = s[0].fds + 2 * plan.clients + 2 * plan.topics * plan.queues + 256
    if max(x.fds for x in s) > fd_cap:
        report.failures.append(f"broker fds peaked at {max(x.fds for x in s)} > {fd_cap}")


def _merge(tmp: Path, kind: str, workers: int, as_: Callable[[Any], T]) -> dict[str, T]:
    """The workers' ``<kind>-<w>.json`` maps, merged by topic: id sets united (``set``) or
    counts summed (``int``: the ``progress`` counts, an upper bound of the union, so the drain
    ends when they reach the acknowledged counts and the union is checked after)."""
    out: dict[str, Any] = {}
    for w in range(workers):
        try:
            part = json.loads((tmp / f"{kind}-{w}.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):  # progress: not written yet
            continue
        for topic, value in part.items():
            if as_ is set:
                out.setdefault(topic, set()).update(value)
            else:
                out[topic] = out.get(topic, 0) + value
    return out


def _total(tmp: Path, kind: str, workers: int) -> int:
    return sum(int(json.loads((tmp / f"{kind}-{w}.json").read_text())) for w in range(workers))


async def _create_topics(addr: str, plan: LoadPlan) -> None:
    client = RemotingClient()
    try:
        for t in range(plan.topics):
            await create_topic(client, addr, topic_name(t), plan.queues)
    finally:
        await client.close()


def topic_name(t: int) -> str:
    return f"load-{t}"


# -- the worker process ---------------------------------------------------------------------------

class _Worker:
    """One client process: its share of the producers and consumers (every ``workers``-th)."""

    def __init__(self, w: int, ns: str, tmp: Path, plan: LoadPlan) -> None:
        self.w, self.ns, self.tmp, self.plan = w, ns, tmp, plan
        self.received: dict[str, set[str]] = defaultdict(set)
        self.acked: dict[str, list[str]] = defaultdict(list)
        self.copies = 0
        self.errors = 0

    def config(self, name: str) -> ClientConfig:
        return ClientConfig(namesrv_addr=self.ns, instance_name=name, heartbeat_interval=10.0)

    def listener(self, topic: str) -> Callable[[list[MessageExt]], ConsumeStatus]:
        seen = self.received[topic]

        def handle(msgs: list[MessageExt]) -> ConsumeStatus:
            for m in msgs:
                mid = m.body.decode()
                if mid in seen:
                    self.copies += 1
                else:
                    seen.add(mid)
            return ConsumeStatus.CONSUME_SUCCESS
        return handle

    async def main(self) -> None:
        plan, w = self.plan, self.w
        consumers = []
        for c in range(w, plan.consumers, plan.workers):
            topic = topic_name(c // plan.queues)
            consumer = PushConsumer(f"load-g{c // plan.queues}", config=self.config(f"c{c}"),
                                    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                    consume_concurrency=1)
            consumer.subscribe(topic, "*")
            consumer.register_listener(self.listener(topic))
            consumers.append(consumer)
        producer_ids = range(w, plan.producers, plan.workers)
        producers = [Producer(f"load-p{p}", config=self.config(f"p{p}")) for p in producer_ids]
        for group in (consumers, producers):  # a few at a time: a start is a burst of requests
            for i in range(0, len(group), 25):
                await asyncio.gather(*(x.start() for x in group[i:i + 25]))
        print(STARTED, flush=True)
        progress = asyncio.create_task(self.report_progress())
        await asyncio.gather(*(self.produce(p, x)
                               for p, x in zip(producer_ids, producers, strict=True)))
        self.dump("acked", self.acked)
        self.dump("errors", self.errors)
        print(SENT, flush=True)
        loop = asyncio.get_running_loop()
        while (await loop.run_in_executor(None, sys.stdin.readline)).strip() not in ("exit", ""):
            pass
        progress.cancel()
        clients: list[Producer | PushConsumer] = [*producers, *consumers]
        for i in range(0, len(clients), 50):
            await asyncio.gather(*(x.shutdown() for x in clients[i:i + 50]),
                                 return_exceptions=True)
        self.dump("received", {t: sorted(s) for t, s in self.received.items()})
        self.dump("copies", self.copies)

    async def produce(self, p: int, producer: Producer) -> None:
        plan = self.plan
        topic = topic_name(p % plan.topics)
        await asyncio.sleep(random.random() / plan.rate)
        seq = 0
        next_at = time.monotonic()
        end = next_at + plan.seconds
        while (now := time.monotonic()) < end:
            mid = f"{p}-{seq}"
            seq += 1
            try:
                r = await producer.send(Message(topic, mid.encode(), keys=mid))
            except (MQClientError, MQBrokerError, TimeoutError, ConnectionError):
                self.errors += 1
            else:
                if r.status == SendStatus.SEND_OK:
                    self.acked[topic].append(mid)
                else:
                    self.errors += 1
            next_at = max(next_at + 1 / plan.rate, now)
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def report_progress(self) -> None:
        while True:
            self.dump("progress", {t: len(s) for t, s in self.received.items()})
            await asyncio.sleep(1.0)

    def dump(self, kind: str, value: object) -> None:
        """``<kind>-<w>.json``, replaced whole (the orchestrator may read it at any time)."""
        path = self.tmp / f"{kind}-{self.w}.json"
        part = path.with_suffix(".part")
        part.write_text(json.dumps(value))
        part.replace(path)


def _worker_main(argv: list[str]) -> None:
    a = argparse.ArgumentParser()
    a.add_argument("--worker", type=int, required=True)
    a.add_argument("--namesrv", required=True)
    a.add_argument("--dir", type=Path, required=True)
    a.add_argument("--plan", required=True)
    args = a.parse_args(argv)
    asyncio.run(_Worker(args.worker, args.namesrv, args.dir,
                        LoadPlan(**json.loads(args.plan))).main())


if __name__ == "__main__":
    _worker_main(sys.argv[1:])
