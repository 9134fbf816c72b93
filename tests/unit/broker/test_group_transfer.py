"""SYNC_MASTER's waits (``broker/ha/transfer.GroupTransfer``) against a stand-in HA server: the
answer now or later, and controller mode's master alone in its SyncStateSet."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from rocketlite.broker.ha.transfer import (
    FLUSH_SLAVE_TIMEOUT,
    SLAVE_NOT_AVAILABLE,
    SUCCESS,
    GroupTransfer,
)

if TYPE_CHECKING:
    from rocketlite.broker.ha.server import HAServer


class FakeServer:
    def __init__(self) -> None:
        self.max_acked = -1
        self.slave_connected = True


def transfer(server: FakeServer, timeout_ms: int = 10_000) -> GroupTransfer:
    return GroupTransfer(cast("HAServer", server), timeout_ms)


async def test_waits_are_answered_by_the_slaves_ack_in_offset_order() -> None:
    s = FakeServer()
    t = transfer(s)
    a, b = t.request(100), t.request(200)
    assert isinstance(a, asyncio.Future) and isinstance(b, asyncio.Future)
    s.max_acked = 150
    t.acked(150)
    assert a.result() == SUCCESS and not b.done()
    assert t.request(120) == SUCCESS  # acked already
    s.slave_connected = False
    assert t.request(300) == SLAVE_NOT_AVAILABLE
    t.close()
    assert b.result() == FLUSH_SLAVE_TIMEOUT


async def test_a_late_slave_gets_flush_slave_timeout() -> None:
    t = transfer(FakeServer(), timeout_ms=20)
    w = t.request(100)
    assert isinstance(w, asyncio.Future)
    assert await asyncio.wait_for(w, 2) == FLUSH_SLAVE_TIMEOUT
    assert t.timeouts == 1


async def test_a_master_alone_in_its_sync_state_set_answers_at_once() -> None:
    s = FakeServer()
    t = transfer(s)
    waiting = t.request(100)
    assert isinstance(waiting, asyncio.Future)
    t.set_alone(True)  # the shrunk set is in the controller's state
    assert waiting.result() == SUCCESS  # the waiting append too
    s.slave_connected = False
    assert t.request(250) == SUCCESS  # no slave needed
    assert t.alone_acked == 250
    t.set_alone(False)  # a larger set is about to be written: wait for the slave again
    assert t.request(300) == SLAVE_NOT_AVAILABLE  # no slave connected: not acked alone now
    s.slave_connected = True
    assert isinstance(t.request(400), asyncio.Future)  # waits for the slave's ack
    assert t.alone_acked == 250  # what a joining slave must hold first
    t.close()
