"""The ack side of ``PopService`` (its ``ack``, ``ack_many``, ``change_invisible`` and
``forward_to_dlq`` call these): receipt handle checks as RocketMQ's ``AckMessageProcessor``
makes them (topic, queue, offset within the queue, invisible time not over), ack records for the
revive topic (one ``bAck`` per CK for several acks), FIFO acks that commit a completed batch's
offset, a new CK for a change of invisible time, the move of a message to the DLQ."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_WRITE
from rocketlite.broker.pop import messages as pm
from rocketlite.broker.pop.errors import (
    BadPopRequest,
    InvalidReceiptHandle,
    NoPermission,
    PopError,
    ReceiptHandleExpired,
    TopicNotFound,
)
from rocketlite.broker.pop.records import AckMsg, PopCheckPoint
from rocketlite.protocol import pop_info
from rocketlite.protocol.pop_info import MAX_INVISIBLE_MS, ReceiptHandle

if TYPE_CHECKING:
    from rocketlite.broker.pop.service import PopService



def check_invisible(invisible_ms: int, minimum: int = 1) -> int:
    """An invisible time of a pop (1..``MAX_INVISIBLE_MS``) or a change (from 0: visible again
    at once, what a 5.x client without a retry policy asks after a failed consume; the Java
    proxy's minimum for ChangeInvisibleDuration is 0 too)."""
    if not minimum <= invisible_ms <= MAX_INVISIBLE_MS:
        raise BadPopRequest(f"invisibleTime {invisible_ms} ms: must be within "
                            f"{minimum}..{MAX_INVISIBLE_MS}")
    return invisible_ms


def parse_handle(text: str) -> ReceiptHandle:
    """``ReceiptHandle.parse`` with the broker's error: every handle a client sends is read
    here, so a malformed one is an ``InvalidReceiptHandle`` (a ``PopError``) saying why."""
    try:
        return ReceiptHandle.parse(text)
    except pop_info.InvalidReceiptHandle as e:
        raise InvalidReceiptHandle(str(e)) from e


def check_handle(svc: PopService, group: str, topic: str, receipt_handle: str,
                 ack_offset: int | None) -> tuple[ReceiptHandle, int, str]:
    """The parsed handle, the message's queue offset and the topic it was popped from, after
    RocketMQ's checks (``AckMessageProcessor``): the topic exists, the queue is one of its
    read queues, the offset lies in the queue."""
    h = parse_handle(receipt_handle)
    offset = ack_offset if ack_offset is not None else h.msg_queue_offset
    if offset is None:
        raise InvalidReceiptHandle("the receipt handle has no message offset and the ack "
                                   "names none")
    if h.broker_name != svc.config.broker_name:
        raise InvalidReceiptHandle(f"the receipt handle is of broker {h.broker_name!r}, "
                                   f"this is {svc.config.broker_name!r}")
    if not h.is_order and h.revive_qid >= svc.config.revive_queue_num:
        raise InvalidReceiptHandle(f"the receipt handle's reviveQid {h.revive_qid} is not "
                                   f"below reviveQueueNum {svc.config.revive_queue_num}")
    real = h.real_topic(topic, group)
    tc = svc.broker.topics.get(real)
    if tc is None:
        raise TopicNotFound(f"topic[{real}] not exist, apply first please!")
    if h.queue_id >= tc.readQueueNums:
        raise InvalidReceiptHandle(f"queueId[{h.queue_id}] is illegal, topic:[{real}] "
                                   f"topicConfig.readQueueNums:[{tc.readQueueNums}]")
    lo = svc.store.min_offset_in_queue(real, h.queue_id)
    hi = svc.store.max_offset_in_queue(real, h.queue_id)
    if not lo <= offset <= hi:
        raise ReceiptHandleExpired(f"offset is illegal, key:{real}@{h.queue_id}, "
                                   f"commit:{offset}, store:{lo}~{hi}")
    return h, offset, real


def ack_many(svc: PopService, group: str, topic: str, receipt_handles: Iterable[str],
             ack_offsets: Iterable[int | None] | None = None, raise_first: bool = False
             ) -> list[PopError | None]:
    """Ack several messages with one store append (the acks of one CK as one ``bAck``
    record); per handle None or the error that refused it."""
    handles = list(receipt_handles)
    offs = list(ack_offsets) if ack_offsets is not None else [None] * len(handles)
    now = svc.clock()
    results: list[PopError | None] = []
    batches: dict[tuple[str, int, int, int, int], list[int]] = {}
    for text, off in zip(handles, offs, strict=True):
        try:
            h, offset, real = check_handle(svc, group, topic, text, off)
            if h.is_order:
                _fifo_ack(svc, group, real, h, offset, now)
            else:
                if now >= h.revive_time:
                    raise ReceiptHandleExpired(
                        f"the receipt handle's invisible time ended at {h.revive_time} "
                        f"(now {now}): the message is being revived")
                batches.setdefault((real, h.queue_id, h.ck_queue_offset, h.pop_time,
                                    h.revive_qid), []).append(offset)
            results.append(None)
        except PopError as e:
            if raise_first:
                raise
            results.append(e)
    writes = []
    for (real, q, so, pt, rq), acked in batches.items():
        ack = AckMsg(acked[0], so, group, real, q, pt, svc.config.broker_name,
                     tuple(acked) if len(acked) > 1 else ())
        writes.append(pm.ack_message(svc.revive_topic, rq, ack, now))
    if writes:
        svc.store.put_messages(writes)
    return results


def _fifo_ack(svc: PopService, group: str, real: str, h: ReceiptHandle, offset: int, now: int) -> None:
    key = (group, real, h.queue_id)
    nxt = svc.fifo.ack(key, h.pop_time, offset, now)
    if nxt is not None:
        svc.broker.offsets.commit(group, real, h.queue_id, nxt)
        svc.fifo_batch_done(key)


def change_invisible(svc: PopService, group: str, topic: str, receipt_handle: str,
                     invisible_ms: int) -> str:
    """Hide the message ``invisible_ms`` from now; returns its new handle. The old handle is
    acked (RocketMQ writes the new CK first, then the ack)."""
    check_invisible(invisible_ms, minimum=0)
    h, offset, real = check_handle(svc, group, topic, receipt_handle, None)
    now = svc.clock()
    if h.is_order:
        key = (group, real, h.queue_id)
        svc.fifo.change(key, h.pop_time, now + invisible_ms, now)
        svc.fifo_wake_at(key, real, now + invisible_ms)
        return ReceiptHandle(h.ck_queue_offset, h.pop_time, now + invisible_ms - h.pop_time,
                             h.revive_qid, h.retry, h.broker_name, h.queue_id,
                             offset).encode()
    if now >= h.revive_time:
        raise ReceiptHandleExpired(f"the receipt handle's invisible time ended at "
                                   f"{h.revive_time} (now {now}): cannot change it")
    rq = svc.next_revive_qid()
    ck = PopCheckPoint(start_offset=offset, pop_time=now, invisible_time=invisible_ms, num=1,
                       queue_id=h.queue_id, topic=real, cid=group,
                       broker_name=svc.config.broker_name)
    ack = AckMsg(offset, h.ck_queue_offset, group, real, h.queue_id, h.pop_time,
                 svc.config.broker_name)
    svc.store.put_messages((pm.ck_message(svc.revive_topic, rq, ck),
                            pm.ack_message(svc.revive_topic, h.revive_qid, ack, now)))
    return ReceiptHandle(offset, now, invisible_ms, rq, h.retry, h.broker_name, h.queue_id,
                         offset).encode()


async def forward_to_dlq(svc: PopService, group: str, topic: str, receipt_handle: str,
                         max_delivery_attempts: int) -> None:
    """Move a popped message to ``%DLQ%{group}`` and ack it (the gRPC front's
    ForwardMessageToDeadLetterQueue, after ``max_delivery_attempts`` failed deliveries)."""
    if max_delivery_attempts <= 0:
        raise BadPopRequest(f"maxDeliveryAttempts {max_delivery_attempts}: must be positive")
    if not svc.config.broker_permission & PERM_WRITE:
        raise NoPermission(f"the broker[{svc.config.broker_name}] sending message is "
                           "forbidden")
    h, offset, real = check_handle(svc, group, topic, receipt_handle, None)
    now = svc.clock()
    if now >= h.revive_time and not h.is_order:
        raise ReceiptHandleExpired(f"the receipt handle's invisible time ended at "
                                   f"{h.revive_time} (now {now})")
    rec = pm.read_one(svc.store, real, h.queue_id, offset)
    if rec is None:
        raise ReceiptHandleExpired(f"no message at {real}:{h.queue_id}@{offset} any more")
    # the ack first: an expired FIFO handle raises here, before anything is written
    ack_many(svc, group, topic, [receipt_handle], raise_first=True)
    svc.put_dead_letter(group, real, rec)
