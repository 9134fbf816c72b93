"""How often controller-mode replicas rewrite their etcd records under a steady send load (issue
20). Not a test: prints figures.

    python bench/record_rate_bench.py                  # 3 replicas, 10 s, 64 sends in flight
    python bench/record_rate_bench.py --seconds 30 --workers 16 --size 1024

A real etcd, a NameServer running the election watcher and ``--replicas`` controller-mode
brokers of one group (SYNC_MASTER), each a process on loopback. Each replica publishes its HA
connection's address at once when it changes and its CommitLog max offset and epoch at most
once a second (``broker/ha/role.py``, ``PUBLISH_S``), whatever the send rate: the figure to read
is "rewrites/s" per replica (each one etcd put), next to the sends/s that drove the offsets.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from failoverhelp import controller_group, run_etcd, send_ok, wait_in_sync  # noqa: E402
from rocketlite.client.instance import ClientConfig  # noqa: E402
from rocketlite.client.message import Message  # noqa: E402
from rocketlite.client.producer import Producer  # noqa: E402
from rocketlite.controller.etcd import EtcdController  # noqa: E402
from rocketlite.controller.state import replica_key  # noqa: E402

GROUP = "broker-rate"


async def versions(etcd: EtcdController, ids: list[int]) -> dict[int, int]:
    out = {}
    for b in ids:
        kv = await etcd.client.get(replica_key("DefaultCluster", GROUP, b).encode())
        out[b] = kv.version if kv is not None else 0
    return out


async def run(tmp: Path, etcd_url: str, args: argparse.Namespace) -> None:
    ids = list(range(1, args.replicas + 1))
    async with controller_group(tmp, etcd_url, GROUP, [None] * args.replicas) as g:
        etcd = g.etcd
        producer = Producer("RatePG", config=ClientConfig(namesrv_addr=g.ns), send_timeout=5.0)
        try:
            await producer.start()
            await send_ok(producer, "RateTopic", b"warm-up", 30)
            await wait_in_sync(etcd, GROUP, set(ids), 30)
            body = b"x" * args.size
            sent = 0
            before, start = await versions(etcd, ids), time.monotonic()
            end = start + args.seconds

            async def worker() -> None:
                nonlocal sent
                while time.monotonic() < end:
                    await producer.send(Message("RateTopic", body))
                    sent += 1

            await asyncio.gather(*(worker() for _ in range(args.workers)))
            took = time.monotonic() - start
            after = await versions(etcd, ids)
            print(f"{sent} sends in {took:.1f} s ({sent / took:,.0f}/s, {args.size} B each)")
            for b in ids:
                n = after[b] - before[b]
                print(f"  replica {b}: {n} record rewrites, {n / took:.2f}/s")
        finally:
            await producer.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="record-rate-"))
    try:
        with run_etcd(tmp) as url:
            asyncio.run(run(tmp, url, args))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
