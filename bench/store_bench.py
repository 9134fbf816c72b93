"""Storage engine benchmarks: print figures, assert nothing.

Measures, in one run on this machine:
  * the disk's own sequential write bandwidth (1 MiB pwrite + one fdatasync at the end),
  * appends/s and MB/s for 128 B, 1 KiB and 4 KiB bodies, ASYNC_FLUSH and SYNC_FLUSH,
    with 1, 100 and 10,000 topics (one queue each), appended in batches,
  * dispatch lag (time from the end of the appends until every ConsumeQueue unit is written),
  * recovery time of a 1 GiB CommitLog after a crash (abort file present, full CRC re-verify).

Usage: python bench/store_bench.py [--quick] [--dir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from rocketlite.formats.properties import encode_properties
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore

MiB = 1 << 20


def disk_bandwidth(directory: Path, total: int) -> float:
    path = directory / "disk-bench.bin"
    chunk = os.urandom(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for pos in range(0, total, MiB):
            os.pwrite(fd, chunk, pos)
        os.fdatasync(fd)
        dt = time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink()
    return total / dt / 1e6


def make_config(root: Path, flush: str, segment: int = 1 << 30, index: bool = True) -> StoreConfig:
    return StoreConfig.from_properties({
        "storePathRootDir": str(root),
        "flushDiskType": flush,
        "mappedFileSizeCommitLog": str(segment),
        "messageIndexEnable": "true" if index else "false",
    })


def bench_append(root: Path, flush: str, body_size: int, topics: int, total_bytes: int,
                 batch: int) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    n = max(batch, total_bytes // body_size)
    body = os.urandom(body_size)
    props = encode_properties({"TAGS": "TagA"})
    names = [f"BenchTopic{t}" for t in range(topics)]
    msgs = [MessageToStore(topic=names[i % topics], body=body, properties=props)
            for i in range(min(n, 100_000))]
    with MessageStore(make_config(root, flush)) as store:
        # warm up: create every topic's ConsumeQueue before timing
        store.put_messages_sync(msgs[: max(topics, 1)])
        deadline = time.monotonic() + 120
        while store.dispatcher.dispatch_from < store.commitlog.max_offset:
            if time.monotonic() > deadline:
                break
            time.sleep(0.001)
        done = 0
        pending = []
        t0 = time.perf_counter()
        while done < n:
            chunk = msgs[done % len(msgs): done % len(msgs) + batch]
            put = store.put_messages(chunk)
            if put.flushed is not None:
                pending.append(put.flushed)
                if len(pending) > 64:
                    pending.pop(0).result(5)
            done += len(chunk)
        for f in pending:
            f.result(10)
        dt = time.perf_counter() - t0
        t1 = time.perf_counter()
        while store.dispatcher.dispatch_from < store.commitlog.max_offset:
            time.sleep(0.0005)
        lag = time.perf_counter() - t1
    shutil.rmtree(root, ignore_errors=True)
    return {"msgs_per_s": done / dt, "mb_per_s": done * body_size / dt / 1e6,
            "dispatch_lag_s": lag, "messages": done}


def bench_recovery(root: Path, size: int) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    body = os.urandom(1024)
    cfg = make_config(root, "ASYNC_FLUSH", segment=1 << 30)
    msgs = [MessageToStore(topic="RecoverTopic", body=body, queue_id=i % 4) for i in range(1000)]
    with MessageStore(cfg) as store:
        while store.commitlog.max_offset < size:
            store.put_messages(msgs)
    cfg.abort_path.touch()
    t0 = time.perf_counter()
    store = MessageStore(cfg).start()
    dt = time.perf_counter() - t0
    rec = store.recovery
    store.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    return {"bytes": size, "seconds": dt, "records": rec.records if rec else 0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller volumes, for a smoke run")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="rocketlite-bench-", dir="."))
    base.mkdir(parents=True, exist_ok=True)
    volume = 64 * MiB if args.quick else 512 * MiB
    out: dict[str, object] = {}
    disk = disk_bandwidth(base, volume)
    out["disk_seq_write_mb_s"] = disk
    print(f"disk sequential write (1 MiB pwrite + fdatasync): {disk:,.0f} MB/s")
    rows = []
    print(f"{'flush':<12}{'body':>6}{'topics':>8}{'msgs/s':>12}{'MB/s':>9}{'%disk':>7}"
          f"{'dispatch lag s':>16}")
    for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        for body in (128, 1024, 4096):
            for topics in (1, 100, 10_000):
                r = bench_append(base / "store", flush, body, topics, volume // 2, batch=256)
                r.update(flush=flush, body=body, topics=topics)
                rows.append(r)
                print(f"{flush:<12}{body:>6}{topics:>8}{r['msgs_per_s']:>12,.0f}"
                      f"{r['mb_per_s']:>9,.0f}{100 * r['mb_per_s'] / disk:>6.0f}%"
                      f"{r['dispatch_lag_s']:>16.3f}")
    out["append"] = rows
    rec = bench_recovery(base / "store", 128 * MiB if args.quick else 1 << 30)
    out["recovery"] = rec
    print(f"recovery after a crash of {rec['bytes'] / MiB:,.0f} MiB CommitLog "
          f"({rec['records']:,.0f} records, CRC verified): {rec['seconds']:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    if args.dir is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
