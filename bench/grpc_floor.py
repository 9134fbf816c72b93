"""Server CPU per gRPC call: the transport's floor and the broker's cost of a one-message send.

The server runs in a child process; the client (grpc.aio, as the official Python client's grpc
core) sends ``--calls`` SendMessage calls, ``--inflight`` at a time, and the child's CPU time
(/proc/<pid>/stat, every thread) is read before and after.

Servers (``--server``, several allowed):

- ``aio``: grpc.aio (on uvloop) whose SendMessage answers a constant response;
- ``aio-tuned``: the same with ``grpc.optimization_target=latency`` and one completion queue;
- ``sync``: the threaded grpc server (4 workers), same constant answer;
- ``grpclib``: grpclib 0.4.9 (pure Python on h2), same constant answer; it is not a dependency:
  ``pip install --target DIR grpclib==0.4.9`` and pass ``--grpclib-path DIR``;
- ``native``: rocketlite.proxy.h2 (ours), same constant answer;
- ``broker-grpcio`` / ``broker-native``: a NameServer, a broker and its gRPC front
  (``grpcServerImpl``) storing each message: the broker's CPU per one-message send.

    python bench/grpc_floor.py --server aio native broker-grpcio broker-native --inflight 32 1
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import time
from typing import Any

import grpc

from rocketlite.proxy.pb import definition_pb2 as dpb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.pb import service_pb2_grpc as sg

TOPIC = "FloorTopic"
CONSTANT = spb.SendMessageResponse(status=dpb.Status(code=dpb.Code.OK, message="OK"))
METADATA = (("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2"),
            ("x-mq-client-version", "5.1.2"), ("x-mq-client-id", "floor@1#0"),
            ("x-mq-namespace", ""))


class Constant(sg.MessagingServiceServicer):
    async def SendMessage(self, request: Any, context: Any) -> spb.SendMessageResponse:
        return CONSTANT


class ConstantSync(sg.MessagingServiceServicer):
    def SendMessage(self, request: Any, context: Any) -> spb.SendMessageResponse:
        return CONSTANT


def _run(main: Any) -> None:
    try:
        import uvloop
        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


async def _forever() -> None:
    await asyncio.Event().wait()


def serve(q: Any, kind: str, grpclib_path: str | None) -> None:
    if kind in ("aio", "aio-tuned"):
        async def main() -> None:
            opts = [("grpc.optimization_target", "latency"), ("grpc.so_reuseport", 0)] \
                if kind == "aio-tuned" else []
            s = grpc.aio.server(options=opts)
            sg.add_MessagingServiceServicer_to_server(Constant(), s)
            port = s.add_insecure_port("127.0.0.1:0")
            await s.start()
            q.put(port)
            await _forever()
        _run(main)
    elif kind == "sync":
        from concurrent.futures import ThreadPoolExecutor
        s = grpc.server(ThreadPoolExecutor(4))
        sg.add_MessagingServiceServicer_to_server(ConstantSync(), s)
        port = s.add_insecure_port("127.0.0.1:0")
        s.start()
        q.put(port)
        s.wait_for_termination()
    elif kind == "grpclib":
        sys.path.insert(0, grpclib_path or "")
        import grpclib.const
        import grpclib.server

        class G:
            async def send(self, stream: Any) -> None:
                await stream.recv_message()
                await stream.send_message(CONSTANT)

            def __mapping__(self) -> dict[str, Any]:
                return {"/apache.rocketmq.v2.MessagingService/SendMessage": grpclib.const.Handler(
                    self.send, grpclib.const.Cardinality.UNARY_UNARY,
                    spb.SendMessageRequest, spb.SendMessageResponse)}

        async def main() -> None:
            s = grpclib.server.Server([G()])
            await s.start("127.0.0.1", 0)
            q.put(s._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
            await _forever()
        _run(main)
    elif kind == "native":
        from rocketlite.proxy.h2.server import H2Server, service_methods

        async def main() -> None:
            s = H2Server(service_methods(spb.DESCRIPTOR.services_by_name["MessagingService"],
                                         Constant()))
            q.put(await s.start("127.0.0.1", 0))
            await _forever()
        _run(main)
    elif kind.startswith("broker-"):
        _run(lambda: _broker(q, kind.removeprefix("broker-")))
    else:
        raise SystemExit(f"unknown server {kind}")


async def _broker(q: Any, impl: str) -> None:
    from rocketlite.broker.broker import Broker
    from rocketlite.broker.config import BrokerConfig
    from rocketlite.namesrv.server import NameServer
    from rocketlite.proxy.server import GrpcFront
    from rocketlite.store.config import StoreConfig

    root = tempfile.mkdtemp(prefix="grpc-floor-")
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    broker = Broker(BrokerConfig.from_properties({"namesrvAddr": f"127.0.0.1:{ns.port}",
                                                  "brokerName": "floor"}),
                    StoreConfig.from_properties({"storePathRootDir": root, "listenPort": "0",
                                                 "brokerIP1": "127.0.0.1"}))
    await broker.start()
    front = GrpcFront(broker, 0, host="127.0.0.1", impl=impl)
    await front.start()
    q.put(front.port)
    await _forever()


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid``, every thread."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(parts[11]) / tick, int(parts[12]) / tick


async def measure(port: int, pid: int, calls: int, inflight: int
                  ) -> tuple[float, float, float]:
    """(calls/s, server user CPU us per call, server system CPU us per call)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = sg.MessagingServiceStub(ch)
        req = spb.SendMessageRequest(messages=[dpb.Message(
            topic=dpb.Resource(name=TOPIC), body=b"x" * 128,
            system_properties=dpb.SystemProperties(message_id="0", tag="A",
                                                   body_encoding=dpb.Encoding.IDENTITY,
                                                   message_type=dpb.MessageType.NORMAL))])
        sem = asyncio.Semaphore(inflight)

        async def one() -> None:
            async with sem:
                r = await stub.SendMessage(req, metadata=METADATA, timeout=10)
                if r.status.code != dpb.Code.OK:
                    raise SystemExit(f"SendMessage answered {r.status}")

        await asyncio.gather(*(one() for _ in range(min(500, calls))))  # warm up
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(calls)))
        c1, t1 = cpu_seconds(pid), time.perf_counter()
    return calls / (t1 - t0), 1e6 * (c1[0] - c0[0]) / calls, 1e6 * (c1[1] - c0[1]) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", nargs="+", default=["aio", "native"])
    ap.add_argument("--inflight", nargs="+", type=int, default=[32, 1])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--grpclib-path")
    args = ap.parse_args()
    print(f"{'server':<16}{'in flight':>10}{'calls/s':>10}{'CPU us/call':>12}{'user':>8}"
          f"{'system':>8}")
    for kind in args.server:
        q: Any = mp.Queue()
        p = mp.Process(target=serve, args=(q, kind, args.grpclib_path), daemon=True)
        p.start()
        try:
            port = q.get(timeout=60)
            for inflight in args.inflight:
                rate, user, system = asyncio.run(measure(port, p.pid or 0, args.calls, inflight))
                print(f"{kind:<16}{inflight:>10}{rate:>10.0f}{user + system:>12.1f}{user:>8.1f}"
                      f"{system:>8.1f}", flush=True)
        finally:
            p.kill()
            p.join()


if __name__ == "__main__":
    main()
