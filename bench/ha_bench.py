"""Send throughput of a master with and without a slave, and the replication lag under load
(issue 20). Not a test: prints figures.

    python bench/ha_bench.py                      # every setup, 1,000 sends in flight, 10 s
    python bench/ha_bench.py --seconds 5 --setup sync --json out.json

Setups, each broker a separate process on loopback (``rocketlite start`` for the master, with
its NameServer; ``rocketlite broker`` for the slave), the load from ``broker_bench.run_sends``
(pipelined single SEND_MESSAGE_V2 on one connection, ``--inflight`` outstanding):

  single  ASYNC_MASTER, no slave (the reference)
  async   ASYNC_MASTER + a slave
  sync    SYNC_MASTER + a slave (every send answered after the slave's ack)

While the load runs, the master's and the slave's CommitLog max offsets are read every
``--sample-ms`` (GET_BROKER_RUNTIME_INFO, both asked at once): the lag is their difference, in
bytes. After the load, the time the slave takes to hold the master's whole log. The issue's
target: SYNC_MASTER at least 50% of the single broker's msgs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

import broker_bench as bb
from rocketlite.protocol.command import RemotingCommand

ROOT = bb.ROOT
GET_BROKER_RUNTIME_INFO = 28
SETUPS = {
    "single": ("ASYNC_MASTER", False, "single broker, ASYNC_MASTER, no slave"),
    "async": ("ASYNC_MASTER", True, "ASYNC_MASTER + slave"),
    "sync": ("SYNC_MASTER", True, "SYNC_MASTER + slave"),
}


@contextlib.contextmanager
def slave_process(namesrv: str, ha_address: str) -> Iterator[str]:
    """``rocketlite broker`` as the SLAVE of ``ha_address``, in a temporary folder (deleted):
    its broker address."""
    base = Path(tempfile.mkdtemp(prefix="rocketlite-ha-slave-"))
    port = bb.free_port()
    conf = base / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in {
        "brokerName": "broker-a", "brokerId": "1", "brokerRole": "SLAVE",
        "haMasterAddress": ha_address, "namesrvAddr": namesrv, "listenPort": str(port),
        "brokerIP1": "127.0.0.1", "storePathRootDir": str(base / "store"),
    }.items()))
    try:
        with bb.rocketlite_process(["broker", "-c", str(conf), "--no-grpc", "--log-level",
                                    "WARNING"], "slave"):
            yield f"127.0.0.1:{port}"
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def max_offset(conn: bb.LoadConnection, template: bb.Template) -> int:
    code, _, body = await conn.call(template)
    assert code == 0, code
    return int(orjson.loads(body)["table"]["commitLogMaxOffset"])


async def run(args: argparse.Namespace, addr: str, slave: str | None) -> dict[str, object]:
    body = os.urandom(args.size)
    topics, queues = ["HaBenchTopic"], 8
    await bb.run_sends(addr, topics, queues, body, 8, 0.5)  # creates the topic, warms up
    info = bb.Template(RemotingCommand.request(GET_BROKER_RUNTIME_INFO, {}))
    lags: list[int] = []
    out: dict[str, object] = {}
    if slave is None:
        out = await bb.run_sends(addr, topics, queues, body, args.inflight, args.seconds)
        return out
    mconn, sconn = await bb.connect(addr), await bb.connect(slave)
    try:
        async def caught_up() -> float:
            t0 = time.perf_counter()
            while True:
                m, s = await asyncio.gather(max_offset(mconn, info), max_offset(sconn, info))
                if s >= m:
                    return time.perf_counter() - t0
                await asyncio.sleep(0.01)

        await asyncio.wait_for(caught_up(), 60)
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                m, s = await asyncio.gather(max_offset(mconn, info), max_offset(sconn, info))
                lags.append(max(0, m - s))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), args.sample_ms / 1000)

        sampler = asyncio.ensure_future(sample())
        out = await bb.run_sends(addr, topics, queues, body, args.inflight, args.seconds)
        stop.set()
        await sampler
        out["catch_up_s"] = await asyncio.wait_for(caught_up(), 60)
    finally:
        mconn.close()
        sconn.close()
    s = sorted(lags)
    out.update(lag_samples=len(s), lag_mean_bytes=sum(s) / max(1, len(s)),
               lag_p50_bytes=s[len(s) // 2] if s else 0,
               lag_p99_bytes=s[min(len(s) - 1, int(len(s) * 0.99))] if s else 0,
               lag_max_bytes=s[-1] if s else 0)
    return out


def fmt(label: str, r: dict[str, object]) -> str:
    line = (f"{label:<40} {r['msgs_per_s']:>10,.0f} msgs/s  p50 {r.get('p50_ms', 0):.1f} ms"
            f"  p99 {r.get('p99_ms', 0):.1f} ms")
    if r.get("errors"):
        line += f"  errors {r['errors']}"
    if "lag_samples" in r:
        line += (f"\n{'':<40} lag (bytes, {r['lag_samples']} samples): mean "
                 f"{r['lag_mean_bytes']:,.0f}, p50 {r['lag_p50_bytes']:,}, p99 "
                 f"{r['lag_p99_bytes']:,}, max {r['lag_max_bytes']:,}; slave caught up "
                 f"{r['catch_up_s']:.2f} s after the load")
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--setup", action="append", choices=list(SETUPS), help="repeatable; "
                    "default: all")
    ap.add_argument("--size", type=int, default=128, help="message body bytes")
    ap.add_argument("--inflight", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--sample-ms", type=int, default=100, help="lag sampling interval")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    print(f"{args.size} B bodies, {args.inflight} in flight on one connection, {args.seconds:g} s;"
          f" load generator, master and slave processes on this machine ({os.cpu_count()} cores)")
    results: dict[str, dict[str, object]] = {}
    for name in args.setup or list(SETUPS):
        role, with_slave, label = SETUPS[name]
        ha_port = bb.free_port()
        conf = {"brokerRole": role, "haListenPort": str(ha_port), "brokerIP1": "127.0.0.1"}
        with contextlib.ExitStack() as stack:
            addr, _, ns = stack.enter_context(bb.broker_process("ASYNC_FLUSH", conf=conf))
            slave = (stack.enter_context(slave_process(ns, f"127.0.0.1:{ha_port}"))
                     if with_slave else None)
            coro = run(args, addr, slave)
            r = uvloop.run(coro) if uvloop else asyncio.run(coro)
        results[name] = r
        print(fmt(label, r), flush=True)
    if "single" in results and "sync" in results:
        ratio = float(results["sync"]["msgs_per_s"]) / float(results["single"]["msgs_per_s"])  # type: ignore[arg-type]
        print(f"SYNC_MASTER + slave / single broker: {ratio:.0%} (target >= 50%)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
