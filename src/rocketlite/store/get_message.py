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

import logging
import mmap
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from rocketlite.common import native
from rocketlite.formats.consume_queue_unit import CQ_UNIT_SIZE
from rocketlite.formats.message_record import unit_mismatch
from rocketlite.formats.record_scan import records_match_units, unit_record_ok
from rocketlite.store.commitlog import CommitLog
from rocketlite.store.consume_queue import ConsumeQueue

log = logging.getLogger(__name__)

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
    """``body``: the raw CommitLog records found, back to back (a pull reply's body as is);
    ``sizes`` and ``queue_offsets``: each record's length and queue offset, in order."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes = b""
    sizes: list[int] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.sizes)

    @property
    def size(self) -> int:
        return len(self.body)

    @property
    def messages(self) -> list[bytes]:
        """The records one by one (a copy each: for callers that look at single records)."""
        out, pos, body = [], 0, self.body
        for n in self.sizes:
            out.append(body[pos : pos + n])
            pos += n
        return out


Segment = memoryview | mmap.mmap | bytes


def _gather_py(segment: Segment, spans: list[int]) -> bytes:
    """The byte ranges ``spans`` (flat ``[start, size, ...]``) of ``segment``, back to back."""
    view = memoryview(segment)
    limit = len(view)
    if len(spans) % 2:
        raise ValueError("spans must be start, size pairs")
    parts = []
    for i in range(0, len(spans), 2):
        start, size = spans[i], spans[i + 1]
        if start < 0 or size < 0 or start > limit - size:
            raise ValueError(f"span {start}+{size} is outside a {limit}-byte segment")
        parts.append(view[start : start + size])
    out = b"".join(parts)
    view.release()
    return out


_c = native.load("rocketlite.store._gather_c")
gather: Callable[[Segment, list[int]], bytes] = _c.gather if _c is not None else _gather_py


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
    """Collects the records of one pull, keeping the segment the last one came from: the records
    of a queue are mostly in one segment, so most reads are one bounds check and two appends;
    the bytes are copied once, segment by segment, by ``gather``.

    No record that does not match its ConsumeQueue unit is served (``unit_mismatch``: a damaged
    unit or record). ``read`` takes records on trust and each segment's run of them is checked in
    one call (``records_match_units``) before it is copied; a run with a record that does not match
    marks the reader ``damaged``, and ``get_message`` reads again with ``read_checked``, which
    checks record by record, skipping and logging those. Damage is rare: the common pull pays the
    check per segment run, not a Python call per record.

    The reader holds a memoryview of each segment it reads until ``release``: retention closing
    that segment meanwhile leaves the mapping alive for it (``MappedFile.close`` lets a holder's
    view outlive the close), so the records found are still there when they are copied."""

    __slots__ = ("base", "chunks", "cl", "damaged", "end", "queue_id", "queue_offsets", "spans",
                 "taken", "topic", "verify", "view", "views")

    def __init__(self, cl: CommitLog, cq: ConsumeQueue, queue_offsets: list[int],
                 verify: bool) -> None:
        self.cl = cl
        self.topic = cq.topic.encode()
        self.queue_id = cq.queue_id
        self.base, self.end = 0, -1
        self.view = memoryview(b"")
        self.views: list[memoryview] = []
        self.spans: list[int] = []  # start, size within ``view``
        self.chunks: list[bytes] = []  # what earlier segments gave
        self.queue_offsets = queue_offsets  # of every record taken, filled by the caller
        self.taken = 0  # records in ``chunks``
        self.verify = verify  # check each run in ``_cut`` (``read``'s records)
        self.damaged = False

    def read(self, phys: int, size: int, queue_offset: int) -> bool:
        """Take the ``size`` bytes at ``phys``, the record of ``queue_offset`` (which the caller
        appends to ``queue_offsets`` when this says True); False if that range is gone or not yet
        readable (``CommitLog.read``). Whether it is that record is checked with its run."""
        rel = phys - self.base
        if rel < 0 or rel + size > self.end:
            if not self._enter(phys):
                return False
            rel = phys - self.base
            if rel + size > self.end:
                return False
        self.spans += (rel, size)
        return True

    def read_checked(self, phys: int, size: int, queue_offset: int) -> bool:
        """``read``, checking the record at once: False also when the range holds no such record
        (a damaged unit or record: logged, and never served)."""
        if not self.read(phys, size, queue_offset):
            return False
        rel = phys - self.base
        view, qid, topic = self.view, self.queue_id, self.topic
        if not unit_record_ok(view, rel, size, phys, qid, queue_offset, topic) and (
                why := unit_mismatch(view, rel, size, phys, qid, queue_offset, topic)) is not None:
            log.error("not serving %s queue %d offset %d (CommitLog offset %d, %d bytes): %s",
                      self.topic.decode(errors="replace"), self.queue_id, queue_offset, phys,
                      size, why)
            del self.spans[-2:]
            return False
        return True

    def _enter(self, phys: int) -> bool:
        """Make the segment holding ``phys`` the current one; False if there is none."""
        mf = self.cl.files.find(phys)
        if mf is None:
            return False
        try:
            view = memoryview(mf.mm)
        except ValueError:  # closed by retention since ``find``
            return False
        self._cut()
        self.views.append(view)
        self.base, self.end, self.view = mf.file_from_offset, mf.committed, view
        return True

    def _run_matches(self) -> bool:
        """Whether every record of the current run is the one its unit says: what
        ``records_match_units`` refuses is walked by ``unit_mismatch`` (another record shape it
        accepts, or damage)."""
        view, spans, base, qos, first = self.view, self.spans, self.base, self.queue_offsets, \
            self.taken
        qid, topic = self.queue_id, self.topic
        k = records_match_units(view, spans, base, qos, first, qid, topic, 0)
        while k >= 0:
            rel = spans[2 * k]
            if unit_mismatch(view, rel, spans[2 * k + 1], base + rel, qid, qos[first + k],
                             topic) is not None:
                return False
            k = records_match_units(view, spans, base, qos, first, qid, topic, k + 1)
        return True

    def _cut(self) -> None:
        spans = self.spans
        if spans:
            if self.verify and not self.damaged and not self._run_matches():
                self.damaged = True
            self.chunks.append(gather(self.view, spans))
            self.taken += len(spans) >> 1
            self.spans = []

    def body(self) -> bytes:
        self._cut()
        chunks = self.chunks
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def release(self) -> None:
        for view in self.views:
            view.release()
        self.views.clear()
        self.view = memoryview(b"")

    def finish(self) -> bytes:
        """The records taken, back to back (empty for none); the views are released."""
        try:
            return self.body()
        finally:
            self.release()


def get_message(
    cl: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_count: int,
    max_bytes: int,
    tag_filter: Callable[[int], bool] | None = None,
) -> GetMessageResult:
    """Up to ``max_count`` records (``max_bytes`` at most, beyond the first) of ``cq`` from
    ``offset``, those ``tag_filter`` refuses skipped; never a record that does not match its unit.
    The records are checked run by run; a pull that met a damaged one is read again record by
    record, which skips exactly those (see ``_SegmentReader``)."""
    if cq is None:
        return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
    early = _out_of_range(cq, offset)
    if early is not None:
        return early
    found = _collect(cl, cq, offset, max_count, max_bytes, tag_filter, False)
    if found is None:
        found = _collect(cl, cq, offset, max_count, max_bytes, tag_filter, True)
    assert found is not None  # a checked read never finds damage it served
    return found


def _collect(cl: CommitLog, cq: ConsumeQueue, offset: int, max_count: int, max_bytes: int,
             tag_filter: Callable[[int], bool] | None, checked: bool) -> GetMessageResult | None:
    """``get_message``'s scan; with ``checked`` each record is checked as it is read, else each
    segment's run is checked as a whole, and None says a run held a record that is not its
    unit's (nothing is served then: the caller reads again, checked)."""
    st = GetMessageStatus
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
    sizes, queue_offsets = result.sizes, result.queue_offsets
    reader = _SegmentReader(cl, cq, queue_offsets, not checked)
    read = reader.read_checked if checked else reader.read
    while scanned < scan_max and len(sizes) < max_count and next_offset < hi:
        # Units in chunks: max_count of them while every unit is taken (unpacking the whole
        # scan window for a pull of 32 was most of its cost), wider once a filter skips some.
        want = max_count - len(sizes)
        if filtered or removing:
            want = max(want, FILTER_CHUNK_UNITS)
        units = cq.get_units(next_offset, min(want, scan_max - scanned, hi - next_offset))
        if not units:
            break
        for phys, size, tag in units:
            if len(sizes) >= max_count:
                break
            if sizes and total + size > max_bytes:
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
            if not read(phys, size, next_offset):
                removing = True
                next_offset += 1
                continue
            sizes.append(size)
            queue_offsets.append(next_offset)
            total += size
            next_offset += 1
    result.next_begin_offset = next_offset
    result.body = reader.finish()
    if reader.damaged:
        return None
    if sizes:
        result.status = st.FOUND
    elif removing:
        result.status = st.MESSAGE_WAS_REMOVING
    elif filtered:
        result.status = st.NO_MATCHED_MESSAGE
    return result
