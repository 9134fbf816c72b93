"""AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue over gRPC: per-entry
statuses and the overall one, new receipt handles, dead letters readable, bad handles refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from consumehelp import (
    Clock,
    ack,
    collect,
    fast_limits,
    make_topic,
    ms,
    pop_world,
    put,
    queue,
    receive,
    receive_req,
    resource,
)
from grpchelp import GrpcEnv, client_metadata

from rocketlite.proxy.pb import definition_pb2 as dpb
from rocketlite.proxy.pb import service_pb2 as spb

C = dpb.Code
MD = client_metadata()


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_limits(monkeypatch)


@pytest.fixture
async def gp(tmp_path: Path) -> AsyncIterator[tuple[GrpcEnv, Clock]]:
    async with pop_world(tmp_path / "store") as env:
        make_topic(env[0].broker, "T", 1)
        yield env


async def handles(g: GrpcEnv, n: int, invisible_ms: int = 15_000) -> list[dpb.Message]:
    put(g.broker, "T", [b"m%d" % i for i in range(n)])
    st, msgs = await receive(g, receive_req("T", invisible_ms=invisible_ms))
    assert st.code == C.OK and len(msgs) == n
    return msgs


async def change(g: GrpcEnv, handle: str, invisible_ms: int, topic: str = "T",
                 group: str = "G") -> spb.ChangeInvisibleDurationResponse:
    return await g.stub.ChangeInvisibleDuration(spb.ChangeInvisibleDurationRequest(
        group=resource(group), topic=resource(topic), receipt_handle=handle,
        invisible_duration=ms(invisible_ms), message_id="m"), timeout=5, metadata=MD)


async def test_a_malformed_handle_is_invalid_and_a_mix_is_multiple_results(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    [m] = await handles(g, 1)
    r = await ack(g, "T", ["not a handle"])
    assert r.status.code == C.INVALID_RECEIPT_HANDLE and r.status.message
    assert r.entries[0].status.code == C.INVALID_RECEIPT_HANDLE
    assert r.entries[0].receipt_handle == "not a handle"
    r = await ack(g, "T", [m.system_properties.receipt_handle, "junk"])
    assert r.status.code == C.MULTIPLE_RESULTS
    assert [e.status.code for e in r.entries] == [C.OK, C.INVALID_RECEIPT_HANDLE]


async def test_an_expired_handle_is_refused_and_the_message_comes_back(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, clock = gp
    [m] = await handles(g, 1, invisible_ms=1_000)
    clock.offset += 1_001
    r = await ack(g, "T", [m.system_properties.receipt_handle])
    assert r.status.code == C.INVALID_RECEIPT_HANDLE and "expired" in r.status.message
    assert await g.broker.pop.revive.round() == 1
    _st, [again] = await receive(g, receive_req("T"))
    assert again.body == m.body and again.system_properties.delivery_attempt == 2


async def test_an_ack_without_entries_or_with_bad_names_is_refused(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    assert (await ack(g, "T", [])).status.code == C.BAD_REQUEST
    r = await ack(g, "T", ["h"] * 1025)
    assert r.status.code == C.BAD_REQUEST and "1024" in r.status.message and not r.entries
    assert (await ack(g, "", ["h"])).status.code == C.ILLEGAL_TOPIC
    assert (await ack(g, "T", ["h"], group="")).status.code == C.ILLEGAL_CONSUMER_GROUP
    [m] = await handles(g, 1)
    r = await ack(g, "Nope", [m.system_properties.receipt_handle])
    assert r.entries[0].status.code == C.TOPIC_NOT_FOUND


async def test_a_changed_invisible_time_gives_a_new_handle_that_acks_and_outlives_the_old(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, clock = gp
    [m] = await handles(g, 1, invisible_ms=1_000)
    old = m.system_properties.receipt_handle
    r = await change(g, old, 10_000)
    assert r.status.code == C.OK and r.receipt_handle and r.receipt_handle != old
    clock.offset += 1_001  # past the old handle's time, within the new one's
    assert await g.broker.pop.revive.round() == 0  # the change acked the old checkpoint
    assert (await ack(g, "T", [old])).status.code == C.INVALID_RECEIPT_HANDLE
    assert (await ack(g, "T", [r.receipt_handle])).status.code == C.OK
    clock.offset += 10_000
    assert await g.broker.pop.revive.round() == 0  # acked: nothing comes back


async def test_a_change_to_zero_makes_the_message_visible_again_at_once(
        gp: tuple[GrpcEnv, Clock]) -> None:
    """What a 5.x client without a retry policy asks after a failed consume (the Node client
    1.0.8 does): the Java proxy's minimum is 0, and the message is redelivered as attempt 2."""
    g, _ = gp
    [m] = await handles(g, 1)
    r = await change(g, m.system_properties.receipt_handle, 0)
    assert r.status.code == C.OK and r.receipt_handle
    assert await g.broker.pop.revive.round() == 1
    _st, [again] = await receive(g, receive_req("T"))
    assert again.body == m.body and again.system_properties.delivery_attempt == 2


async def test_a_change_of_a_bad_handle_or_to_a_bad_time_is_refused(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    [m] = await handles(g, 1)
    h = m.system_properties.receipt_handle
    r = await change(g, "garbage", 5_000)
    assert r.status.code == C.INVALID_RECEIPT_HANDLE and not r.receipt_handle
    assert (await change(g, h, -1)).status.code == C.ILLEGAL_INVISIBLE_TIME
    assert (await change(g, h, 3600_001)).status.code == C.ILLEGAL_INVISIBLE_TIME
    assert (await change(g, h, 5_000, topic="Nope")).status.code == C.TOPIC_NOT_FOUND


async def test_a_forwarded_message_is_readable_in_the_dlq_and_acked(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, clock = gp
    [m] = await handles(g, 1, invisible_ms=1_000)
    r = await g.stub.ForwardMessageToDeadLetterQueue(spb.ForwardMessageToDeadLetterQueueRequest(
        group=resource("G"), topic=resource("T"), receipt_handle=m.system_properties.receipt_handle,
        message_id=m.system_properties.message_id, delivery_attempt=1, max_delivery_attempts=16),
        timeout=5, metadata=MD)
    assert r.status.code == C.OK
    rs = await collect(g.stub.PullMessage(spb.PullMessageRequest(
        group=resource("DLQReader"), message_queue=queue("%DLQ%G"), offset=0, batch_size=8,
        filter_expression=dpb.FilterExpression(type=dpb.FilterType.TAG, expression="*")),
        timeout=5, metadata=MD))
    assert rs[0].status.code == C.OK
    [dead] = [x.message for x in rs if x.WhichOneof("content") == "message"]
    assert dead.body == m.body
    assert dead.system_properties.message_id == m.system_properties.message_id
    clock.offset += 1_001
    assert await g.broker.pop.revive.round() == 0  # acked by the forward


async def test_a_forward_with_a_bad_handle_is_refused(gp: tuple[GrpcEnv, Clock]) -> None:
    g, _ = gp
    r = await g.stub.ForwardMessageToDeadLetterQueue(spb.ForwardMessageToDeadLetterQueueRequest(
        group=resource("G"), topic=resource("T"), receipt_handle="bad", message_id="x",
        max_delivery_attempts=16), timeout=5, metadata=MD)
    assert r.status.code == C.INVALID_RECEIPT_HANDLE and r.status.message
    assert g.broker.topics.get("%DLQ%G") is None
