"""Reading a batch of messages from one (topic, queue): RocketMQ's ``getMessage`` and its statuses.

Statuses (``GetMessageStatus``) and how ``next_begin_offset`` is chosen:

=======================  =========================================================
NO_MATCHED_LOGIC_QUEUE   the queue does not exist; next = 0
NO_MESSAGE_IN_QUEUE      the queue is empty; next = 0
OFFSET_TOO_SMALL         offset below the minimum; next = min
OFFSET_OVERFLOW_ONE      offset == max (nothing new yet); next = offset
OFFSET_OVERFLOW_BADLY    offset > max; next = max (min if min is 0)
FOUND                    at least one message; next = after the last unit scanned
NO_MATCHED_MESSAGE       units scanned, none passed the tag filter
MESSAGE_WAS_REMOVING     units point at CommitLog bytes already deleted
OFFSET_FOUND_NULL        no unit could be read at the offset
=======================  =========================================================
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from rocketlite.formats.consume_queue_unit import CQ_UNIT_SIZE
from rocketlite.store.commitlog import CommitLog
from rocketlite.store.consume_queue import ConsumeQueue

MAX_FILTER_SCAN_BYTES = 16_000  # RocketMQ's maxFilterMessageCount, in ConsumeQueue bytes
FILTER_CHUNK_UNITS = 256  # units read at a time once a tag filter or a deleted head skips some


class GetMessageStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[bytes] = field(default_factory=list)  # raw CommitLog records
    queue_offsets: list[int] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(len(m) for m in self.messages)


def _out_of_range(cq: ConsumeQueue, offset: int) -> GetMessageResult | None:
    st = GetMessageStatus
    lo, hi = cq.min_offset, cq.max_offset
    if hi == 0:
        return GetMessageResult(st.NO_MESSAGE_IN_QUEUE, 0, lo, hi)
    if offset < lo:
        return GetMessageResult(st.OFFSET_TOO_SMALL, lo, lo, hi)
    if offset == hi:
        return GetMessageResult(st.OFFSET_OVERFLOW_ONE, offset, lo, hi)
    if offset > hi:
        return GetMessageResult(st.OFFSET_OVERFLOW_BADLY, lo if lo == 0 else hi, lo, hi)
    return None


class _SegmentReader:
    """Reads records of one pull, keeping the segment the last one came from: the records of a
    queue are mostly in one segment, so most reads are one bounds check and one slice."""

    __slots__ = ("base", "cl", "end", "mm")

    def __init__(self, cl: CommitLog) -> None:
        self.cl = cl
        self.base, self.end = 0, -1
        self.mm: mmap.mmap | bytes = b""

    def read(self, phys: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``phys``, or None if that range is gone or not yet readable
        (``CommitLog.read``)."""
        rel = phys - self.base
        if rel < 0 or rel + size > self.end:
            mf = self.cl.files.find(phys)
            if mf is None:
                return None
            self.base, self.end, self.mm = mf.file_from_offset, mf.committed, mf.mm
            rel = phys - self.base
            if rel + size > self.end:
                return None
        return self.mm[rel : rel + size]


def get_message(
    cl: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_count: int,
    max_bytes: int,
    tag_filter: Callable[[int], bool] | None = None,
) -> GetMessageResult:
    st = GetMessageStatus
    if cq is None:
        return GetMessageResult(st.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
    early = _out_of_range(cq, offset)
    if early is not None:
        return early
    lo, hi = cq.min_offset, cq.max_offset
    max_count = max(1, max_count)
    scan_max = max(MAX_FILTER_SCAN_BYTES, max_count * CQ_UNIT_SIZE) // CQ_UNIT_SIZE
    result = GetMessageResult(st.OFFSET_FOUND_NULL, offset, lo, hi)
    cl_min = cl.min_offset
    scanned = 0
    total = 0
    next_offset = offset
    removing = False
    filtered = False
    read = _SegmentReader(cl).read
    while scanned < scan_max and len(result.messages) < max_count and next_offset < hi:
        # Units in chunks: max_count of them while every unit is taken (unpacking the whole
        # scan window for a pull of 32 was most of its cost), wider once a filter skips some.
        want = max_count - len(result.messages)
        if filtered or removing:
            want = max(want, FILTER_CHUNK_UNITS)
        units = cq.get_units(next_offset, min(want, scan_max - scanned, hi - next_offset))
        if not units:
            break
        for phys, size, tag in units:
            if len(result.messages) >= max_count:
                break
            if result.messages and total + size > max_bytes:
                scanned = scan_max
                break
            scanned += 1
            if phys < cl_min:
                removing = True
                next_offset += 1
                continue
            if tag_filter is not None and not tag_filter(tag):
                filtered = True
                next_offset += 1
                continue
            data = read(phys, size)
            if data is None:
                removing = True
                next_offset += 1
                continue
            result.messages.append(data)
            result.queue_offsets.append(next_offset)
            total += size
            next_offset += 1
    result.next_begin_offset = next_offset
    if result.messages:
        result.status = st.FOUND
    elif removing:
        result.status = st.MESSAGE_WAS_REMOVING
    elif filtered:
        result.status = st.NO_MATCHED_MESSAGE
    return result
