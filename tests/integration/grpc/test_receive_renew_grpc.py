"""ReceiveMessage with auto_renew (the PushConsumers): the front keeps the messages invisible
while the client holds them, acks them by the client's first handle, and lets them go when the
client is gone or has held them too long."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpchelp
import pytest
from consumehelp import (
    Clock,
    fast_limits,
    make_topic,
    pop_world,
    put,
    receive,
    receive_req,
)
from grpchelp import CLIENT_ID, GrpcEnv, client_metadata

from rocketlite.proxy import renew
from rocketlite.proxy.pb import definition_pb2 as dpb
from rocketlite.proxy.pb import service_pb2 as spb

C = dpb.Code
MD = client_metadata()
RC = renew.RenewConfig(default_invisible_ms=1_000, ahead_ms=500, slice_ms=2_000, max_ms=10_000,
                       period_ms=60_000, clear_ms=100)


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_limits(monkeypatch)
    monkeypatch.setitem(grpchelp.FRONT_OVERRIDES, "renew", RC)


@pytest.fixture
async def gp(tmp_path: Path) -> AsyncIterator[tuple[GrpcEnv, Clock]]:
    async with pop_world(tmp_path / "store") as env:
        make_topic(env[0].broker, "T", 1)
        env[0].front.ctx.sessions.touch(CLIENT_ID)  # the client's Telemetry session
        yield env


def ack_request(m: dpb.Message) -> spb.AckMessageRequest:
    """The ack a 5.x client sends: the message id and the handle it received."""
    return spb.AckMessageRequest(
        group=dpb.Resource(name="G"), topic=dpb.Resource(name="T"),
        entries=[spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                     receipt_handle=m.system_properties.receipt_handle)])


def renewer(g: GrpcEnv) -> renew.HandleRenewer:
    return g.front.ctx.renewer


async def auto_receive(g: GrpcEnv) -> list[dpb.Message]:
    req = receive_req("T", invisible_ms=None)
    req.auto_renew = True
    st, msgs = await receive(g, req)
    assert st.code == C.OK
    return msgs


async def test_a_held_message_is_renewed_and_acked_by_its_first_handle(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, clock = gp
    put(g.broker, "T", [b"p0"])
    [m] = await auto_receive(g)
    assert m.system_properties.invisible_duration.ToMilliseconds() == 1_000
    r = renewer(g)
    assert len(r) == 1
    assert r.renew_due() == 0  # not due yet
    clock.offset += 600  # within renewAhead of the end
    assert r.renew_due() == 1
    clock.offset += 1_000  # past the first invisible time, within the renewed one
    assert await g.broker.pop.revive.round() == 0
    # the first handle alone expired: the front acks by the renewed one
    res = await g.stub.AckMessage(ack_request(m), timeout=5, metadata=MD)
    assert res.status.code == C.OK and res.entries[0].receipt_handle == \
        m.system_properties.receipt_handle
    assert len(r) == 0
    clock.offset += 5_000
    assert await g.broker.pop.revive.round() == 0  # acked: nothing comes back


async def test_the_messages_of_a_client_that_is_gone_come_back_soon(
        gp: tuple[GrpcEnv, Clock]) -> None:
    g, clock = gp
    put(g.broker, "T", [b"p1"])
    [_m] = await auto_receive(g)
    g.front.ctx.sessions.remove(CLIENT_ID)
    clock.offset += 600
    assert renewer(g).renew_due() == 0 and len(renewer(g)) == 0
    clock.offset += 101  # the clear time, far before the default invisible time's end
    assert await g.broker.pop.revive.round() == 1
    _st, [again] = await receive(g, receive_req("T"))
    assert again.body == b"p1" and again.system_properties.delivery_attempt == 2


async def test_a_message_held_past_the_renew_max_time_is_let_go(gp: tuple[GrpcEnv, Clock]) -> None:
    g, clock = gp
    put(g.broker, "T", [b"p2"])
    [_m] = await auto_receive(g)
    r = renewer(g)
    for _ in range(5):  # renewed for 10 s of the POP's clock
        clock.offset += 2_000
        r.renew_due()
    assert len(r) == 0
    clock.offset += 2_001
    assert await g.broker.pop.revive.round() == 1


async def test_the_renewal_timer_runs_by_itself(gp: tuple[GrpcEnv, Clock],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    g, _ = gp
    monkeypatch.setattr(g.front.ctx, "renew", renew.RenewConfig(
        default_invisible_ms=1_000, ahead_ms=950, slice_ms=2_000, period_ms=50))
    put(g.broker, "T", [b"p3"])
    [m] = await auto_receive(g)
    r = renewer(g)
    [held] = r.held.values()
    await asyncio.sleep(0.4)
    assert held.current != held.first  # renewed by the timer
    res = await g.stub.AckMessage(ack_request(m), timeout=5, metadata=MD)
    assert res.status.code == C.OK
