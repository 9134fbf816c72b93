"""Timer wheel benchmark: what a timer message costs the broker, and how late it is delivered.

    python bench/timer_bench.py                          # both parts, 10,000 msgs/s for 10 s
    python bench/timer_bench.py --rate 20000 --seconds 20 --min-delay 1 --max-delay 8
    python bench/timer_bench.py --part overhead --count 200000

Runs in-process on a store in a temporary folder (the network path is the broker's usual send and
pull, measured by bench/broker_bench.py), with the broker's own ``TimerMessageStore``:

overhead  per message and stage, single-threaded with a fake clock: divert (the send path's
          rewrite), append to the timer topic (what any message costs), enqueue (read the queue
          and the record, append a TimerLog unit, link its slot), dequeue (walk the slot, read,
          convert, put to the real topic).
lateness  the services on their threads, the real clock: a producer schedules ``--rate`` msgs/s
          for ``--seconds`` with deliver times uniformly ``--min-delay``..``--max-delay`` s ahead; a
          consumer thread polls the real topic every ms and records arrival - TIMER_DELIVER_MS.
          The wheel's precision is 1 s and a message is due at the first tick at or after its time,
          so lateness is that rounding (0..1000 ms, ~500 on average) plus the processing delay.
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

from rocketlite.broker.config import BrokerConfig  # noqa: E402
from rocketlite.broker.timer import TimerMessageStore  # noqa: E402
from rocketlite.formats.message_record import decode_record  # noqa: E402
from rocketlite.formats.properties import encode_properties, find_property  # noqa: E402
from rocketlite.store.config import StoreConfig  # noqa: E402
from rocketlite.store.message import MessageToStore  # noqa: E402
from rocketlite.store.message_store import MessageStore  # noqa: E402

TOPIC = "BenchTimer"
QUEUES = 4
BODY = b"x" * 128


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def open_store(root: Path, sync: bool) -> MessageStore:
    return MessageStore(StoreConfig.from_properties({
        "storePathRootDir": str(root),
        "flushDiskType": "SYNC_FLUSH" if sync else "ASYNC_FLUSH",
        "mappedFileSizeCommitLog": str(256 << 20),
        "maxHashSlotNum": "100000", "maxIndexNum": "400000",
        "messageIndexEnable": "false",
    })).start()


def message(i: int, deliver_ms: int) -> MessageToStore:
    props = encode_properties({"TAGS": "t", "UNIQ_KEY": f"{i:032X}",
                               "TIMER_DELIVER_MS": str(deliver_ms)})
    return MessageToStore(TOPIC, BODY, i % QUEUES, properties=props, born_timestamp=now_ms())


def wait_dispatched(store: MessageStore) -> None:
    while store.dispatcher.dispatch_from < store.commitlog.max_offset:
        time.sleep(0.001)


class Clock:
    def __init__(self, t: int) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def overhead(root: Path, count: int, sync: bool) -> None:
    store = open_store(root, sync)
    clock = Clock(now_ms() // 1000 * 1000)
    timer = TimerMessageStore(store, BrokerConfig(), clock)
    timer.open()
    try:
        base = clock.t
        msgs = [message(i, base + 5000 + random.randrange(60_000)) for i in range(count)]
        t0 = time.perf_counter()
        diverted = [timer.divert(m) for m in msgs]
        t_divert = time.perf_counter() - t0
        timed = [m for m in diverted if m is not None]
        t0 = time.perf_counter()
        for i in range(0, len(timed), 256):
            store.put_messages_sync(timed[i:i + 256])
        wait_dispatched(store)
        t_append = time.perf_counter() - t0
        t0 = time.perf_counter()
        while timer.enqueue_round():
            pass
        t_enqueue = time.perf_counter() - t0
        clock.t = base + 70_000
        timer.move_write_time()
        t0 = time.perf_counter()
        while timer.dequeue_round():
            pass
        wait_dispatched(store)
        t_dequeue = time.perf_counter() - t0
        delivered = sum(store.max_offset_in_queue(TOPIC, q) for q in range(QUEUES))
        assert delivered == count, (delivered, count)
        print(f"overhead per message ({count:,} messages over 60 s of slots, "
              f"{'SYNC' if sync else 'ASYNC'}_FLUSH):")
        for name, t in (("divert", t_divert), ("append to the timer topic", t_append),
                        ("enqueue (unit + slot)", t_enqueue),
                        ("dequeue (walk, read, convert, put)", t_dequeue)):
            print(f"  {name:<36} {t / count * 1e6:7.2f} us/msg")
        print(f"  {'timer work (divert+enqueue+dequeue)':<36} "
              f"{(t_divert + t_enqueue + t_dequeue) / count * 1e6:7.2f} us/msg, "
              f"{count / (t_divert + t_enqueue + t_dequeue):,.0f} msgs/s on one core")
    finally:
        timer.shutdown()
        store.shutdown()


def lateness(root: Path, rate: int, seconds: float, min_delay: float, max_delay: float,
             sync: bool) -> None:
    store = open_store(root, sync)
    timer = TimerMessageStore(store, BrokerConfig())
    timer.start()
    total = int(rate * seconds)
    late: list[int] = []
    early = 0
    done = threading.Event()

    def consume() -> None:
        nonlocal early
        offsets = [0] * QUEUES
        while len(late) + early < total and not done.is_set():
            got_any = False
            for q in range(QUEUES):
                r = store.get_message(TOPIC, q, offsets[q], 1024, 1 << 30)
                if r.messages:
                    got_any = True
                    t = now_ms()
                    for raw in r.messages:
                        m = decode_record(raw)
                        assert m is not None
                        deliver = find_property(m.properties_text.encode(), b"TIMER_DELIVER_MS\x01")
                        d = t - int(deliver or 0)
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
    tick = 0.01
    lag_max = 0.0
    try:
        while sent < total:
            due = min(total, int((time.monotonic() - start) * rate) + 1)
            batch = []
            now = now_ms()
            for i in range(sent, due):
                m = message(i, now + int(random.uniform(min_delay, max_delay) * 1000))
                batch.append(timer.divert(m) or m)
            for i in range(0, len(batch), 256):
                store.put_messages_sync(batch[i:i + 256])
            sent = due
            lag_max = max(lag_max, time.monotonic() - start - sent / rate)
            time.sleep(tick)
        elapsed = time.monotonic() - start
        consumer.join(max_delay + 30)
    finally:
        done.set()
        timer.shutdown()
        store.shutdown()
    if len(late) < total:
        print(f"only {len(late):,} of {total:,} delivered in time for the report")
    late.sort()
    q = statistics.quantiles(late, n=100) if len(late) > 1 else [0.0] * 99
    print(f"lateness at {rate:,} scheduled msgs/s for {seconds:g} s ({total:,} messages, sent in "
          f"{elapsed:.1f} s, producer lag max {lag_max * 1000:.0f} ms), delays "
          f"{min_delay:g}-{max_delay:g} s, {'SYNC' if sync else 'ASYNC'}_FLUSH:")
    print(f"  p50 {q[49]:.0f} ms  p90 {q[89]:.0f} ms  p99 {q[98]:.0f} ms  max {late[-1]} ms  "
          f"(early: {early}); the 1 s tick alone is 0..1000 ms")
    print(f"  timer stats: {timer.stats}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--part", choices=["overhead", "lateness", "all"], default="all")
    ap.add_argument("--count", type=int, default=100_000, help="messages for the overhead part")
    ap.add_argument("--rate", type=int, default=10_000, help="scheduled messages per second")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--min-delay", type=float, default=1.0, help="seconds")
    ap.add_argument("--max-delay", type=float, default=5.0, help="seconds")
    ap.add_argument("--sync", action="store_true", help="SYNC_FLUSH store")
    ap.add_argument("--dir", type=Path, default=None, help="where to put the store (a temp dir)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="timer-bench-", dir=args.dir))
    try:
        if args.part in ("overhead", "all"):
            overhead(base / "overhead", args.count, args.sync)
        if args.part in ("lateness", "all"):
            lateness(base / "lateness", args.rate, args.seconds, args.min_delay, args.max_delay,
                     args.sync)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
