"""A real crash of a broker holding delay-level messages: ``rocketlite start`` (levels 1s 2s 3s)
takes delayed messages (some delivered, some waiting in SCHEDULE_TOPIC_XXXX) and is killed with
SIGKILL. After a restart every acknowledged message reaches its topic (at least once: what was
delivered after the last delayOffset.json write comes again), none before its delay."""

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

TOPIC = "DelayCrash"
QUEUES = 4
LEVELS_MS = (1000, 2000, 3000)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def send_delayed(ns: str, n: int) -> dict[bytes, int]:
    """Send ``n`` messages over levels 1-3; the acknowledged ones, body -> earliest deliver time
    (the time before the send + the level's delay)."""
    async with Producer("PG", namesrv_addr=ns, send_timeout=3.0) as p:
        await p.send(Message(TOPIC, b"warm-up"))  # creates the topic
        due: dict[bytes, int] = {}
        for start in range(0, n, 100):
            t = now_ms()
            bodies = [b"d%05d" % i for i in range(start, min(n, start + 100))]
            futs = [p.send_async(Message(TOPIC, b, delay_level=1 + int(b[1:]) % 3))
                    for b in bodies]
            results = await asyncio.gather(*futs, return_exceptions=True)
            for b, r in zip(bodies, results, strict=True):
                if not isinstance(r, BaseException):
                    due[b] = t + LEVELS_MS[int(b[1:]) % 3]
            await asyncio.sleep(0.05)
    return due


async def pull_all(addr: str) -> list[MessageRecord]:
    client = RemotingClient()
    try:
        out: list[MessageRecord] = []
        for q in range(QUEUES):
            out += await pull_queue(client, addr, TOPIC, q)
        return out
    finally:
        await client.close()


@pytest.mark.parametrize("kill_after_s", [0.5, 2.0, 3.5])  # sending, delivering, mostly done
def test_delayed_messages_survive_sigkill(tmp_path: Path, kill_after_s: float) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=4194304\n"
                    f"defaultTopicQueueNums={QUEUES}\n"
                    "messageDelayLevel=1s 2s 3s\n"
                    "flushDelayOffsetInterval=1000\n", encoding="utf-8")
    ns_port, broker_port = free_port(), free_port()
    args = ["start", "--grpc-port", "0", "--store", str(store), "-c", str(conf),
            "--namesrv-port", str(ns_port),
            "--broker-port", str(broker_port)]
    n = 2000
    with ServerProcess(args, tmp_path / "first.log") as first:
        first.wait_ready()
        killer = threading.Timer(kill_after_s, first.proc.kill)  # SIGKILL
        killer.start()
        try:
            sent = asyncio.run(send_delayed(f"127.0.0.1:{ns_port}", n))
        finally:
            killer.join()
        first.wait(30)
    assert (store / "abort").exists(), "SIGKILL should leave the abort marker"
    assert len(sent) >= 20, "too few acknowledged sends before the kill"

    with ServerProcess(args, tmp_path / "second.log") as second:
        second.wait_ready()
        deadline = time.monotonic() + 30
        got: list[MessageRecord] = []
        while time.monotonic() < deadline:
            time.sleep(max(0.0, (max(sent.values()) - now_ms()) / 1000) + 0.5)
            got = asyncio.run(pull_all(f"127.0.0.1:{broker_port}"))
            if {m.body for m in got} >= set(sent):
                break
        assert second.stop() == 0, second.log()
    bodies = [m.body for m in got if m.body != b"warm-up"]
    missing = set(sent) - set(bodies)
    assert not missing, f"{len(missing)} delayed messages lost, e.g. {sorted(missing)[:5]}"
    assert len(bodies) <= 2 * n  # duplicates only for deliveries since the last offset write
    for m in got:
        if m.body in sent:
            assert m.store_timestamp >= sent[m.body], "delivered before its delay"
