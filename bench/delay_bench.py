"""Delay level benchmark: what a delayed message (DELAY=n) costs the broker, and how late the
schedule service delivers it.

    python bench/delay_bench.py                          # both parts, 10,000 msgs/s for 10 s
    python bench/delay_bench.py --rate 20000 --seconds 20 --levels "1s 2s 5s"
    python bench/delay_bench.py --part overhead --count 200000

Runs in-process on a store in a temporary folder with the broker's own ``ScheduleMessageService``:

overhead  per message and stage, single-threaded with a fake clock: divert (the send path's
          rewrite to SCHEDULE_TOPIC_XXXX), append to the schedule topic (any message's cost, plus
          the deliver-time tag code at dispatch), deliver (scan the level's queue by tag code,
          read, rebuild for REAL_TOPIC, put to the real topic).
lateness  the service on its thread, the real clock: a producer sends ``--rate`` msgs/s for
          ``--seconds`` with a level chosen uniformly from ``--levels``; a consumer thread polls
          the real topic every ms and records arrival - (send time + the level's delay). The
          service wakes at the earliest due time (or every 100 ms), so lateness is mostly the
          processing backlog, not a tick.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rocketlite.broker.schedule import ScheduleMessageService  # noqa: E402
from rocketlite.formats.message_record import decode_record  # noqa: E402
from rocketlite.formats.properties import encode_properties, find_property  # noqa: E402
from rocketlite.store.config import StoreConfig  # noqa: E402
from rocketlite.store.message import MessageToStore  # noqa: E402
from rocketlite.store.message_store import MessageStore  # noqa: E402

TOPIC = "BenchDelay"
QUEUES = 4
BODY = b"x" * 128


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def open_store(root: Path, sync: bool, levels: str) -> MessageStore:
    return MessageStore(StoreConfig.from_properties({
        "storePathRootDir": str(root),
        "flushDiskType": "SYNC_FLUSH" if sync else "ASYNC_FLUSH",
        "mappedFileSizeCommitLog": str(256 << 20),
        "maxHashSlotNum": "100000", "maxIndexNum": "400000",
        "messageIndexEnable": "false",
        "messageDelayLevel": levels,
    })).start()


def message(i: int, level: int, sent_ms: int) -> MessageToStore:
    props = encode_properties({"TAGS": "t", "UNIQ_KEY": f"{i:032X}", "DELAY": str(level),
                               "SENT_MS": str(sent_ms), "LVL": str(level)})
    return MessageToStore(TOPIC, BODY, i % QUEUES, properties=props, born_timestamp=sent_ms)


def wait_dispatched(store: MessageStore) -> None:
    while store.dispatcher.dispatch_from < store.commitlog.max_offset:
        time.sleep(0.001)


class Clock:
    def __init__(self, t: int) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def overhead(root: Path, count: int, sync: bool, levels: str) -> None:
    store = open_store(root, sync, levels)
    clock = Clock(now_ms())
    sched = ScheduleMessageService(store, clock)
    try:
        n_levels = sched.max_level
        msgs = [message(i, 1 + i % n_levels, clock.t) for i in range(count)]
        t0 = time.perf_counter()
        diverted = [sched.divert(m) for m in msgs]
        t_divert = time.perf_counter() - t0
        delayed = [m for m in diverted if m is not None]
        t0 = time.perf_counter()
        for i in range(0, len(delayed), 256):
            store.put_messages_sync(delayed[i:i + 256])
        wait_dispatched(store)
        t_append = time.perf_counter() - t0
        clock.t = now_ms() + max(store.config.delay_levels_ms) + 1000
        t0 = time.perf_counter()
        while sched.deliver_round()[0]:
            pass
        wait_dispatched(store)
        t_deliver = time.perf_counter() - t0
        delivered = sum(store.max_offset_in_queue(TOPIC, q) for q in range(QUEUES))
        assert delivered == count, (delivered, count)
        print(f"overhead per message ({count:,} messages over {n_levels} levels, "
              f"{'SYNC' if sync else 'ASYNC'}_FLUSH):")
        for name, t in (("divert", t_divert), ("append to SCHEDULE_TOPIC_XXXX", t_append),
                        ("deliver (scan, read, rebuild, put)", t_deliver)):
            print(f"  {name:<36} {t / count * 1e6:7.2f} us/msg")
        print(f"  {'schedule work (divert+deliver)':<36} "
              f"{(t_divert + t_deliver) / count * 1e6:7.2f} us/msg, "
              f"{count / (t_divert + t_deliver):,.0f} msgs/s on one core")
    finally:
        store.shutdown()


def lateness(root: Path, rate: int, seconds: float, sync: bool, levels: str) -> None:
    store = open_store(root, sync, levels)
    sched = ScheduleMessageService(store)
    sched.start()
    delays = store.config.delay_levels_ms
    total = int(rate * seconds)
    late: list[int] = []
    early = 0
    done = threading.Event()

    def consume() -> None:
        nonlocal early
        offsets = [0] * QUEUES
        while len(late) < total and not done.is_set():
            got_any = False
            for q in range(QUEUES):
                r = store.get_message(TOPIC, q, offsets[q], 1024, 1 << 30)
                if r.messages:
                    got_any = True
                    t = now_ms()
                    for raw in r.messages:
                        m = decode_record(raw)
                        assert m is not None
                        p = m.properties_text.encode()
                        sent = int(find_property(p, b"SENT_MS\x01") or 0)
                        level = int(find_property(p, b"LVL\x01") or 1)
                        d = t - (sent + delays[level - 1])
                        if d < 0:
                            early += 1
                        late.append(d)
                offsets[q] = r.next_begin_offset
            if not got_any:
                time.sleep(0.001)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    sent = 0
    start = time.monotonic()
    lag_max = 0.0
    try:
        while sent < total:
            due = min(total, int((time.monotonic() - start) * rate) + 1)
            batch = []
            now = now_ms()
            for i in range(sent, due):
                level = random.randint(1, len(delays))
                m = message(i, level, now)
                batch.append(sched.divert(m) or m)
            for i in range(0, len(batch), 256):
                store.put_messages_sync(batch[i:i + 256])
            sent = due
            lag_max = max(lag_max, time.monotonic() - start - sent / rate)
            time.sleep(0.01)
        elapsed = time.monotonic() - start
        consumer.join(max(delays) / 1000 + 30)
    finally:
        done.set()
        sched.shutdown()
        store.shutdown()
    if len(late) < total:
        print(f"only {len(late):,} of {total:,} delivered in time for the report")
    late.sort()
    q = statistics.quantiles(late, n=100) if len(late) > 1 else [0.0] * 99
    print(f"lateness at {rate:,} delayed msgs/s for {seconds:g} s ({total:,} messages, sent in "
          f"{elapsed:.1f} s, producer lag max {lag_max * 1000:.0f} ms), levels {levels!r}, "
          f"{'SYNC' if sync else 'ASYNC'}_FLUSH:")
    print(f"  p50 {q[49]:.0f} ms  p99 {q[98]:.0f} ms  max {late[-1]} ms  (early: {early})")
    print(f"  delivered {sched.delivered:,}, dropped {sched.dropped}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--part", choices=["overhead", "lateness", "all"], default="all")
    ap.add_argument("--count", type=int, default=100_000, help="messages for the overhead part")
    ap.add_argument("--rate", type=int, default=10_000, help="delayed messages per second")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--levels", default="1s 2s 3s 5s", help="messageDelayLevel")
    ap.add_argument("--sync", action="store_true", help="SYNC_FLUSH store")
    ap.add_argument("--dir", type=Path, default=None, help="where to put the store (a temp dir)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="delay-bench-", dir=args.dir))
    try:
        if args.part in ("overhead", "all"):
            overhead(base / "overhead", args.count, args.sync, args.levels)
        if args.part in ("lateness", "all"):
            lateness(base / "lateness", args.rate, args.seconds, args.sync, args.levels)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
