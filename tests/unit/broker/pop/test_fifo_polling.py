"""The FIFO order state (one batch per queue, blocked until acked or expired, delivery counts,
stale handles refused) and the pop long-polling registry (limits, wake-ups from any thread)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from rocketlite.broker.pop.errors import PollingFull, ReceiptHandleExpired
from rocketlite.broker.pop.fifo import FifoState
from rocketlite.broker.pop.polling import PopPolling

KEY = ("G", "T", 0)


def test_fifo_batch_blocks_until_acked() -> None:
    f = FifoState()
    f.begin(KEY, 100, 200, [5, 6], 7, set())
    assert f.blocked(KEY, 150) and not f.blocked(KEY, 200)
    assert f.ack(KEY, 100, 5, 150) is None
    assert f.previous(KEY, 5) == (1, True) and f.previous(KEY, 6) == (1, False)
    assert f.ack(KEY, 100, 6, 150) == 7  # complete: the offset to commit
    assert not f.blocked(KEY, 150) and f.previous(KEY, 6) == (0, False)


def test_fifo_redelivery_counts_and_stale_handles() -> None:
    f = FifoState()
    f.begin(KEY, 100, 200, [5, 6], 7, set())
    f.ack(KEY, 100, 5, 150)
    with pytest.raises(ReceiptHandleExpired, match="visible again"):
        f.ack(KEY, 100, 6, 200)
    f.begin(KEY, 300, 400, [6], 7, {5})  # the re-delivery skips the acked 5
    assert f.previous(KEY, 6) == (2, False) and f.previous(KEY, 5) == (0, True)
    with pytest.raises(ReceiptHandleExpired, match="re-delivered since"):
        f.ack(KEY, 100, 6, 350)
    with pytest.raises(ReceiptHandleExpired, match="not in the FIFO batch"):
        f.ack(KEY, 300, 9, 350)
    f.change(KEY, 300, 1000, 350)
    assert f.blocked(KEY, 900)
    assert f.ack(KEY, 300, 6, 950) == 7


def test_fifo_state_expires_abandoned_batches_and_round_trips() -> None:
    f = FifoState()
    f.begin(KEY, 100, 200, [5, 6], 7, {4}, "a1")
    f.ack(KEY, 100, 5, 150)
    g = FifoState()
    g.load(json.loads(f.encode()), "test")
    assert g.batches == f.batches and not f.dirty
    g.load({"batches": [{"g": "G"}]}, "test")  # a bad entry is left out
    assert len(g.batches) == 1
    assert f.expire(200 + 1000, keep_ms=1000) == 0
    assert f.expire(200 + 1001, keep_ms=1000) == 1 and f.batches == {} and f.dirty


async def test_polling_limits_and_wakeups() -> None:
    p = PopPolling(per_topic=2, total=3)
    p.start(asyncio.get_running_loop())
    a = p.register(("T", "%RETRY%G_T"))
    b = p.register(("T",))
    assert a is not None and b is not None
    with pytest.raises(PollingFull, match="popPollingSize"):
        p.register(("T",))
    c = p.register(("U",))
    assert c is not None
    with pytest.raises(PollingFull, match="maxPopPollingSize"):
        p.register(("V",))
    # a dispatch on another thread wakes the pops on that topic only
    threading.Thread(target=p.on_dispatched, args=("%RETRY%G_T", 0, 1)).start()
    await asyncio.wait_for(a.event.wait(), 2)
    assert not b.event.is_set() and not c.event.is_set()
    p.on_dispatched("nobody-waits", 0, 1)
    for w in (a, b, c):
        p.unregister(w)
    assert p.count == 0 and p.waiting == {}
    d = p.register(("T",))
    assert d is not None
    p.release_all()
    assert d.event.is_set() and p.closing and p.register(("T",)) is None
