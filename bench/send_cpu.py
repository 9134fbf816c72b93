"""CPU per message of the broker's send path, in process and without sockets: a Broker (ASYNC
or SYNC flush) gets ``--reads`` reads of ``--per-read`` SEND_MESSAGE_V2 frames (the bench's
request, 128 B bodies) on one connection whose transport only counts writes; prints CPU time
(``time.process_time``, all threads: the dispatcher and flusher too) per message, and the
writes per read. Stabler than wall-clock figures on shared cores.

    python bench/send_cpu.py --per-read 64            # the in-flight window's reads
    python bench/send_cpu.py --per-read 1             # one send per read (1 in flight)
    python bench/send_cpu.py --profile                # cProfile of the timed part
    python bench/send_cpu.py --batch 256 --per-read 4 --reads 200   # SEND_BATCH_MESSAGE frames
                                                      # of 256 messages (broker_bench's batch)
    python bench/send_cpu.py --batch 256 --per-read 4 --reads 200 --split   # + where it goes

``--split`` times the stages of the send path (main thread CPU, ``time.thread_time``, around
each call: about a microsecond per call) and prints them per message, with the rest of the read
as ``other``. For single sends use ``--per-read 32`` (at most ``RUN_CHUNK``: a longer read
appends its first chunk inside ``send_run``): frame split + header decode (``feed``),
``CommitLog.append``, dispatch (``_dispatch_segment``, ``_end_round``), the replies
(``_write_ok``); ``other`` is the connection's loop, taking the sends (``send_run``, bound
when the broker registered it) and the store's call around the append.

Instructions per message, stable on busy cores: the main thread's count (callgrind with
``--separate-threads=yes --dump-instr=no``, file ``<out>-01``) of a run with ``--repeat 1 --reads
400`` minus one with ``--reads 100``, over 300 x ``--per-read`` messages.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from broker_bench import send_template  # noqa: E402
from rocketlite.broker.broker import Broker  # noqa: E402
from rocketlite.broker.config import BrokerConfig  # noqa: E402
from rocketlite.store.config import StoreConfig  # noqa: E402

_SINGLE_STAGES = (  # the stages ``--split`` times for single sends (none calls another)
    ("rocketlite.protocol.command", "FrameDecoder", "feed"),
    ("rocketlite.store.commitlog", "CommitLog", "append"),
    ("rocketlite.store.dispatcher", "Dispatcher", "_dispatch_segment"),
    ("rocketlite.store.dispatcher", "Dispatcher", "_end_round"),
    ("rocketlite.broker.send", "SendProcessor", "_write_ok"),
)
_STAGES = (  # (module, owner, attribute) of the stages ``--split`` times for batches
    ("rocketlite.broker.send", None, "decode_batch"),
    ("rocketlite.store.commitlog", "CommitLog", "append_batch"),
    ("rocketlite.store.dispatcher", "Dispatcher", "_dispatch_hint"),
    ("rocketlite.store.dispatcher", "Dispatcher", "_end_round"),
    ("rocketlite.protocol.replies", "SendOkFrames", "message_ids"),
    ("rocketlite.broker.send", "SendProcessor", "_answer_when_flushed"),
)


def time_stages(stages: tuple[tuple[str, str | None, str], ...]) -> dict[str, float]:
    """Wrap every stage of ``stages`` to add its main-thread CPU seconds to the returned dict."""
    import importlib

    spent: dict[str, float] = {}
    clock = time.thread_time
    for module, owner, attr in stages:
        mod = importlib.import_module(module)
        target = mod if owner is None else getattr(mod, owner)
        fn = getattr(target, attr)
        spent[attr] = 0.0

        def timed(*a: Any, _fn: Any = fn, _name: str = attr, **k: Any) -> Any:
            t0 = clock()
            try:
                return _fn(*a, **k)
            finally:
                spent[_name] += clock() - t0

        setattr(target, attr, timed)
    return spent


class CountingTransport(asyncio.Transport):
    def write(self, data: Any) -> None:
        self.writes += 1
        self.bytes += len(data)
        if self._waiter is not None and self.writes >= self._waiter[0]:
            self._waiter[1].set_result(None)
            self._waiter = None

    def __init__(self, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self.protocol = protocol
        self.writes = 0
        self.bytes = 0
        self.closed = False
        self._waiter: tuple[int, asyncio.Future[None]] | None = None

    async def until_writes(self, n: int) -> None:
        """Wait until ``n`` writes have been made in all."""
        if self.writes < n:
            fut = asyncio.get_running_loop().create_future()
            self._waiter = (n, fut)
            await fut

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 4242) if name == "peername" else default


async def run(args: argparse.Namespace, root: Path) -> None:
    store = StoreConfig.from_properties({
        "storePathRootDir": str(root), "listenPort": "0",
        "flushDiskType": "SYNC_FLUSH" if args.sync else "ASYNC_FLUSH"})
    broker = Broker(BrokerConfig.from_properties({"brokerName": "cpu"}), store)
    await broker.start()
    try:
        conn = broker.server._make_connection()
        transport = CountingTransport(conn)
        conn.connection_made(transport)
        body = os.urandom(128)
        templates = [send_template("CpuTopic", q, body, args.batch, args.uniq) for q in range(8)]
        reads = [b"".join(templates[(r + i) % 8].frame(r * args.per_read + i + 1)
                          for i in range(args.per_read)) for r in range(64)]
        for data in reads:  # warm up: the topic is created, the queues exist
            conn.data_received(data)
        await asyncio.sleep(0.1)
        prof = cProfile.Profile() if args.profile else None
        spent = (time_stages(_STAGES if args.batch else _SINGLE_STAGES) if args.split
                 else None)
        main_cpu = 0.0
        best = float("inf")
        writes = 0
        for _ in range(args.repeat):  # the best of several: other processes share the cores
            writes0 = transport.writes
            if spent is not None:
                spent.update(dict.fromkeys(spent, 0.0))
            t0 = time.process_time()
            tt0 = time.thread_time()
            if prof is not None:
                prof.enable()
            for r in range(args.reads):
                conn.data_received(reads[r % 64])
                if args.sync:  # one read at a time: until the flush answered it
                    await transport.until_writes(writes0 + r + 1)
                else:
                    await asyncio.sleep(0)  # the loop turns, as between two reads
            if prof is not None:
                prof.disable()
            took = time.process_time() - t0
            if took < best:
                best, main_cpu = took, time.thread_time() - tt0
                split = dict(spent) if spent is not None else None
            writes = transport.writes - writes0
        n = args.reads * args.per_read * max(args.batch, 1)
        kind = f"batches of {args.batch}" if args.batch else "sends"
        print(f"{'SYNC' if args.sync else 'ASYNC'} {args.per_read} {kind}/read: "
              f"{1e6 * best / n:.2f} us/msg CPU (best of {args.repeat}), "
              f"{writes / args.reads:.2f} writes/read ({n} messages each)")
        if spent is not None and split is not None:
            us = lambda t: f"{1e6 * t / n:.3f}"  # noqa: E731
            print(f"main thread {us(main_cpu)} us/msg, of which (us/msg, the best run):")
            for name, t in split.items():
                print(f"  {name:22s} {us(t)}")
            print(f"  {'other':22s} {us(main_cpu - sum(split.values()))}")
        if prof is not None:
            pstats.Stats(prof).sort_stats(args.sort).print_stats(30)
    finally:
        await broker.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--per-read", type=int, default=64)
    ap.add_argument("--reads", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sync", action="store_true", help="a SYNC_FLUSH store")
    ap.add_argument("--batch", type=int, default=0,
                    help="SEND_BATCH_MESSAGE frames of this many messages (0: SEND_MESSAGE_V2)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--uniq", action="store_true",
                    help="a UNIQ_KEY per message (indexed), as every RocketMQ client sends")
    ap.add_argument("--split", action="store_true", help="CPU per message of each stage")
    ap.add_argument("--sort", default="tottime", help="the profile's order: tottime, cumulative")
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # no NameServer: its registrations fail
    try:
        import uvloop
    except ImportError:
        uvloop = None
    with tempfile.TemporaryDirectory(prefix="rocketlite-cpu-") as d:
        coro = run(args, Path(d))
        uvloop.run(coro) if uvloop else asyncio.run(coro)


if __name__ == "__main__":
    main()
