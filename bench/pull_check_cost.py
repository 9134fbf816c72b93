"""What checking each served record against its ConsumeQueue unit costs a pull: print figures,
assert nothing.

``MessageStore.get_message`` of 32 messages per call over a queue of 3,200 (1 KiB bodies, in
memory), CPU time per message served (``time.process_time``, best of 5) with the check
(``record_scan.records_match_units`` once per segment run of a pull, what pulls do) and with it
replaced by a stub that accepts everything (what pulls did before the store fuzzer,
``tests/chaos/storefuzz.py``, found damaged units and records served as messages).

Usage: python bench/pull_check_cost.py [--body BYTES]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import rocketlite.store.get_message as gm
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore

MESSAGES = 3200
PER_PULL = 32


def per_message_us(store: MessageStore) -> float:
    best = float("inf")
    for _ in range(5):
        t = time.process_time()
        n = 0
        for offset in range(0, MESSAGES, PER_PULL):
            n += len(store.get_message("Bench", 0, offset, PER_PULL).sizes)
        best = min(best, (time.process_time() - t) / n * 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--body", type=int, default=1024)
    args = ap.parse_args()
    shm = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() else None))
    cfg = StoreConfig.from_properties({"storePathRootDir": str(root),
                                       "mappedFileSizeCommitLog": str(64 << 20)})
    store = MessageStore(cfg).start()
    try:
        body = b"x" * args.body
        for _ in range(MESSAGES // 100):
            store.put_messages_sync([MessageToStore(topic="Bench", body=body) for _ in range(100)])
        while store.dispatcher.dispatch_from < store.commitlog.max_offset:
            time.sleep(0.01)
        checked = per_message_us(store)
        real = gm.records_match_units
        gm.records_match_units = lambda *a: -1
        try:
            unchecked = per_message_us(store)
        finally:
            gm.records_match_units = real
        print(f"get_message, {args.body} B bodies, {PER_PULL} per call: {checked:.2f} us/message "
              f"checked, {unchecked:.2f} unchecked (+{checked - unchecked:.2f})")
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
