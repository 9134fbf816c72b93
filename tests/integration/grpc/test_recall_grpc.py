"""RecallMessage: not supported by this broker's timer wheel, answered NOT_IMPLEMENTED with the
reason; a delayed message's send gives no recall handle."""

from __future__ import annotations

import time

from grpchelp import GrpcEnv, client_metadata
from sendhelp import message, send

from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb


async def recall(g: GrpcEnv, topic: str, handle: str) -> spb.RecallMessageResponse:
    return await g.stub.RecallMessage(spb.RecallMessageRequest(
        topic=pb.Resource(name=topic), recall_handle=handle), timeout=5,
        metadata=client_metadata())


async def test_recall_is_not_implemented_and_says_why(g: GrpcEnv) -> None:
    r = await send(g, message("R1", deliver_ms=int(time.time() * 1000) + 60_000))
    assert r.status.code == pb.Code.OK and r.entries[0].recall_handle == ""
    rr = await recall(g, "R1", "some-handle")
    assert rr.status.code == pb.Code.NOT_IMPLEMENTED
    assert "timer wheel" in rr.status.message
    assert (await recall(g, "R1", "")).status.code == pb.Code.BAD_REQUEST
    assert (await recall(g, "bad topic", "h")).status.code == pb.Code.ILLEGAL_TOPIC
