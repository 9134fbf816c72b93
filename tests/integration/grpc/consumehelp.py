"""Helpers of the consumer-side gRPC tests (ReceiveMessage, Ack, lite pull): topics, messages put
straight into the broker's store, requests, stream collection, and consumer limits short enough
for tests (not a test module)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration

from rocketlite.broker.broker import Broker
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.proxy import consume_checks
from rocketlite.proxy.consume_checks import ConsumeLimits
from rocketlite.proxy.pb import definition_pb2 as dpb
from rocketlite.store.message import MessageToStore

FAST = ConsumeLimits(min_invisible_ms=100, max_invisible_ms=3600_000, min_polling_ms=50,
                     max_polling_ms=3_000, polling_reserve_ms=20, max_batch=32)


def fast_limits(monkeypatch: pytest.MonkeyPatch) -> ConsumeLimits:
    monkeypatch.setattr(consume_checks, "LIMITS", FAST)
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
