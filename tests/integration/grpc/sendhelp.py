"""Helpers of the gRPC producer-side tests (not a test module): v2 messages and Settings as the
5.x client builds them, a Telemetry stream, and reading a topic back from the store."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator

from google.protobuf.timestamp_pb2 import Timestamp
from grpchelp import GrpcEnv, client_metadata

from rocketlite.formats.message_record import MessageRecord
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb

_ids = itertools.count(1)


def message(topic: str, body: bytes = b"hello", *, tag: str | None = "TagA",
            keys: tuple[str, ...] = ("k1", "k2"), props: dict[str, str] | None = None,
            group: str | None = None, deliver_ms: int | None = None,
            kind: int | None = None, msg_id: str | None = None) -> pb.Message:
    sp = pb.SystemProperties(
        message_id=msg_id if msg_id is not None else f"01AABBCCDDEEFF00010000{next(_ids):012X}",
        keys=list(keys), body_encoding=pb.Encoding.IDENTITY,
        born_timestamp=Timestamp(seconds=int(time.time())), born_host="test-host")
    if tag is not None:
        sp.tag = tag
    if group is not None:
        sp.message_group = group
    if deliver_ms is not None:
        sp.delivery_timestamp.CopyFrom(Timestamp(seconds=deliver_ms // 1000,
                                                 nanos=deliver_ms % 1000 * 1_000_000))
    if kind is None:
        kind = (pb.MessageType.FIFO if group is not None else pb.MessageType.DELAY
                if deliver_ms is not None else pb.MessageType.NORMAL)
    sp.message_type = kind  # type: ignore[assignment]
    return pb.Message(topic=pb.Resource(name=topic), user_properties=props or {},
                      system_properties=sp, body=body)


async def send(g: GrpcEnv, *msgs: pb.Message) -> spb.SendMessageResponse:
    return await g.stub.SendMessage(spb.SendMessageRequest(messages=list(msgs)), timeout=5,
                                    metadata=client_metadata())


def records(g: GrpcEnv, topic: str) -> list[MessageRecord]:
    """Every record dispatched to ``topic``'s queues, by queue then offset."""
    store = g.broker.store
    out = []
    for qid in range(64):
        cq = store.find_queue(topic, qid)
        if cq is None:
            continue
        for phys, _size, _tag in cq.get_units(cq.min_offset, 10_000):
            rec = store.look_message(phys)
            assert rec is not None
            out.append(rec)
    return out


async def wait_records(g: GrpcEnv, topic: str, n: int, within: float = 5.0
                       ) -> list[MessageRecord]:
    deadline = time.monotonic() + within
    while True:
        recs = records(g, topic)
        if len(recs) >= n or time.monotonic() > deadline:
            return recs
        await asyncio.sleep(0.02)


def consumer_settings(group: str, client_type: int = pb.ClientType.SIMPLE_CONSUMER) -> pb.Settings:
    return pb.Settings(client_type=client_type, subscription=pb.Subscription(
        group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name="T1"),
            expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="a || b"))]))


def producer_settings(*topics: str) -> pb.Settings:
    return pb.Settings(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(
        topics=[pb.Resource(name=t) for t in topics], max_body_size=4 << 20,
        validate_message_type=True))


class Stream:
    """A Telemetry stream: ``send`` a command, ``recv`` the next one from the server."""

    def __init__(self, g: GrpcEnv, metadata: tuple[tuple[str, str], ...] | None = None) -> None:
        self.out: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()
        self.call = g.stub.Telemetry(self._gen(), metadata=metadata or client_metadata())

    async def _gen(self) -> AsyncIterator[spb.TelemetryCommand]:
        while (cmd := await self.out.get()) is not None:
            yield cmd

    async def send(self, cmd: spb.TelemetryCommand) -> None:
        await self.out.put(cmd)

    async def recv(self) -> spb.TelemetryCommand:
        r = await asyncio.wait_for(self.call.read(), 5)
        assert isinstance(r, spb.TelemetryCommand), r
        return r

    async def close(self) -> None:
        await self.out.put(None)
        self.call.cancel()
