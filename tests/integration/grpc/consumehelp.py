"""Helpers of the consumer-side gRPC tests (ReceiveMessage, Ack, lite pull): topics, messages put
straight into the broker's store, requests, stream collection, and consumer limits short enough
for tests (not a test module)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpchelp
import pytest
from google.protobuf.duration_pb2 import Duration
from grpchelp import GrpcEnv, client_metadata, grpc_world

from rocketlite.broker.broker import Broker
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.proxy.consume_checks import ConsumeLimits
from rocketlite.proxy.pb import definition_pb2 as dpb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.store.message import MessageToStore

FAST = ConsumeLimits(min_invisible_ms=100, max_invisible_ms=3600_000, min_polling_ms=50,
                     max_polling_ms=3_000, polling_reserve_ms=200, max_batch=32)


def fast_limits(monkeypatch: pytest.MonkeyPatch) -> ConsumeLimits:
    monkeypatch.setitem(grpchelp.FRONT_OVERRIDES, "limits", FAST)
    return FAST


def make_topic(broker: Broker, topic: str, queues: int = 1, perm: int = 6) -> None:
    broker.topics.update(TopicConfig(topicName=topic, readQueueNums=queues,
                                     writeQueueNums=queues, perm=perm))


def put(broker: Broker, topic: str, bodies: list[bytes], queue_id: int = 0,
        tags: str | None = None, **props: str) -> list[str]:
    """Store ``bodies`` in one queue, each with its own UNIQ_KEY (returned), and wait until
    they are readable."""
    now = int(time.time() * 1000)
    keys: list[str] = []
    msgs: list[MessageToStore] = []
    for i, body in enumerate(bodies):
        p = dict(props)
        if tags is not None:
            p["TAGS"] = tags
        key = f"U{now:X}{queue_id:02X}{i:06X}{len(body):04X}"
        p["UNIQ_KEY"] = key
        keys.append(key)
        msgs.append(MessageToStore(topic=topic, body=body, queue_id=queue_id,
                                   properties=encode_properties(p), born_timestamp=now))
    broker.store.put_messages_sync(msgs)
    store = broker.store
    deadline = time.monotonic() + 10
    while store.dispatcher.dispatch_from < store.commitlog.max_offset:
        assert time.monotonic() < deadline, "dispatch is stuck"
        time.sleep(0.002)
    return keys


def resource(name: str) -> dpb.Resource:
    return dpb.Resource(name=name)


def queue(topic: str, queue_id: int = 0, broker_name: str = "broker-g") -> dpb.MessageQueue:
    return dpb.MessageQueue(topic=resource(topic), id=queue_id,
                            broker=dpb.Broker(name=broker_name))


def ms(n: int) -> Duration:
    return Duration(seconds=n // 1000, nanos=(n % 1000) * 1_000_000)


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [r async for r in stream]


class Clock:
    """The POP service's clock, movable: time past an invisible time without waiting for it."""

    def __init__(self) -> None:
        self.offset = 0

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset


# Revive rounds are run by the tests (``broker.pop.revive.round()``), with no ack wait.
POP_PROPS = {"reviveInterval": "60000", "popAckTimeInterval": "0"}


@contextlib.asynccontextmanager
async def pop_world(root: Path, **broker_props: str) -> AsyncIterator[tuple[GrpcEnv, Clock]]:
    """The gRPC world with the POP service on a movable clock."""
    async with grpc_world(root, {**POP_PROPS, **broker_props}) as env:
        clock = Clock()
        env.broker.pop.clock = clock
        yield env, clock


def receive_req(topic: str, group: str = "G", batch: int = 16, invisible_ms: int | None = 15_000,
                poll_ms: int | None = 1_000, tag: str = "*", ftype: int = dpb.FilterType.TAG,
                queue_id: int = 0) -> spb.ReceiveMessageRequest:
    r = spb.ReceiveMessageRequest(
        group=resource(group), message_queue=queue(topic, queue_id), batch_size=batch,
        filter_expression=dpb.FilterExpression(type=ftype,  # type: ignore[arg-type]
                                               expression=tag))
    if invisible_ms is not None:
        r.invisible_duration.CopyFrom(ms(invisible_ms))
    if poll_ms is not None:
        r.long_polling_timeout.CopyFrom(ms(poll_ms))
    return r


async def receive(g: GrpcEnv, req: spb.ReceiveMessageRequest, deadline_s: float = 5
                  ) -> tuple[dpb.Status, list[dpb.Message]]:
    """One ReceiveMessage: its status and messages, checking the stream's shape (status first,
    then messages, then the delivery timestamp last)."""
    rs = await collect(g.stub.ReceiveMessage(req, timeout=deadline_s, metadata=client_metadata()))
    kinds = [r.WhichOneof("content") for r in rs]
    assert kinds[0] == "status" and kinds[-1] == "delivery_timestamp", kinds
    assert set(kinds[1:-1]) <= {"message"}, kinds
    return rs[0].status, [r.message for r in rs[1:-1]]


async def ack(g: GrpcEnv, topic: str, handles: list[str], group: str = "G"
              ) -> spb.AckMessageResponse:
    entries = [spb.AckMessageEntry(message_id=f"m{i}", receipt_handle=h)
               for i, h in enumerate(handles)]
    return await g.stub.AckMessage(spb.AckMessageRequest(
        group=resource(group), topic=resource(topic), entries=entries), timeout=5,
        metadata=client_metadata())
