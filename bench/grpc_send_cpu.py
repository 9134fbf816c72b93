"""CPU per message of the gRPC front's send path, in process and without sockets: the twin of
``send_cpu.py`` (Remoting) for SendMessage, so that both fronts are compared at the SAME number
of calls per read, on the same broker and store.

The bytes are real: a grpc.aio client (grpc core, as the official 5.x Python client) makes
``--calls`` one-message SendMessage calls (128 B bodies, a tag, 32 in flight, the 5.x client's
metadata and a deadline) to a recording native server in this process; the recorded byte stream
(preface, SETTINGS, HEADERS with grpc core's HPACK state, DATA, its WINDOW_UPDATEs) is then cut
at frame boundaries into reads of ``--per-read`` calls and replayed into the connection of a
broker's native gRPC front whose transport only counts writes. Printed: CPU time
(``time.process_time``, all threads) per message, best of ``--repeat``, and writes per read.

    python bench/grpc_send_cpu.py --per-read 32          # a window of calls in one read
    python bench/grpc_send_cpu.py --per-read 1
    python bench/grpc_send_cpu.py --per-read 32 --profile
    python bench/send_cpu.py --per-read 32               # Remoting, the same shape

Each replay starts a new connection (the HPACK state of the recording), so a run replays the
whole recording: ``--calls`` is the messages timed per run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import grpc  # noqa: E402

from grpc_floor import CONSTANT, METADATA, TOPIC  # noqa: E402
from rocketlite.broker.broker import Broker  # noqa: E402
from rocketlite.broker.config import BrokerConfig  # noqa: E402
from rocketlite.proxy.h2 import frames as f  # noqa: E402
from rocketlite.proxy.pb import definition_pb2 as dpb  # noqa: E402
from rocketlite.proxy.pb import service_pb2 as spb  # noqa: E402
from rocketlite.proxy.pb import service_pb2_grpc as sg  # noqa: E402
from rocketlite.store.config import StoreConfig  # noqa: E402
from send_cpu import CountingTransport  # noqa: E402


class _Recorder(sg.MessagingServiceServicer):
    async def SendMessage(self, request: Any, context: Any) -> spb.SendMessageResponse:
        return CONSTANT


async def record(calls: int) -> bytes:
    """The bytes a grpc.aio client sends for ``calls`` SendMessage calls, 32 in flight."""
    from rocketlite.proxy.h2 import connection as c
    from rocketlite.proxy.h2.server import H2Server, service_methods

    got: list[bytes] = []
    original = c.H2Connection.data_received

    def recording(self: Any, data: bytes) -> None:
        got.append(bytes(data))
        original(self, data)

    c.H2Connection.data_received = recording  # type: ignore[method-assign]
    server = H2Server(service_methods(spb.DESCRIPTOR.services_by_name["MessagingService"],
                                      _Recorder()))
    port = await server.start("127.0.0.1", 0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = sg.MessagingServiceStub(ch)
            sem = asyncio.Semaphore(32)

            async def one(i: int) -> None:
                req = spb.SendMessageRequest(messages=[dpb.Message(
                    topic=dpb.Resource(name=TOPIC), body=b"x" * 128,
                    system_properties=dpb.SystemProperties(
                        message_id=f"0A00000100002A9F0000{i:012X}", tag="A",
                        body_encoding=dpb.Encoding.IDENTITY,
                        message_type=dpb.MessageType.NORMAL))])
                async with sem:
                    await stub.SendMessage(req, metadata=METADATA, timeout=10)

            await asyncio.gather(*(one(i) for i in range(calls)))
    finally:
        c.H2Connection.data_received = original  # type: ignore[method-assign]
        await server.close(1)
    return b"".join(got)


def cut(stream: bytes, per_read: int) -> list[bytes]:
    """``stream`` cut after every ``per_read``-th request end (a frame with END_STREAM)."""
    head = len(f.PREFACE)
    reads: list[bytes] = []
    start, at, ended = 0, head, 0
    while at < len(stream):
        length_type, flags, _ = f.FRAME_HEADER.unpack_from(stream, at)
        at += 9 + (length_type >> 8)
        if length_type & 0xFF in (f.DATA, f.HEADERS) and flags & f.END_STREAM:
            ended += 1
            if ended % per_read == 0:
                reads.append(stream[start:at])
                start = at
    if start < len(stream):
        reads.append(stream[start:])
    return reads


async def run(args: argparse.Namespace, root: Path, reads: list[bytes]) -> None:
    from rocketlite.proxy.server import GrpcFront

    store = StoreConfig.from_properties({
        "storePathRootDir": str(root), "listenPort": "0",
        "flushDiskType": "SYNC_FLUSH" if args.sync else "ASYNC_FLUSH"})
    broker = Broker(BrokerConfig.from_properties({"brokerName": "cpu"}), store)
    await broker.start()
    front = GrpcFront(broker, 0, host="127.0.0.1", impl="native")
    await front.start()
    try:
        server = front._native
        assert server is not None

        async def replay(prof: cProfile.Profile | None = None) -> tuple[float, int]:
            conn = server._connection()
            transport = CountingTransport(conn)
            conn.connection_made(transport)
            t0 = time.process_time()
            if prof is not None:
                prof.enable()
            for data in reads:
                conn.data_received(data)
                if args.sync:
                    await asyncio.sleep(0.001)
                else:
                    await asyncio.sleep(0)  # the loop turns, as between two reads
            if prof is not None:
                prof.disable()
            took = time.process_time() - t0
            conn.connection_lost(None)
            return took, transport.writes

        await replay()  # warm up: the topic is created, the queues exist
        prof = cProfile.Profile() if args.profile else None
        best, writes = float("inf"), 0
        for _ in range(args.repeat):
            took, writes = await replay(prof)
            best = min(best, took)
        n = args.calls
        print(f"gRPC {'SYNC' if args.sync else 'ASYNC'} {args.per_read} SendMessage calls/read: "
              f"{1e6 * best / n:.2f} us/msg CPU (best of {args.repeat}), "
              f"{writes / len(reads):.2f} writes/read ({n} messages each)")
        if prof is not None:
            pstats.Stats(prof).sort_stats(args.sort).print_stats(30)
    finally:
        await front.close()
        await broker.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--per-read", type=int, default=32)
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sync", action="store_true", help="a SYNC_FLUSH store")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sort", default="tottime", help="the profile's order: tottime, cumulative")
    args = ap.parse_args()
    if args.per_read < 1 or args.calls < args.per_read:
        ap.error("--per-read >= 1 and --calls >= --per-read")
    logging.disable(logging.WARNING)  # no NameServer: its registrations fail
    try:
        import uvloop
    except ImportError:
        uvloop = None
    stream = asyncio.run(record(args.calls))
    reads = cut(stream, args.per_read)
    with tempfile.TemporaryDirectory(prefix="rocketlite-grpc-cpu-") as d:
        coro = run(args, Path(d), reads)
        uvloop.run(coro) if uvloop else asyncio.run(coro)


if __name__ == "__main__":
    main()
