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
  (``grpcServerImpl``) storing each message: the broker's CPU per one-message send;
- ``broker-remoting``: the same NameServer and broker, started the same way, without the gRPC
  front, loaded over Remoting by rocketlite's own client in the same shape: ``--calls``
  one-message sends (``Producer.send_async``, SEND_MESSAGE_V2), ``--inflight`` at a time, after
  the same 500 warm-up sends, the topic created with the same 8 queues. This is the baseline the
  gRPC rows are compared with; the CPU read covers the same process (NameServer and broker).

    python bench/grpc_floor.py --server aio native broker-grpcio broker-native --inflight 32 1
    python bench/grpc_floor.py --server broker-native broker-remoting --inflight 32 1

When ``broker-remoting`` and a gRPC broker row are both run, a last line gives the ratio of their
broker CPU per call (gRPC / Remoting) for each in-flight value.

``--receive``: with a broker server, the consumer side instead: ``--calls`` messages are sent
(32 a request), then received by ReceiveMessage calls of ``--batch`` messages each, every message
acked by its own AckMessage call, the calls of a batch in flight together (as the 5.x clients
ack); the figure is the broker's CPU per received and acked message. ``broker-remoting`` does the
same over Remoting with rocketlite's client: SEND_BATCH_MESSAGE of 32, then
``SimpleConsumer.receive(--batch)`` (POP_MESSAGE, 200050, invisible 60 s, long poll 1 s) and one
``ack`` (ACK_MESSAGE, 200051) per message, the acks of a batch in flight together.

    python bench/grpc_floor.py --server broker-native broker-remoting --receive --calls 5000
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing as mp
import os
import shutil
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


def serve(q: Any, kind: str, grpclib_path: str | None, root: str) -> None:
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
    elif kind in ("broker-grpcio", "broker-native", "broker-remoting"):
        _run(lambda: _broker(q, kind.removeprefix("broker-"), root))
    else:
        raise SystemExit(f"unknown server {kind}")


async def _broker(q: Any, impl: str, root: str) -> None:
    """A NameServer and a broker in this process; with ``impl`` grpcio or native also the gRPC
    front, whose port goes to ``q``; with ``impl`` remoting no front, the NameServer's port goes
    to ``q`` (the client finds the broker through it)."""
    from rocketlite.broker.broker import Broker
    from rocketlite.broker.config import BrokerConfig
    from rocketlite.namesrv.server import NameServer
    from rocketlite.proxy.server import GrpcFront
    from rocketlite.store.config import StoreConfig

    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    broker = Broker(BrokerConfig.from_properties({"namesrvAddr": f"127.0.0.1:{ns.port}",
                                                  "brokerName": "floor"}),
                    StoreConfig.from_properties({"storePathRootDir": root, "listenPort": "0",
                                                 "brokerIP1": "127.0.0.1"}))
    await broker.start()
    if impl == "remoting":
        q.put(ns.port)
        await _forever()
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


async def measure_remoting(ns_port: int, pid: int, calls: int, inflight: int
                           ) -> tuple[float, float, float]:
    """``measure``'s shape over Remoting: one-message ``Producer.send_async`` calls, ``inflight``
    at a time (when that many are pending the oldest is awaited), after 500 warm-up sends."""
    from rocketlite.client.message import Message
    from rocketlite.client.producer import Producer
    from rocketlite.client.send_types import SendStatus

    # 8 queues, as the gRPC front auto-creates the topic (defaultTopicQueueNums)
    async with Producer("FloorProducer", namesrv_addr=f"127.0.0.1:{ns_port}",
                        default_topic_queue_nums=8, async_window=inflight) as p:
        body = b"x" * 128

        async def run(n: int) -> None:
            pending: collections.deque[asyncio.Future[Any]] = collections.deque()

            def settle(r: Any) -> None:
                if r.status is not SendStatus.SEND_OK:
                    raise SystemExit(f"send answered {r.status}")

            for _ in range(n):
                pending.append(p.send_async(Message(TOPIC, body, tags="A")))
                if len(pending) >= inflight:
                    settle(await pending.popleft())
            while pending:
                settle(await pending.popleft())

        await run(min(500, calls))  # warm up (the first send fetches the route)
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        await run(calls)
        c1, t1 = cpu_seconds(pid), time.perf_counter()
    return calls / (t1 - t0), 1e6 * (c1[0] - c0[0]) / calls, 1e6 * (c1[1] - c0[1]) / calls


GROUP = "FloorGroup"


async def measure_receive(port: int, pid: int, calls: int, batch: int
                          ) -> tuple[float, float, float]:
    """(messages/s, server user CPU us per message, server system CPU us per message): receive
    ``batch`` at a time and ack each message with its own call."""
    from google.protobuf.duration_pb2 import Duration

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = sg.MessagingServiceStub(ch)
        recv = spb.ReceiveMessageRequest(
            group=dpb.Resource(name=GROUP),
            message_queue=dpb.MessageQueue(topic=dpb.Resource(name=TOPIC), id=0),
            batch_size=batch, filter_expression=dpb.FilterExpression(type=dpb.FilterType.TAG,
                                                                     expression="*"),
            invisible_duration=Duration(seconds=60), long_polling_timeout=Duration(seconds=1))

        async def receive() -> list[Any]:
            return [r.message async for r in stub.ReceiveMessage(recv, metadata=METADATA,
                                                                 timeout=10)
                    if r.HasField("message")]

        async def ack(m: Any) -> None:
            r = await stub.AckMessage(spb.AckMessageRequest(
                group=recv.group, topic=recv.message_queue.topic,
                entries=[spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                             receipt_handle=m.system_properties.receipt_handle)]),
                metadata=METADATA, timeout=10)
            if r.status.code != dpb.Code.OK:
                raise SystemExit(f"AckMessage answered {r.status}")

        await receive()  # the group starts at the queues' end: made before the messages
        for i in range(0, calls, 32):
            r = await stub.SendMessage(spb.SendMessageRequest(messages=[dpb.Message(
                topic=dpb.Resource(name=TOPIC), body=b"x" * 128,
                system_properties=dpb.SystemProperties(
                    message_id=f"{i + j}", tag="A", body_encoding=dpb.Encoding.IDENTITY,
                    message_type=dpb.MessageType.NORMAL)) for j in range(min(32, calls - i))]),
                metadata=METADATA, timeout=10)
            if r.status.code != dpb.Code.OK:
                raise SystemExit(f"SendMessage answered {r.status}")
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        done = 0
        while done < calls:
            got = await receive()
            if not got:
                raise SystemExit(f"ReceiveMessage found no message after {done} of {calls}")
            await asyncio.gather(*(ack(m) for m in got))
            done += len(got)
        c1, t1 = cpu_seconds(pid), time.perf_counter()
    return done / (t1 - t0), 1e6 * (c1[0] - c0[0]) / done, 1e6 * (c1[1] - c0[1]) / done


async def measure_receive_remoting(ns_port: int, pid: int, calls: int, batch: int
                                   ) -> tuple[float, float, float]:
    """``measure_receive``'s shape over Remoting: ``calls`` messages sent 32 a request
    (SEND_BATCH_MESSAGE), then ``SimpleConsumer.receive(batch)`` (POP) and one ``ack``
    (ACK_MESSAGE) per message, the acks of a batch in flight together."""
    from rocketlite.client.message import Message
    from rocketlite.client.producer import Producer
    from rocketlite.client.simple_consumer import SimpleConsumer
    from rocketlite.protocol.bodies import ConsumeFromWhere

    ns = f"127.0.0.1:{ns_port}"
    async with Producer("FloorProducer", namesrv_addr=ns, default_topic_queue_nums=8) as p:
        for i in range(0, calls, 32):
            await p.send_batch([Message(TOPIC, b"x" * 128, tags="A")
                                for _ in range(min(32, calls - i))])
    # The topic exists now, with every message from offset 0: the group starts there.
    async with SimpleConsumer(GROUP, namesrv_addr=ns, subscriptions={TOPIC: "*"},
                              await_duration=1,
                              consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET) as c:
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        done = 0
        while done < calls:
            got = await c.receive(batch, invisible_duration=60)
            if not got:
                raise SystemExit(f"receive found no message after {done} of {calls}")
            await asyncio.gather(*(c.ack(m) for m in got))
            done += len(got)
        c1, t1 = cpu_seconds(pid), time.perf_counter()
    return done / (t1 - t0), 1e6 * (c1[0] - c0[0]) / done, 1e6 * (c1[1] - c0[1]) / done


def ratios(cpu: dict[tuple[str, int], float], what: str, unit: str) -> list[str]:
    """'gRPC / Remoting' lines: each gRPC broker row's CPU per call over broker-remoting's at the
    same in-flight value (or batch)."""
    out = []
    for kind in ("broker-native", "broker-grpcio"):
        parts = [f"{what} {n}: {cpu[kind, n] / cpu['broker-remoting', n]:.2f}x"
                 for (k, n) in cpu if k == kind and ("broker-remoting", n) in cpu
                 and cpu["broker-remoting", n] > 0]
        if parts:
            out.append(f"broker CPU per {unit}, {kind} / broker-remoting: " + ", ".join(parts))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", nargs="+", default=["aio", "native"])
    ap.add_argument("--inflight", nargs="+", type=int, default=[32, 1])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--grpclib-path")
    ap.add_argument("--receive", action="store_true",
                    help="broker servers: receive and ack (module docstring)")
    ap.add_argument("--batch", type=int, default=32, help="--receive: messages a receive")
    args = ap.parse_args()
    if args.receive:
        print(f"{'server':<16}{'batch':>10}{'msgs/s':>10}{'CPU us/msg':>12}{'user':>8}"
              f"{'system':>8}")
    else:
        print(f"{'server':<16}{'in flight':>10}{'calls/s':>10}{'CPU us/call':>12}{'user':>8}"
              f"{'system':>8}")
    cpu: dict[tuple[str, int], float] = {}  # (server, in flight or batch) -> CPU us per call
    for kind in args.server:
        q: Any = mp.Queue()
        root = tempfile.mkdtemp(prefix="grpc-floor-")  # a broker's store, removed after
        p = mp.Process(target=serve, args=(q, kind, args.grpclib_path, root), daemon=True)
        p.start()
        try:
            port = q.get(timeout=60)
            if args.receive:
                if not kind.startswith("broker-"):
                    raise SystemExit(f"--receive needs a broker server, not {kind}")
                rx = measure_receive_remoting if kind == "broker-remoting" else measure_receive
                rate, user, system = asyncio.run(rx(port, p.pid or 0, args.calls, args.batch))
                cpu[kind, args.batch] = user + system
                print(f"{kind:<16}{args.batch:>10}{rate:>10.0f}{user + system:>12.1f}"
                      f"{user:>8.1f}{system:>8.1f}", flush=True)
                continue
            tx = measure_remoting if kind == "broker-remoting" else measure
            for inflight in args.inflight:
                rate, user, system = asyncio.run(tx(port, p.pid or 0, args.calls, inflight))
                cpu[kind, inflight] = user + system
                print(f"{kind:<16}{inflight:>10}{rate:>10.0f}{user + system:>12.1f}{user:>8.1f}"
                      f"{system:>8.1f}", flush=True)
        finally:
            p.kill()
            p.join()
            shutil.rmtree(root, ignore_errors=True)
    for line in (ratios(cpu, "batch", "message") if args.receive
                 else ratios(cpu, "in flight", "call")):
        print(line)


if __name__ == "__main__":
    main()
