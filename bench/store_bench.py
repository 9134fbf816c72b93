"""Storage engine benchmarks: print figures, assert nothing.

Measures, in one run on this machine:
  * the disk's own sequential write bandwidth (1 MiB pwrite + one fdatasync at the end),
  * appends/s and MB/s for 128 B, 1 KiB and 4 KiB bodies, ASYNC_FLUSH and SYNC_FLUSH,
    with 1, 100 and 10,000 topics (one queue each), appended as batches of one topic each
    (``MessageStore.put_batch``, what SEND_BATCH_MESSAGE does) with the dispatcher running,
  * dispatch lag (time from the end of the appends until every ConsumeQueue unit is written)
    and the end-to-end rate (messages / (append time + lag)),
  * recovery time of a 1 GiB CommitLog after a crash (abort file present, full CRC re-verify).

  * CPU time per message (``time.process_time``, steadier than the wall clock on a shared
    machine) of ``put_batch`` of 128 B and of dispatching it, without and with UNIQ_KEY.

Usage: python bench/store_bench.py [--quick] [--dir DIR] [--json OUT]
                                   [--only append|recovery|cpu] [--recovery-mib N]

``--only recovery`` skips the disk and append rows; the recovery figure also gives the CPU time
of the start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

from rocketlite.formats.properties import encode_properties
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageBatch, MessageToStore
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


def wait_dispatch(store: MessageStore, timeout_s: float) -> float:
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    while store.dispatcher.dispatch_from < store.commitlog.max_offset:
        if time.monotonic() > deadline:
            raise SystemExit(f"dispatch did not catch up within {timeout_s} s")
        time.sleep(0.0005)
    return time.perf_counter() - t0


WARM_UP_S = 0.5


def bench_append(root: Path, flush: str, body_size: int, topics: int, total_bytes: int,
                 batch: int, uniq_keys: bool, dispatch: bool,
                 min_seconds: float = 0.0) -> dict[str, float]:
    """Append ``total_bytes`` of bodies (and go on for at least ``min_seconds``: short runs
    measure the page cache's mood) as batches of ``batch`` messages (one topic per batch,
    topics in turn). With ``dispatch`` the dispatcher runs alongside and the figure is how long
    it then takes to catch up (the lag); without, it is paused and the figure is how long it
    takes alone to dispatch everything (its own rate)."""
    shutil.rmtree(root, ignore_errors=True)
    os.sync()  # the previous row's dirty pages are written back on its time, not on this row's
    n = max(batch, total_bytes // body_size)
    bodies = [os.urandom(body_size) for _ in range(batch)]
    names = [f"BenchTopic{t}" for t in range(topics)]

    def props(i: int) -> bytes:
        d = {"TAGS": "TagA"}
        if uniq_keys:
            d["UNIQ_KEY"] = f"{i:032X}"
        return encode_properties(d).encode()

    same = [props(0)] * batch
    batches = [MessageBatch(topic=names[t], queue_id=0, bodies=bodies,
                            properties=[props(t * batch + i) for i in range(batch)]
                            if uniq_keys else same)
               for t in range(topics)]
    with MessageStore(make_config(root, flush, index=uniq_keys)) as store:
        for name in names:  # create every topic's ConsumeQueue before timing
            store.put_batch(MessageBatch(topic=name, queue_id=0, bodies=bodies[:1],
                                         properties=same[:1]))
        warm_until = time.perf_counter() + WARM_UP_S  # fault in code paths and the first pages
        i = 0
        while time.perf_counter() < warm_until:
            put = store.put_batch(batches[i])
            i = i + 1 if i + 1 < topics else 0
            if put.flushed is not None:
                put.flushed.result(5)
        wait_dispatch(store, 600)
        if not dispatch:
            store.dispatcher.shutdown()
        done = 0
        pending: list[Future[None]] = []
        t0 = time.perf_counter()
        while done < n or time.perf_counter() - t0 < min_seconds:
            put = store.put_batch(batches[i])
            i = i + 1 if i + 1 < topics else 0
            if put.flushed is not None:
                pending.append(put.flushed)
                if len(pending) > 64:
                    pending.pop(0).result(5)
            done += batch
        for f in pending:
            f.result(10)
        dt = time.perf_counter() - t0
        if dispatch:
            lag = wait_dispatch(store, 600)
        else:
            t1 = time.perf_counter()
            store.dispatcher.dispatch_available(store.commitlog.max_offset)
            lag = time.perf_counter() - t1
    shutil.rmtree(root, ignore_errors=True)
    return {"msgs_per_s": done / dt, "mb_per_s": done * body_size / dt / 1e6,
            "dispatch_s": lag, "messages": done, "end_to_end_msgs_per_s": done / (dt + lag)}


def bench_cpu(root: Path, uniq_keys: bool, batches: int = 1000, batch: int = 256
              ) -> dict[str, float]:
    """CPU time per message (``time.process_time``: steady on a shared machine, unlike the wall
    clock) of ``put_batch`` of 128 B bodies with the dispatcher stopped and inline dispatch off,
    then of dispatching all of it alone (from the appends' hints, as live dispatch does)."""
    shutil.rmtree(root, ignore_errors=True)
    bodies = [os.urandom(128) for _ in range(batch)]

    def props(i: int) -> bytes:
        d = {"TAGS": "TagA"}
        if uniq_keys:
            d["UNIQ_KEY"] = f"{i:032X}"
        return encode_properties(d).encode()

    b = MessageBatch(topic="CpuTopic", queue_id=0, bodies=bodies,
                     properties=[props(i) for i in range(batch)])
    with MessageStore(make_config(root, "ASYNC_FLUSH", index=uniq_keys)) as store:
        store.put_batch(b)
        store.dispatcher.dispatch_available(store.commitlog.max_offset)
        store.dispatcher.shutdown()
        setattr(store.dispatcher, "dispatch_inline", lambda: None)  # noqa: B010 - the bench's own
        c0 = time.process_time()
        for _ in range(batches):
            store.put_batch(b)
        c1 = time.process_time()
        store.dispatcher.dispatch_available(store.commitlog.max_offset)
        c2 = time.process_time()
    shutil.rmtree(root, ignore_errors=True)
    n = batches * batch
    return {"append_us_per_msg": 1e6 * (c1 - c0) / n, "dispatch_us_per_msg": 1e6 * (c2 - c1) / n}


def bench_recovery(root: Path, size: int) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    body = os.urandom(1024)
    cfg = make_config(root, "ASYNC_FLUSH", segment=1 << 30)
    msgs = [MessageToStore(topic="RecoverTopic", body=body, queue_id=i % 4) for i in range(1000)]
    with MessageStore(cfg) as store:
        while store.commitlog.max_offset < size:
            store.put_messages(msgs)
    cfg.abort_path.touch()
    os.sync()
    t0, c0 = time.perf_counter(), time.process_time()
    store = MessageStore(cfg).start()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    rec = store.recovery
    store.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    return {"bytes": size, "seconds": dt, "cpu_seconds": cpu, "records": rec.records if rec else 0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller volumes, for a smoke run")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--batch", type=int, default=256, help="messages per batch append")
    ap.add_argument("--min-seconds", type=float, default=None,
                    help="run each measurement at least this long (default 3, --quick 0.5)")
    ap.add_argument("--uniq-keys", action="store_true",
                    help="give every message a UNIQ_KEY and build the IndexFile, as clients do")
    ap.add_argument("--only", choices=("append", "recovery", "cpu"), default=None,
                    help="run only the append rows, the recovery figure, or the CPU figures "
                         "(put_batch and dispatch per message, process time)")
    ap.add_argument("--recovery-mib", type=int, default=None,
                    help="CommitLog size for the recovery figure (default 1024, --quick 128)")
    args = ap.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="rocketlite-bench-", dir="."))
    base.mkdir(parents=True, exist_ok=True)
    volume = 64 * MiB if args.quick else 512 * MiB
    min_s = args.min_seconds if args.min_seconds is not None else (0.5 if args.quick else 3.0)
    out: dict[str, object] = {}
    if args.only in (None, "cpu"):
        for uniq in (False, True):
            cpu = bench_cpu(base / "store", uniq)
            out[f"cpu{'_uniq_keys' if uniq else ''}"] = cpu
            print(f"CPU per message, put_batch of 256 x 128 B{' with UNIQ_KEY' if uniq else ''}: "
                  f"append {cpu['append_us_per_msg']:.3f} us "
                  f"({1 / cpu['append_us_per_msg']:.2f}M/s), dispatch alone "
                  f"{cpu['dispatch_us_per_msg']:.3f} us", flush=True)
    if args.only in (None, "append"):
        out["append"] = append_rows(base, volume, min_s, args.batch, args.uniq_keys, out)
    if args.only in (None, "recovery"):
        mib = args.recovery_mib or (128 if args.quick else 1024)
        rec = bench_recovery(base / "store", mib * MiB)
        out["recovery"] = rec
        print(f"recovery after a crash of {rec['bytes'] / MiB:,.0f} MiB CommitLog "
              f"({rec['records']:,.0f} records, CRC verified): {rec['seconds']:.2f} s "
              f"({rec['cpu_seconds']:.2f} s CPU)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    if args.dir is None:
        shutil.rmtree(base, ignore_errors=True)


def append_rows(base: Path, volume: int, min_s: float, batch: int, uniq_keys: bool,
                out: dict[str, object]) -> list[dict[str, object]]:
    disk = disk_bandwidth(base, volume)
    out["disk_seq_write_mb_s"] = disk
    print(f"disk sequential write (1 MiB pwrite + fdatasync): {disk:,.0f} MB/s")
    rows = []
    print("appends in batches of one topic; 'alone': dispatcher paused while appending, then "
          "timed dispatching everything by itself; 'with dispatch': dispatcher running, then "
          "the time it needs to catch up")
    print(f"{'':26}{'--------- alone ---------':>34}{'------ with dispatch ------':>42}")
    print(f"{'flush':<12}{'body':>6}{'topics':>8}{'appends/s':>12}{'MB/s':>8}{'%disk':>6}"
          f"{'dispatch/s':>12}{'appends/s':>12}{'MB/s':>8}{'lag s':>8}{'end-to-end/s':>14}")
    for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        for body in (128, 1024, 4096):
            for topics in (1, 100, 10_000):
                alone = bench_append(base / "store", flush, body, topics, volume // 2, batch,
                                     uniq_keys, dispatch=False, min_seconds=min_s)
                both = bench_append(base / "store", flush, body, topics, volume // 2, batch,
                                    uniq_keys, dispatch=True, min_seconds=min_s)
                rows.append({"flush": flush, "body": body, "topics": topics,
                             "alone": alone, "with_dispatch": both})
                print(f"{flush:<12}{body:>6}{topics:>8}{alone['msgs_per_s']:>12,.0f}"
                      f"{alone['mb_per_s']:>8,.0f}{100 * alone['mb_per_s'] / disk:>5.0f}%"
                      f"{alone['messages'] / alone['dispatch_s']:>12,.0f}"
                      f"{both['msgs_per_s']:>12,.0f}{both['mb_per_s']:>8,.0f}"
                      f"{both['dispatch_s']:>8.3f}{both['end_to_end_msgs_per_s']:>14,.0f}",
                      flush=True)
    return rows


if __name__ == "__main__":
    main()
