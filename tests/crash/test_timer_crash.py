"""A real crash of a broker holding timer messages: ``rocketlite start`` takes timer messages due
over the next seconds (some delivered, some still in the wheel) and is killed with SIGKILL. After
a restart every acknowledged timer message reaches its topic (at least once), none early."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, free_port, pull_queue
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.formats.message_record import MessageRecord
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.crash

TOPIC = "TimerCrash"
QUEUES = 4


def start_args(store: Path, conf: Path, ns_port: int, broker_port: int) -> list[str]:
    return ["start", "--grpc-port", "0", "--store", str(store), "-c", str(conf),
            "--namesrv-port", str(ns_port),
            "--broker-port", str(broker_port)]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def send_timers(ns: str, n: int, start_ms: int, spread_ms: int) -> dict[bytes, int]:
    """Send ``n`` timer messages due from ``start_ms`` over ``spread_ms``; the acknowledged ones,
    body -> deliver time (the broker may be killed while they go out)."""
    due = {b"t%05d" % i: start_ms + i * spread_ms // n for i in range(n)}
    async with Producer("PG", namesrv_addr=ns, send_timeout=3.0) as p:
        await p.send(Message(TOPIC, b"warm-up"))  # creates the topic
        futs = [p.send_async(Message(TOPIC, body, deliver_time_ms=t)) for body, t in due.items()]
        results = await asyncio.gather(*futs, return_exceptions=True)
    return {body: t for (body, t), r in zip(due.items(), results, strict=True)
            if not isinstance(r, BaseException)}


async def pull_all(addr: str) -> list[MessageRecord]:
    client = RemotingClient()
    try:
        out: list[MessageRecord] = []
        for q in range(QUEUES):
            out += await pull_queue(client, addr, TOPIC, q)
        return out
    finally:
        await client.close()


@pytest.mark.parametrize("kill_after_s", [0.3, 1.0, 3.0])  # while sending, pending, delivering
def test_timer_messages_survive_sigkill(tmp_path: Path, kill_after_s: float) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "mappedFileSizeCommitLog=1048576\n"
        "mappedFileSizeConsumeQueue=20000\n"
        "maxHashSlotNum=1000\n"
        "maxIndexNum=10000\n"
        f"defaultTopicQueueNums={QUEUES}\n"
        f"mappedFileSizeTimerLog={52 * 100 + 16}\n"  # 100 units a segment: recovery crosses them
        "timerFlushIntervalMs=200\n",
        encoding="utf-8",
    )
    ns_port, broker_port = free_port(), free_port()
    args = start_args(store, conf, ns_port, broker_port)
    n = 3000
    with ServerProcess(args, tmp_path / "first.log") as first:
        first.wait_ready()
        begin = now_ms()
        killer = threading.Timer(kill_after_s, first.proc.kill)  # SIGKILL
        killer.start()
        try:
            sent = asyncio.run(send_timers(f"127.0.0.1:{ns_port}", n, begin + 2000, 4000))
        finally:
            killer.join()
        first.wait(30)
    assert (store / "abort").exists(), "SIGKILL should leave the abort marker"
    assert len(sent) >= 20, "too few acknowledged sends before the kill"

    with ServerProcess(args, tmp_path / "second.log") as second:
        second.wait_ready()
        last_due = max(sent.values())
        deadline = time.monotonic() + 30
        got: list[MessageRecord] = []
        while time.monotonic() < deadline:
            time.sleep(max(0.0, (last_due - now_ms()) / 1000) + 0.5)
            got = asyncio.run(pull_all(f"127.0.0.1:{broker_port}"))
            if {m.body for m in got} >= set(sent):
                break
        assert second.stop() == 0, second.log()
    bodies = [m.body for m in got if m.body != b"warm-up"]
    missing = set(sent) - set(bodies)
    assert not missing, f"{len(missing)} timer messages lost, e.g. {sorted(missing)[:5]}"
    assert len(bodies) < 2 * n  # duplicates only for work since the last checkpoint
    for m in got:
        if m.body in sent:
            assert m.store_timestamp >= sent[m.body], "delivered before its time"
