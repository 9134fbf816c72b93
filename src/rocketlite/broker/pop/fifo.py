"""The order state of orderly (FIFO) pops, per (group, topic, queue): RocketMQ's
``ConsumerOrderInfoManager`` reduced to what one broker needs.

One batch is in flight per queue per group. The queue is blocked until every message of the batch
is acked (the consumer offset then moves past the batch: committed at ack, not at pop, so a crash
re-delivers) or the batch's invisible time passes; the next pop then reads again from the
committed offset and re-delivers the unacked messages in order, each with one more delivery (the
acked ones are skipped). The state is persisted (``config/popOrderInfo.json``, rocketlite's own
JSON; RocketMQ's ``consumerOrderInfo.json`` holds the same facts) every revive interval and at
shutdown, so after a restart or a crash a batch stays hidden until its invisible time and its
delivery counts go on (a crash loses at most one interval of changes: a batch acked within it is
delivered again, at-least-once).

Bounded: one batch (at most 32 messages) per key, at most ``MAX_KEYS`` keys with a batch in
flight (a FIFO pop past that is refused); a batch visible again and not popped for ``KEEP_MS`` is
dropped.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from rocketlite.broker.pop.errors import BadPopRequest, ReceiptHandleExpired

log = logging.getLogger(__name__)

MAX_KEYS = 100_000
KEEP_MS = 24 * 3600 * 1000  # how long a visible-again batch nobody pops is remembered

OrderKey = tuple[str, str, int]  # group, topic read, queue id


@dataclass(slots=True)
class OrderBatch:
    pop_time: int
    invisible_until: int
    offsets: list[int]
    next_offset: int  # the consumer offset once all of ``offsets`` are acked
    acked: set[int] = field(default_factory=set)
    deliveries: dict[int, int] = field(default_factory=dict)  # offset -> times delivered
    attempt_id: str | None = None  # the client's id for this pop (repeated if it retries)

    @property
    def complete(self) -> bool:
        return self.acked.issuperset(self.offsets)


class FifoState:
    def __init__(self) -> None:
        self.batches: dict[OrderKey, OrderBatch] = {}
        self.dirty = False

    def encode(self) -> bytes:
        self.dirty = False
        return json.dumps({"batches": [
            {"g": g, "t": t, "q": q, "pt": b.pop_time, "iu": b.invisible_until, "o": b.offsets,
             "n": b.next_offset, "a": sorted(b.acked), "d": [[o, c] for o, c in
                                                               b.deliveries.items()],
             "ai": b.attempt_id} for (g, t, q), b in self.batches.items()]},
            separators=(",", ":")).encode()

    def load(self, obj: Any, where: str) -> None:
        """The batches of a file ``encode`` wrote; an entry that does not parse is logged and
        left out (its queue is re-delivered from the committed offset)."""
        entries = obj.get("batches") if isinstance(obj, dict) else None
        if not isinstance(entries, list):
            log.warning("%s: no 'batches' list; FIFO order state starts empty", where)
            return
        for e in entries[:MAX_KEYS]:
            try:
                b = OrderBatch(int(e["pt"]), int(e["iu"]), [int(o) for o in e["o"]],
                               int(e["n"]), {int(o) for o in e["a"]},
                               {int(o): int(c) for o, c in e["d"]},
                               str(e["ai"]) if e.get("ai") is not None else None)
                self.batches[(str(e["g"]), str(e["t"]), int(e["q"]))] = b
            except (KeyError, TypeError, ValueError) as err:
                log.warning("%s: FIFO entry %.80r left out: %r", where, e, err)

    def blocked(self, key: OrderKey, now: int, attempt_id: str | None = None) -> bool:
        """Whether the queue has a batch in flight; not for a repeat of that batch's pop."""
        b = self.batches.get(key)
        if b is None or b.complete or now >= b.invisible_until:
            return False
        return attempt_id is None or attempt_id != b.attempt_id

    def previous(self, key: OrderKey, offset: int) -> tuple[int, bool]:
        """(times ``offset`` was delivered before, whether it was acked) in the batch that
        expired on this queue; (0, False) for a message never delivered."""
        b = self.batches.get(key)
        if b is None:
            return 0, False
        return b.deliveries.get(offset, 0), offset in b.acked

    def skippable(self, key: OrderKey) -> int:
        """How many messages a re-read of the queue may skip (acked or dead-lettered)."""
        b = self.batches.get(key)
        return len(b.acked) + len(b.offsets) if b is not None else 0

    def begin(self, key: OrderKey, pop_time: int, invisible_until: int, offsets: list[int],
              next_offset: int, done: set[int], attempt_id: str | None = None) -> None:
        """A new batch of ``offsets``; ``done`` are offsets of the range acked (or dead-lettered)
        earlier, kept so a later re-delivery skips them. A repeat of the batch's pop (same
        ``attempt_id``) delivers it again without counting a delivery."""
        old = self.batches.get(key)
        if old is None and len(self.batches) >= MAX_KEYS:
            raise BadPopRequest(f"{MAX_KEYS} FIFO queues already have a batch in flight")
        repeat = old is not None and attempt_id is not None and old.attempt_id == attempt_id
        deliveries = {o: (old.deliveries.get(o, 0) if old else 0)
                      + (0 if repeat and old is not None and o in old.deliveries else 1)
                      for o in offsets}
        self.batches[key] = OrderBatch(pop_time, invisible_until, list(offsets), next_offset,
                                       set(done), deliveries, attempt_id)
        self.dirty = True

    def _batch(self, key: OrderKey, pop_time: int, now: int) -> OrderBatch:
        b = self.batches.get(key)
        if b is None or b.pop_time != pop_time:
            raise ReceiptHandleExpired(f"no FIFO batch popped at {pop_time} is in flight on "
                                       f"{key[1]}:{key[2]} for {key[0]} (re-delivered since?)")
        if now >= b.invisible_until:
            raise ReceiptHandleExpired(f"the FIFO batch popped at {pop_time} on {key[1]}:{key[2]} "
                                       f"became visible again at {b.invisible_until}")
        return b

    def ack(self, key: OrderKey, pop_time: int, offset: int, now: int) -> int | None:
        """Mark ``offset`` acked; the offset to commit when that completes the batch, else None."""
        b = self._batch(key, pop_time, now)
        if offset not in b.offsets:
            raise ReceiptHandleExpired(f"offset {offset} is not in the FIFO batch popped at "
                                       f"{pop_time} on {key[1]}:{key[2]}")
        b.acked.add(offset)
        self.dirty = True
        if b.complete:
            del self.batches[key]
            return b.next_offset
        return None

    def change(self, key: OrderKey, pop_time: int, until: int, now: int) -> None:
        """Hide the batch popped at ``pop_time`` until ``until``."""
        self._batch(key, pop_time, now).invisible_until = until
        self.dirty = True

    def expire(self, now: int, keep_ms: int = KEEP_MS) -> int:
        """Drop batches visible again for ``keep_ms`` and not popped since (a group that
        stopped consuming); their queues start again from the committed offset with fresh
        delivery counts. Returns how many were dropped."""
        old = [k for k, b in self.batches.items() if b.invisible_until + keep_ms < now]
        for k in old:
            del self.batches[k]
        if old:
            self.dirty = True
        return len(old)

    def forget(self, key: OrderKey) -> None:
        if self.batches.pop(key, None) is not None:
            self.dirty = True
