"""CommitLog: every topic's messages appended, in arrival order, to one log of segments (S2, S3).

``append`` validates a whole batch first (so a bad message rejects the batch and writes nothing),
then encodes the records of each segment with their final queue offsets, CommitLog offsets and
store timestamp in one call (``record_encode.encode_singles``, compiled), and copies them into the
mapped segment with one slice assignment per segment. A record never straddles segments: when it
does not fit (keeping 8 bytes for the BLANK record), the segment is closed with a BLANK record and
the next one, pre-allocated by the ``Allocator``, takes over. Before anything is written, an append
that will roll makes sure the segments it rolls into exist (``MappedFileQueue.reserve``): on a full
disk it fails whole, with ``DiskFullError``, instead of leaving half a batch behind.

Queue offsets come from ``topic_queue_table`` (next offset per (topic, queue)); transactional
PREPARED and ROLLBACK records take no queue offset (they never reach a ConsumeQueue).
"""

from __future__ import annotations

import ipaddress
import re
import struct
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat
from operator import add

from rocketlite.common.errors import (
    CorruptRecordError,
    MessageIllegalError,
    MessageTooLargeError,
    StoreError,
)
from rocketlite.formats import message_record as rec
from rocketlite.formats.properties import nul_error
from rocketlite.formats.record_batch import encode_batch
from rocketlite.formats.record_encode import check_singles, encode_singles, give_back
from rocketlite.store.config import StoreConfig
from rocketlite.store.mapped_file import MappedFile
from rocketlite.store.mapped_file_queue import Allocator, MappedFileQueue
from rocketlite.store.message import (
    AppendResult,
    BatchAppendResult,
    DispatchHint,
    MessageBatch,
    MessageToStore,
)

TOPIC_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+", re.ASCII)  # fullmatch: "$" would allow a "\n"
TOPIC_MAX_BYTES = 1024
QUEUE_ID_MAX = 65535
DISPATCH_HINTS_MAX = 4096


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_properties(props: bytes, prefix: str = "") -> None:
    """Refuse what the store cannot keep in properties (a NUL byte). Raises MessageIllegalError."""
    err = nul_error(props)
    if err is not None:
        raise MessageIllegalError(prefix + err)


class CommitLog:
    def __init__(
        self,
        config: StoreConfig,
        allocator: Allocator | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.config = config
        self.files = MappedFileQueue(
            config.commit_log_dir, config.mapped_file_size_commit_log, allocator
        )
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.last_store_timestamp = 0
        # transientStorePoolEnable: appends stay in memory until the flush thread commits them.
        self.write_buffered = config.transient_store_pool_enable
        self.lock = threading.Lock()
        self.clock = clock
        self.store_host = _ip_bytes(config.broker_ip1)
        self.store_port = config.listen_port
        self._host_flag = rec.SYSFLAG_STOREHOST_V6 if len(self.store_host) == 16 else 0
        self._topics: dict[str, bytes] = {}
        # Appended by batch appends (under ``lock``), popped by the dispatcher only; bounded by
        # a length check, never by eviction, so the dispatcher can peek at the head safely.
        # Single-message appends leave none: the dispatcher's compiled plan parses their records
        # (cheaper than describing each one here and walking the description in Python).
        self.dispatch_hints: deque[DispatchHint] = deque()
        # Records must leave room for the BLANK record that closes a segment.
        self.max_record_size = config.mapped_file_size_commit_log - rec.END_FILE_MIN_BLANK_LENGTH

    # -- offsets -----------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    @property
    def committed_offset(self) -> int:
        return self.files.committed_offset

    @property
    def flushed_offset(self) -> int:
        return self.files.flushed_offset

    # -- validation --------------------------------------------------------------------------

    def topic_bytes(self, topic: str) -> bytes:
        tb = self._topics.get(topic)
        if tb is None:
            if not topic:
                raise MessageIllegalError("the topic is empty")
            tb = topic.encode()
            if len(tb) > TOPIC_MAX_BYTES:
                raise MessageIllegalError(
                    f"topic is {len(tb)} bytes, longer than the limit {TOPIC_MAX_BYTES}"
                )
            if not TOPIC_PATTERN.fullmatch(topic):
                raise MessageIllegalError(
                    f"topic {topic!r} has illegal characters: allowed are letters, digits, %|_-"
                )
            if len(self._topics) < 100_000:
                self._topics[topic] = tb
        return tb

    def _check_message(
        self, topic: str, body_len: int, props_len: int, queue_id: int, born_host: bytes,
        sys_flag: int,
    ) -> tuple[bytes, int]:
        """Validate one message's shape (a batch passes its largest body and properties);
        return the topic's bytes and the record size. Raises MessageIllegalError."""
        tb = self.topic_bytes(topic)
        if body_len > self.config.max_message_size:
            raise MessageTooLargeError(
                f"message body is {body_len} bytes, larger than maxMessageSize "
                f"{self.config.max_message_size}"
            )
        if props_len > 32767:
            raise MessageIllegalError(f"properties are {props_len} bytes, the limit is 32767")
        if not 0 <= queue_id <= QUEUE_ID_MAX:
            raise MessageIllegalError(f"queue id {queue_id} is out of range 0..{QUEUE_ID_MAX}")
        if len(born_host) not in (4, 16):
            raise MessageIllegalError(f"born host has {len(born_host)} bytes, expected 4 or 16")
        v6 = rec.SYSFLAG_BORNHOST_V6 if len(born_host) == 16 else 0
        size = rec.record_size(body_len, len(tb), props_len, sys_flag | v6 | self._host_flag)
        if size > self.max_record_size:
            raise MessageIllegalError(
                f"record of {size} bytes does not fit a CommitLog segment of "
                f"{self.config.mapped_file_size_commit_log} bytes"
            )
        return tb, size

    def _check(self, m: MessageToStore, props: bytes) -> int:
        _check_properties(props)
        return self._check_message(m.topic, len(m.body), len(props), m.queue_id, m.born_host, 0)[1]

    # -- appending ---------------------------------------------------------------------------

    def _prepare(self, msgs: Sequence[MessageToStore]) -> int:
        """Validate and size every message before anything is written (outside the lock); return
        the sum of their record sizes. ``check_singles`` passes the plain ones in one call; the
        one it stops at gets the full check here (raises with the reason, or accepts an IPv6
        born host or a new topic), then it goes on after it."""
        topics = self._topics
        max_body = self.config.max_message_size
        host_flag = self._host_flag
        n = len(msgs)
        stop, total = check_singles(msgs, 0, topics, max_body, self.max_record_size, host_flag)
        while stop < n:
            total += self._check_one(msgs[stop])
            stop, more = check_singles(msgs, stop + 1, topics, max_body, self.max_record_size,
                                       host_flag)
            total += more
        return total

    def _check_one(self, m: MessageToStore) -> int:
        """The full check of one message; its record size. Raises MessageIllegalError, or what
        encoding it would raise (a field out of range), before anything is written."""
        props = m.properties.encode() if m.properties else b""
        self._check(m, props)
        tb = self.topic_bytes(m.topic)
        sys_flag = m.sys_flag | self._host_flag
        if len(m.born_host) == 16:
            sys_flag |= rec.SYSFLAG_BORNHOST_V6
        st = rec.record_struct(sys_flag, len(m.body), len(tb), len(props))
        if st.size > self.max_record_size:
            self._check(m, props)
        st.pack(st.size, 0, 0, m.queue_id, m.flag, 0, 0, sys_flag, m.born_timestamp, m.born_host,
                m.born_port, 0, self.store_host, self.store_port, m.reconsume_times,
                m.prepared_transaction_offset, len(m.body), m.body, len(tb), tb, len(props), props)
        return st.size

    def _sizes(self, msgs: Sequence[MessageToStore]) -> list[int]:
        """The record size of each (validated) message: for ``_reserve``, when an append rolls."""
        host_flag = self._host_flag
        return [
            rec.record_size(len(m.body), len(self.topic_bytes(m.topic)),
                            len(m.properties.encode()) if m.properties else 0,
                            m.sys_flag | host_flag
                            | (rec.SYSFLAG_BORNHOST_V6 if len(m.born_host) == 16 else 0))
            for m in msgs
        ]

    def append(self, msgs: Sequence[MessageToStore]) -> list[AppendResult]:
        """Append a batch; all or nothing on validation, in order, under the CommitLog lock.
        Per segment, one ``encode_singles`` call (the records, their queue offsets and results)
        and one write."""
        total = self._prepare(msgs)
        n = len(msgs)
        results: list[AppendResult] = []
        with self.lock:
            table = self.topic_queue_table
            now = self.clock()
            mf = self.files.next_file(0)
            free = mf.file_size - mf.wrote - rec.END_FILE_MIN_BLANK_LENGTH
            if total > free:
                self._reserve(self._sizes(msgs), free)
            done = 0
            while True:
                mf.write_buffered = self.write_buffered
                start = mf.wrote
                data, stop, part = encode_singles(
                    msgs, done, table, mf.file_from_offset + start,
                    mf.file_size - start - rec.END_FILE_MIN_BLANK_LENGTH, now, self.store_host,
                    self.store_port, self._host_flag, AppendResult,
                )
                if data:
                    try:
                        mf.append(data)
                    except StoreError:  # nothing written: give back the queue offsets taken
                        give_back(msgs, done, stop, table)
                        raise
                results += part
                done = stop
                if done >= n:
                    break
                self._close_segment(mf)
                mf = self.files.next_file()
            self.last_store_timestamp = now
        return results

    def _reserve(self, sizes: list[int], free: int) -> None:
        """Before an append writes anything: create every segment it will roll into."""
        room = self.config.mapped_file_size_commit_log - rec.END_FILE_MIN_BLANK_LENGTH
        rolls = 0
        for size in sizes:
            if size > free:
                rolls += 1
                free = room
            free -= size
        self.files.reserve(rolls)

    def _check_batch(self, b: MessageBatch, blens: list[int], plens: list[int],
                     one_props: bool) -> bytes:
        """Validate a batch (``one_props``: every message has ``b.properties[0]``); return the
        topic's bytes. Raises MessageIllegalError."""
        n = len(blens)
        if not n or len(plens) != n or (b.flags is not None and len(b.flags) != n):
            raise MessageIllegalError(
                f"a batch needs one properties entry (and flag) per body: {n} bodies, "
                f"{len(plens)} properties, {'no' if b.flags is None else len(b.flags)} flags"
            )
        if b.sys_flag & rec.SYSFLAG_TRANSACTION_MASK:
            raise MessageIllegalError("a batch cannot carry transactional messages")
        props = b.properties
        # one search (25x cheaper than one per entry), over the one string if they share it
        if b"\x00" in (props[0] if one_props else b"".join(props)):
            for i, p in enumerate(props):
                _check_properties(p, f"batch message {i}: ")
        return self._check_message(
            b.topic, blens[0] if blens.count(blens[0]) == n else max(blens),
            plens[0] if one_props else max(plens), b.queue_id, b.born_host, b.sys_flag
        )[0]

    def append_batch(self, b: MessageBatch) -> BatchAppendResult:
        """Append a batch of one topic and queue; all or nothing on validation.

        The per-message work is a few C-level passes (lengths, sizes, offsets) and, per segment,
        one ``record_batch.encode_batch`` call (CRCs, offsets, the records back to back, with
        the shared fields pre-packed) and one write. A batch of one shape (every body one
        length, every property string one length: the usual batch) has its sizes and offsets
        made arithmetically, and when all messages share one property string (``decode_batch``
        makes equal ones one object) its lengths are not taken one by one.
        """
        bodies, props = b.bodies, b.properties
        blens = list(map(len, bodies))
        n = len(blens)
        one_props = n > 0 and len(props) == n and props.count(props[0]) == n
        plens = [len(props[0])] * n if one_props else list(map(len, props))
        tb = self._check_batch(b, blens, plens, one_props)
        sys_flag = b.sys_flag | self._host_flag
        if len(b.born_host) == 16:
            sys_flag |= rec.SYSFLAG_BORNHOST_V6
        topic_block = rec.topic_block(tb)
        magic = struct.pack(">i", rec.magic_for(tb))
        born = (sys_flag, b.born_timestamp, b.born_host, b.born_port)
        mid_len = len(rec.batch_mid(*born, 0, self.store_host, self.store_port))
        fixed = rec.batch_struct(mid_len, 0, len(topic_block), 0).size
        size = 0  # the one record size of a batch of one shape, else 0
        if blens.count(blens[0]) == n and (one_props or plens.count(plens[0]) == n):
            size = fixed + blens[0] + plens[0]
            sizes = [size] * n
            left = size * n
        else:
            sizes = list(map(add, map(add, blens, plens), repeat(fixed, n)))
            left = sum(sizes)
        offsets: list[int] = []
        key = (b.topic, b.queue_id)
        with self.lock:
            now = self.clock()
            mid = rec.batch_mid(*born, now, self.store_host, self.store_port)
            qbase = self.topic_queue_table.get(key, 0)
            mf = self.files.next_file(0)
            free = mf.file_size - mf.wrote - rec.END_FILE_MIN_BLANK_LENGTH
            if left > free:
                self._reserve(sizes, free)
            done = 0
            try:
                while done < n:
                    mf.write_buffered = self.write_buffered
                    free = mf.file_size - mf.wrote - rec.END_FILE_MIN_BLANK_LENGTH
                    if left <= free:  # the rest fits this segment
                        k, span = n - done, left
                    else:
                        ends = list(accumulate(sizes[done:], initial=0))
                        k = bisect_right(ends, free) - 1
                        if k == 0:
                            self._close_segment(mf)
                            mf = self.files.next_file()
                            continue
                        span = ends[k]
                    stop = done + k
                    base = mf.file_from_offset + mf.wrote
                    starts = (list(range(base, base + span, size)) if size
                              else list(accumulate(sizes[done:stop - 1], initial=base)))
                    q0 = qbase + done
                    whole = not done and stop == n
                    mf.append(encode_batch(bodies, props, b.flags, done, stop, b.queue_id, q0,
                                           base, mid, magic, topic_block))
                    if len(self.dispatch_hints) < DISPATCH_HINTS_MAX:
                        self.dispatch_hints.append(DispatchHint(
                            base, base + span, b.topic, b.queue_id, q0, starts,
                            sizes if whole else sizes[done:stop],
                            props if whole else props[done:stop], now,
                        ))
                    offsets += starts
                    left -= span
                    done = stop
            finally:
                # Whatever reached the log keeps its queue offsets, even if a later write failed.
                if done:
                    self.topic_queue_table[key] = qbase + done
                    self.last_store_timestamp = now
        return BatchAppendResult(offsets, sizes, qbase, now)

    @staticmethod
    def _close_segment(mf: MappedFile) -> None:
        left = mf.file_size - mf.wrote
        mf.append(rec.encode_blank(left))
        # The rest of the segment is zeros already (segments are created zeroed): readable as
        # they are, so the whole segment is one readable range (what a slave copies), as after
        # recovery; with a write buffer ``commit`` moves ``committed`` there.
        mf.wrote = mf.file_size
        if not mf.write_buffered:
            mf.committed = mf.file_size

    # -- reading -----------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``offset``, or None if that range is gone or not written."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.committed:
            return None
        return mf.read(pos, size)

    def read_from(self, offset: int, max_size: int) -> bytes | None:
        """Raw bytes from ``offset``: at most ``max_size``, never past the end of its segment nor
        past what is readable (committed) there; ``b""`` when nothing is there yet. None when
        ``offset`` is below the log's first segment (deleted) or not a written offset. What a
        master sends its slaves (Java's ``getCommitLogData``)."""
        if offset < self.min_offset or offset > self.committed_offset:
            return None
        mf = self.files.find(offset)
        if mf is None:
            return b""  # the end of a full segment: the next one is not created yet
        pos = offset - mf.file_from_offset
        end = min(mf.committed, pos + max_size)
        return mf.read(pos, end - pos) if end > pos else b""

    def append_raw(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """A slave's append of its master's CommitLog bytes, exactly at ``max_offset`` (an empty
        log takes them at any segment boundary: the master's log may start later); segments are
        created at their boundaries with the master's names. Returns the new max offset.
        ``StoreError`` for any other offset; nothing is written then."""
        view = memoryview(data)
        size = self.config.mapped_file_size_commit_log
        with self.lock:
            end = self.max_offset
            empty = not self.files.files
            if offset != end and not (empty and offset % size == 0):
                raise StoreError(
                    f"raw append at CommitLog offset {offset} refused: the log ends at {end}"
                    + (" and is empty; a first append must start a segment" if empty else "")
                )
            done = 0
            while done < len(view):
                mf = self.files.next_file(offset if empty else 0)
                mf.write_buffered = self.write_buffered
                n = min(len(view) - done, mf.file_size - mf.wrote)
                mf.append(view[done:done + n])
                done += n
            return self.max_offset

    def read_record(self, offset: int) -> rec.MessageRecord | None:
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos >= mf.committed:
            return None
        # Verified (BODYCRC, and the record's own PHYSICALOFFSET): a damaged record, or an offset
        # from a damaged ConsumeQueue unit or index entry, raises rather than being served.
        m = rec.decode_record(mf.mm, pos, mf.committed, verify_crc=True)
        if m is not None and m.commit_log_offset != offset:
            raise CorruptRecordError(f"the record at CommitLog offset {offset} says it is at "
                                     f"{m.commit_log_offset}")
        return m

    def record_size_at(self, offset: int) -> int:
        mf = self.files.find(offset)
        if mf is None or offset - mf.file_from_offset >= mf.committed:
            return 0
        return rec.check_head(mf.mm, offset - mf.file_from_offset, mf.committed)

    def store_timestamp_at(self, offset: int) -> int:
        mf = self.files.find(offset)
        if mf is None:
            raise StoreError(f"CommitLog offset {offset} is not stored")
        return rec.read_store_timestamp(mf.mm, offset - mf.file_from_offset)

    def rollback_next_file_offset(self, offset: int) -> int:
        """The first offset of the segment after the one holding ``offset``."""
        size = self.config.mapped_file_size_commit_log
        return offset + size - offset % size

    def load(self) -> None:
        self.files.load()

    def close(self) -> None:
        self.files.close()


def _ip_bytes(ip: str) -> bytes:
    try:
        return ipaddress.ip_address(ip).packed
    except ValueError as e:
        raise StoreError(f"brokerIP1 {ip!r} is not an IP address") from e
