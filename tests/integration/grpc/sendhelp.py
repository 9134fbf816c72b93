"""Helpers of the send and transaction tests (not a test module): v2 messages as the 5.x
client builds them, and reading a topic back from the store."""

from __future__ import annotations

import asyncio
import itertools
import time

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
