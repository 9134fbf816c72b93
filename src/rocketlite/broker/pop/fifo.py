"""The order state of orderly (FIFO) pops, per (group, topic, queue): RocketMQ's
``ConsumerOrderInfoManager`` reduced to what one broker needs.

One batch is in flight per queue per group. The queue is blocked until every message of the batch
is acked (the consumer offset then moves past the batch: committed at ack, not at pop, so a crash
re-delivers) or the batch's invisible time passes; the next pop then reads again from the
committed offset and re-delivers the unacked messages in order, each with one more delivery (the
acked ones are skipped). The state lives in memory: after a restart the batch in flight is
re-delivered at once and its delivery counts start again from the records' reconsume times.

Bounded: one batch (at most 32 messages) per key, at most ``MAX_KEYS`` keys with a batch in
flight; a FIFO pop past that is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketlite.broker.pop.errors import BadPopRequest, ReceiptHandleExpired

MAX_KEYS = 100_000

OrderKey = tuple[str, str, int]  # group, topic read, queue id


@dataclass(slots=True)
class OrderBatch:
    pop_time: int
    invisible_until: int
    offsets: list[int]
    next_offset: int  # the consumer offset once all of ``offsets`` are acked
    acked: set[int] = field(default_factory=set)
    deliveries: dict[int, int] = field(default_factory=dict)  # offset -> times delivered

    @property
    def complete(self) -> bool:
        return self.acked.issuperset(self.offsets)


class FifoState:
    def __init__(self) -> None:
        self.batches: dict[OrderKey, OrderBatch] = {}

    def blocked(self, key: OrderKey, now: int) -> bool:
        b = self.batches.get(key)
        return b is not None and not b.complete and now < b.invisible_until

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
              next_offset: int, done: set[int]) -> None:
        """A new batch of ``offsets``; ``done`` are offsets of the range acked (or dead-lettered)
        earlier, kept so a later re-delivery skips them."""
        old = self.batches.get(key)
        if old is None and len(self.batches) >= MAX_KEYS:
            raise BadPopRequest(f"{MAX_KEYS} FIFO queues already have a batch in flight")
        deliveries = {o: (old.deliveries.get(o, 0) if old else 0) + 1 for o in offsets}
        self.batches[key] = OrderBatch(pop_time, invisible_until, list(offsets), next_offset,
                                       set(done), deliveries)

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
        if b.complete:
            del self.batches[key]
            return b.next_offset
        return None

    def change(self, key: OrderKey, pop_time: int, until: int, now: int) -> None:
        """Hide the batch popped at ``pop_time`` until ``until``."""
        self._batch(key, pop_time, now).invisible_until = until

    def forget(self, key: OrderKey) -> None:
        self.batches.pop(key, None)
