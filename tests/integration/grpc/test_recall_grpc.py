"""RecallMessage over gRPC: a delayed message recalled before its time is never delivered, one
whose time has passed stays delivered and the recall is refused, bad handles are refused with
the Java proxy's codes (INTERNAL_SERVER_ERROR with the broker's remark, TOPIC_NOT_FOUND)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from grpchelp import GrpcEnv, client_metadata, grpc_world
from sendhelp import message, records, send, wait_records

from rocketlite.broker.recall import RecallHandle
from rocketlite.broker.timer_divert import TIMER_TOPIC
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.recall import recall_handle

C = pb.Code


@pytest.fixture
async def g(tmp_path: Path) -> AsyncIterator[GrpcEnv]:
    async with grpc_world(tmp_path / "s", {"timerPrecisionMs": "100"}) as env:
        for name in ("R1", "R2", "R3"):
            env.broker.topics.update(TopicConfig(topicName=name, readQueueNums=1,
                                                 writeQueueNums=1, perm=6))
        yield env


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def recall(g: GrpcEnv, topic: str, handle: str) -> spb.RecallMessageResponse:
    return await g.stub.RecallMessage(spb.RecallMessageRequest(
        topic=pb.Resource(name=topic), recall_handle=handle), timeout=5,
        metadata=client_metadata())


async def handle_of(g: GrpcEnv, topic: str, msg_id: str) -> str:
    """The handle of a stored delayed message, built from its TIMER_OUT_MS (once dispatched)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for rec in records(g, TIMER_TOPIC):
            p = rec.properties
            if p.get("UNIQ_KEY") == msg_id and "TIMER_DEL_UNIQKEY" not in p:
                return recall_handle(topic, g.broker.config.broker_name, int(p["TIMER_OUT_MS"]),
                                     msg_id)
        await asyncio.sleep(0.02)
    raise AssertionError(f"{msg_id} is not in the timer topic")


async def send_delayed(g: GrpcEnv, topic: str, body: bytes, due: int) -> str:
    """Sends a DELAY message; its entry carries the handle of the message stored."""
    r = await send(g, message(topic, body, deliver_ms=due))
    assert r.status.code == C.OK, r.status
    msg_id = r.entries[0].message_id
    assert r.entries[0].recall_handle == await handle_of(g, topic, msg_id)
    return msg_id


async def test_only_delay_messages_get_a_recall_handle(g: GrpcEnv) -> None:
    r = await send(g, message("R1", b"now"))
    assert r.status.code == C.OK and r.entries[0].recall_handle == ""
    r = await send(g, message("R1", b"due", deliver_ms=now_ms() - 1000))  # due already
    assert r.status.code == C.OK and r.entries[0].recall_handle == ""


async def test_recalled_before_its_time_is_never_delivered(g: GrpcEnv) -> None:
    due = now_ms() + 1500
    keep = await send_delayed(g, "R1", b"keep", due)
    gone = await send_delayed(g, "R1", b"gone", due)
    rr = await recall(g, "R1", await handle_of(g, "R1", gone))
    assert rr.status.code == C.OK, rr.status
    assert rr.message_id == gone
    await wait_records(g, "R1", 1, within=10)
    await asyncio.sleep(max(0.0, (due - now_ms()) / 1000) + 0.5)  # past the slot, and then some
    recs = records(g, "R1")
    assert [r.body for r in recs] == [b"keep"] and recs[0].properties["UNIQ_KEY"] == keep
    assert g.broker.timer.stats.recalled == 1


async def test_recall_after_its_time_is_refused_and_the_message_stays(g: GrpcEnv) -> None:
    msg_id = await send_delayed(g, "R2", b"early", now_ms() + 300)
    handle = await handle_of(g, "R2", msg_id)
    assert [r.body for r in await wait_records(g, "R2", 1, within=10)] == [b"early"]
    rr = await recall(g, "R2", handle)
    assert rr.status.code == C.INTERNAL_SERVER_ERROR
    assert "timestamp invalid" in rr.status.message
    await asyncio.sleep(0.3)
    assert [r.body for r in records(g, "R2")] == [b"early"]


async def test_bad_handles_are_refused(g: GrpcEnv) -> None:
    msg_id = await send_delayed(g, "R3", b"x", now_ms() + 60_000)
    good = await handle_of(g, "R3", msg_id)
    h = RecallHandle.decode(good)
    cases = {
        "": "recall handle is invalid",
        "not a handle": "recall handle is invalid",
        RecallHandle("R3", h.broker_name, h.timestamp, msg_id, "v2").encode():
            "recall handle is invalid",
        RecallHandle("R1", h.broker_name, h.timestamp, msg_id).encode(): "topic not match",
        RecallHandle("R3", "other-broker", h.timestamp, msg_id).encode():
            "broker service not available",
        RecallHandle("R3", h.broker_name, "soon", msg_id).encode(): "timestamp invalid",
        RecallHandle("R3", h.broker_name, str(now_ms() + 10 * 86_400_000), msg_id).encode():
            "timestamp invalid",  # beyond timerMaxDelaySec
    }
    for handle, why in cases.items():
        rr = await recall(g, "R3", handle)
        assert rr.status.code == C.INTERNAL_SERVER_ERROR and why in rr.status.message, (handle,
                                                                                        rr.status)
    assert (await recall(g, "NOPE", good)).status.code == C.TOPIC_NOT_FOUND
    assert (await recall(g, "bad topic", good)).status.code == C.ILLEGAL_TOPIC
    markers = [r for r in records(g, TIMER_TOPIC) if "TIMER_DEL_UNIQKEY" in r.properties]
    assert markers == []  # nothing was written for a refused recall
    rr = await recall(g, "R3", good)
    assert rr.status.code == C.OK and rr.message_id == msg_id
