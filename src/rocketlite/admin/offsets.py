"""Moving a group's offsets: ``resetOffsetByTime`` and ``skipAccumulatedMessage``.

Each master of the topic's route gets INVOKE_BROKER_TO_RESET_OFFSET (222): the broker commits, per
queue, the offset of the first message stored at or after the time (``-1``: the queue's max
offset, i.e. skip everything accumulated) and pushes the new offsets to the group's online members
(RESET_CONSUMER_CLIENT_OFFSET, 220), which resume from them; so the reset works while the group
consumes. Forced (mqadmin's default): offsets move forward as well as back. The offsets answered
are what each queue now holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rocketlite.admin.errors import AdminError
from rocketlite.admin.groups import check_group
from rocketlite.admin.session import AdminSession, decode, route_masters
from rocketlite.protocol.admin_bodies import ResetOffsetBody
from rocketlite.protocol.admin_headers import ResetOffsetRequestHeader
from rocketlite.protocol.codes import RequestCode

SKIP_TO_END = -1
"""The timestamp that means each queue's max offset (mqadmin ``skipAccumulatedMessage``)."""


@dataclasses.dataclass(slots=True)
class QueueReset:
    """A queue's offset after the reset."""

    broker_name: str
    queue_id: int
    offset: int


async def reset_offset_by_time(
    session: AdminSession, group: str, topic: str, timestamp: int, *, force: bool = True,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> list[QueueReset]:
    """Reset ``group``'s offsets on ``topic`` to ``timestamp`` (ms; -1: the end) on every master
    of the topic; the new offset of each queue, by broker and queue. ``on_total`` is told the
    number of queues first (the route's read queues), ``on_progress`` a broker's count as each
    broker is done (for a progress bar: one request resets all the queues of a broker)."""
    check_group(group)
    if timestamp < SKIP_TO_END:
        raise AdminError(f"timestamp {timestamp} is negative (only -1, the end, is)")
    route = await session.route(topic)
    masters = route_masters(route)
    if not masters:
        raise AdminError(f"topic {topic!r} has no master broker in its route")
    queues = {qd.brokerName: qd.readQueueNums for qd in route.queueDatas}
    if on_total is not None:
        on_total(sum(queues.get(name, 0) for name in masters))
    header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, isForce=force)
    out: list[QueueReset] = []
    for name, addr in masters.items():
        reply = await session.call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        body = decode(ResetOffsetBody, reply, addr, "reset offset table")
        out.extend(QueueReset(mq.brokerName, mq.queueId, o) for mq, o in body.offsetTable.items())
        if on_progress is not None:
            on_progress(queues.get(name, 0))
    return sorted(out, key=lambda r: (r.broker_name, r.queue_id))


async def skip_accumulated(session: AdminSession, group: str, topic: str, *,
                           on_total: Callable[[int], None] | None = None,
                           on_progress: Callable[[int], None] | None = None) -> list[QueueReset]:
    """Move ``group``'s offsets on ``topic`` to the end of each queue (nothing left to consume)."""
    return await reset_offset_by_time(session, group, topic, SKIP_TO_END, force=True,
                                      on_total=on_total, on_progress=on_progress)
