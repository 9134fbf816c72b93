"""Reading a range of queues: ``printMsg`` (every message of a topic's queues, or of one broker or
queue, stored between two times) and ``consumeMessage`` (up to a count of messages from an offset
or a time), by PULL_MESSAGE under the tools group, committing nothing: what they read stays
unread for every consumer group.

The range of each queue is found first (GET_MIN_OFFSET / GET_MAX_OFFSET, or
SEARCH_OFFSET_BY_TIMESTAMP for a begin time), so a caller can show progress over the total;
messages stored after the end time are left out, and a queue is read no further once one is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rocketlite.admin.errors import AdminError
from rocketlite.admin.messages import TOOLS_GROUP, MessageView, pull
from rocketlite.admin.session import AdminSession, broker_addr
from rocketlite.client.route import is_readable
from rocketlite.protocol.bodies import TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.headers import (
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    Header,
    SearchOffsetRequestHeader,
)

Progress = Callable[[int], None]
"""Called with the number of queue offsets just read (or skipped): the progress over the total
of the ranges."""
PULL_BATCH = 32
DEFAULT_CONSUME_COUNT = 128


@dataclasses.dataclass(slots=True)
class QueueRange:
    """Offsets [begin, end) of one queue."""

    broker_name: str
    queue_id: int
    address: str
    begin: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.begin)


def _queues(route: TopicRouteData, topic: str, broker_name: str | None,
            queue_id: int | None) -> list[tuple[str, int]]:
    """(broker, queue id) of each readable queue of the route, narrowed to the ones asked."""
    out = sorted((qd.brokerName, q) for qd in route.queueDatas if is_readable(qd.perm)
                 for q in range(qd.readQueueNums))
    if broker_name is not None:
        names = {b for b, _ in out}
        if broker_name not in names:
            raise AdminError(f"topic {topic!r} has no readable queue on broker {broker_name!r} "
                             f"(brokers: {', '.join(sorted(names)) or 'none'})")
        out = [(b, q) for b, q in out if b == broker_name]
    if queue_id is not None:
        kept = [(b, q) for b, q in out if q == queue_id]
        if not kept:
            raise AdminError(f"topic {topic!r} has no queue {queue_id}"
                             + (f" on broker {broker_name!r}" if broker_name else ""))
        out = kept
    return out


async def _offset(session: AdminSession, addr: str, code: RequestCode, header: Header) -> int:
    reply = await session.call(addr, code, header)
    try:
        return int(reply.ext_fields["offset"])
    except (KeyError, ValueError):
        raise AdminError(f"broker {addr} answered {code.name} without an offset") from None


async def queue_ranges(session: AdminSession, topic: str, *, broker_name: str | None = None,
                       queue_id: int | None = None, begin_ms: int | None = None,
                       begin_offset: int | None = None) -> list[QueueRange]:
    """The range of each queue asked: from ``begin_offset``, else the first message stored at or
    after ``begin_ms``, else the queue's first; to its end."""
    route = await session.route(topic)
    out = []
    for name, q in _queues(route, topic, broker_name, queue_id):
        addr = broker_addr(route, name, master=False)
        lo = await _offset(session, addr, RequestCode.GET_MIN_OFFSET,
                           GetMinOffsetRequestHeader(topic=topic, queueId=q))
        hi = await _offset(session, addr, RequestCode.GET_MAX_OFFSET,
                           GetMaxOffsetRequestHeader(topic=topic, queueId=q))
        begin = lo
        if begin_offset is not None:
            begin = max(lo, begin_offset)
        elif begin_ms is not None:
            begin = await _offset(session, addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                  SearchOffsetRequestHeader(topic=topic, queueId=q,
                                                            timestamp=begin_ms))
        out.append(QueueRange(name, q, addr, max(lo, min(begin, hi)), hi))
    return out


async def read_range(session: AdminSession, topic: str, r: QueueRange, *, end_ms: int | None,
                     limit: int | None, group: str = TOOLS_GROUP,
                     on_progress: Progress | None = None) -> list[MessageView]:
    """The messages of ``r`` (at most ``limit``, none stored after ``end_ms``)."""
    out: list[MessageView] = []
    offset = r.begin
    while offset < r.end and (limit is None or len(out) < limit):
        got = await pull(session, r.address, topic, r.broker_name, r.queue_id, offset,
                         PULL_BATCH, group)
        if got.code != ResponseCode.SUCCESS or got.next_begin_offset <= offset:
            if got.code == ResponseCode.PULL_OFFSET_MOVED and got.next_begin_offset > offset:
                offset = got.next_begin_offset  # expired under us: go on from the new start
                continue
            break
        stop = False
        for m in got.messages:
            if end_ms is not None and m.store_timestamp > end_ms:
                stop = True
                break
            if m.queue_offset >= r.begin and (limit is None or len(out) < limit):
                out.append(m)
        step = min(got.next_begin_offset, r.end) - offset
        if on_progress is not None:
            on_progress(max(0, step))
        offset = got.next_begin_offset
        if stop:
            break
    if on_progress is not None and offset < r.end:
        on_progress(r.end - offset)  # the rest of the range, not read
    return out


async def print_msg(session: AdminSession, topic: str, *, broker_name: str | None = None,
                    queue_id: int | None = None, begin_ms: int | None = None,
                    end_ms: int | None = None, limit: int | None = None,
                    on_total: Callable[[int], None] | None = None,
                    on_progress: Progress | None = None) -> list[MessageView]:
    """Every message of the queues asked stored in [begin_ms, end_ms] (at most ``limit``), in
    queue order; ``on_total`` hears the number of offsets to read before the first pull."""
    ranges = await queue_ranges(session, topic, broker_name=broker_name, queue_id=queue_id,
                                begin_ms=begin_ms)
    if on_total is not None:
        on_total(sum(r.size for r in ranges))
    out: list[MessageView] = []
    for r in ranges:
        left = None if limit is None else limit - len(out)
        if left == 0:
            if on_progress is not None:
                on_progress(r.size)
            continue
        out += await read_range(session, topic, r, end_ms=end_ms, limit=left,
                                on_progress=on_progress)
    return out


async def consume_message(session: AdminSession, topic: str, *, broker_name: str | None = None,
                          queue_id: int | None = None, offset: int | None = None,
                          begin_ms: int | None = None, end_ms: int | None = None,
                          count: int = DEFAULT_CONSUME_COUNT,
                          group: str = TOOLS_GROUP) -> list[MessageView]:
    """Up to ``count`` messages of the queues asked, from ``offset`` (one queue: needs
    ``broker_name`` and ``queue_id``, as mqadmin's ``consumeMessage -o``) or ``begin_ms``, pulled
    as ``group`` without committing."""
    if count < 1:
        raise AdminError(f"count {count} is not at least 1")
    if offset is not None and (broker_name is None or queue_id is None):
        raise AdminError("an offset needs a broker name and a queue id")
    ranges = await queue_ranges(session, topic, broker_name=broker_name, queue_id=queue_id,
                                begin_ms=begin_ms, begin_offset=offset)
    out: list[MessageView] = []
    for r in ranges:
        if len(out) >= count:
            break
        out += await read_range(session, topic, r, end_ms=end_ms, limit=count - len(out),
                                group=group)
    return out
