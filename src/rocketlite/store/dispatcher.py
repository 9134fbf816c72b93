"""Dispatcher: builds ConsumeQueues and IndexFiles from the CommitLog (seed S8, RocketMQ's
ReputMessageService).

A background thread walks the CommitLog from ``dispatch_from`` up to a limit: the written end under
ASYNC_FLUSH, the flushed end under SYNC_FLUSH (so no reader sees a message before it is durable).
For each record it writes the ConsumeQueue unit at the record's own queue offset and, when enabled,
index entries for ``topic#key`` of every KEYS entry and of UNIQ_KEY. Runs of records that a batch
append described (``CommitLog.dispatch_hints``) are dispatched from the hint without re-parsing;
everything else (single-message appends, recovery) is parsed, runs of plain records by the
compiled ``record_scan.dispatch_plan``, one call per run.
Work goes in rounds of at most 4 MiB: at the end of a round every touched ConsumeQueue writes its
buffered units (one ``pwrite`` each) and listeners hear ``(topic, queue_id, next_queue_offset)``
for long polling.

The unit of a ``SCHEDULE_TOPIC_XXXX`` record (a message waiting for its delay level) carries its
deliver time, store time + the level's delay from ``messageDelayLevel``, instead of the tag hash:
the schedule service scans a level's queue by tag code alone (Java's
``CommitLog.checkMessageAndReturnSize``). Live dispatch, hinted or parsed, and recovery dispatch
all compute it here, so a rebuilt queue holds the same units.

Under ASYNC_FLUSH the store dispatches on the appending thread right after each append
(``dispatch_inline``): with the GIL a second thread buys no parallelism, and handing every append
to it costs a wake-up, GIL hand-offs that stall the event loop, and latency. The thread stays for
what the appender leaves: a backlog (recovery, a round already in progress), SYNC_FLUSH (records
become dispatchable when the group commit says so) and the transient store pool (when committed).
It sleeps until woken, and wakes every ``IDLE_WAIT_S`` regardless.

A full disk never stops the thread nor loses its place: a round that cannot write a ConsumeQueue
or the index raises before ``dispatch_from`` moves, the store refuses writes (``WriteGate`` source
``dispatch``) and the thread retries the round until it succeeds (units are rewritten at their own
offsets, records already indexed are skipped). Before it comes to that, ConsumeQueues and the index
allocate their blocks ahead of use: when only that headroom fails, writes are refused (source
``dispatch-ahead``, retried by the retention thread) while the dispatcher still has room for what
was already stored.
"""

from __future__ import annotations

import logging
import mmap
import threading
from collections.abc import Callable

from rocketlite.common.errors import CorruptRecordError, DiskFullError, StoreError
from rocketlite.formats import message_record as rec
from rocketlite.formats.consume_queue_unit import CQ_UNIT_SIZE
from rocketlite.formats.cq_units import pack_units
from rocketlite.formats.delay import SCHEDULE_TOPIC, SCHEDULE_TOPIC_BYTES, schedule_tags_code
from rocketlite.formats.javahash import tags_code
from rocketlite.formats.properties import find_property
from rocketlite.formats.record_scan import Run, dispatch_plan, tags_codes
from rocketlite.store.commitlog import CommitLog
from rocketlite.store.consume_queue import ConsumeQueue
from rocketlite.store.dispatch_check import names_queue
from rocketlite.store.index_service import IndexService
from rocketlite.store.message import DispatchHint
from rocketlite.store.write_gate import WriteGate

log = logging.getLogger(__name__)

IDLE_WAIT_S = 0.1
DISPATCH_ROUND_BYTES = 4 << 20
_TAGS = b"TAGS\x01"
_KEYS = b"KEYS\x01"
_UNIQ = b"UNIQ_KEY\x01"
_DELAY = b"DELAY\x01"
_SEGMENT_DONE = -1
Listener = Callable[[str, int, int], None]


def _ahead_reason(e: DiskFullError) -> str:
    return f"{e} (ConsumeQueue/index blocks ahead of the messages already stored)"


def _tags_code_of(props: bytes) -> int:
    return tags_code(find_property(props, _TAGS)) if props else 0


class Dispatcher:
    def __init__(
        self,
        commitlog: CommitLog,
        consume_queue: Callable[[str, int], ConsumeQueue],
        index: IndexService | None,
        limit: Callable[[], int],
        gate: WriteGate | None = None,
    ) -> None:
        self.commitlog = commitlog
        self.gate = gate or WriteGate()
        # ConsumeQueues (and the index) whose blocks ahead could not be allocated.
        self._short: set[ConsumeQueue | IndexService] = set()
        self.consume_queue = consume_queue
        self.index = index
        self.limit = limit
        self.delay_levels_ms: tuple[int, ...] = commitlog.config.delay_levels_ms
        self.dispatch_from = 0
        self.last_store_timestamp = 0
        # Below this CommitLog offset every record is complete (recovery's valid end): a record
        # there that does not parse is damaged, never still being written, so dispatch skips the
        # rest of its segment instead of waiting for it (it would wait forever, and no message
        # after it would ever reach its queue). A slave that truncates below it and refills
        # from its master dispatches only up to its last whole record, so it meets no record
        # still arriving there either.
        self.settled_end = 0
        self._corrupt = False  # the last segment dispatch stopped at a record that does not parse
        self.listeners: list[Listener] = []
        self.dirty: set[ConsumeQueue] = set()
        self._queues: dict[tuple[bytes, int], ConsumeQueue] = {}
        self._topic_names: dict[bytes, str] = {}
        self._odd_topics: set[tuple[bytes, int]] = set()  # logged once each, at most 64
        # Queues written this round, with their next offset: committed and announced at its end.
        self._touched: dict[ConsumeQueue, int] = {}
        self.lock = threading.Lock()  # held while dispatching; flushers take it to snapshot
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dispatcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            self._wake.clear()  # before looking: a wake-up that lands meanwhile is not lost
            try:
                progressed = self.dispatch_available()
            except Exception as e:  # noqa: BLE001 - the thread must live on and retry
                self._failed(e)
                progressed = False
            if not progressed:
                self._wake.wait(IDLE_WAIT_S)  # also the pace of retries after a failure

    def _failed(self, e: Exception) -> None:
        """A round could not write (a full disk, or a bug): refuse writes until a round
        succeeds; the thread retries from the same ``dispatch_from`` every ``IDLE_WAIT_S``."""
        if not isinstance(e, StoreError):
            log.error("dispatch failed at CommitLog offset %d", self.dispatch_from, exc_info=e)
        self.gate.refuse("dispatch", f"the dispatcher cannot write ConsumeQueues or the index at "
                         f"CommitLog offset {self.dispatch_from}: {e}")

    def dispatch_inline(self) -> None:
        """Dispatch what was just appended, on the caller's thread, if that is one short round;
        otherwise (the thread is in a round, or the backlog is large) wake the thread."""
        if not self.lock.acquire(blocking=False):
            self._wake.set()
            return
        try:
            end = self.limit()
            before = self.dispatch_from
            if before >= end:
                return
            if end - before > DISPATCH_ROUND_BYTES:
                self._wake.set()
                return
            self._round(end, end)
        except Exception as e:  # noqa: BLE001 - the append succeeded: never fail it here
            self._failed(e)
            self._wake.set()  # the thread dispatches it later, at its own pace
        finally:
            self.lock.release()

    def _round(self, end: int, readable: int) -> int:
        """One round towards ``end`` (call holding ``lock``); returns where it stopped.
        ``readable`` is the dispatch limit: a hinted run may end past ``end`` but not past it."""
        try:
            reached = self._dispatch_range(end, readable)
        finally:
            self._end_round()
        # Only now, with the round's units written: whoever sees ``dispatch_from`` move may read
        # every queue up to it.
        self.dispatch_from = reached
        if self.gate.reason is not None and self.gate.refused("dispatch"):
            self.gate.clear("dispatch")
        return reached

    def dispatch_available(self, limit: int | None = None) -> bool:
        """Dispatch every record below the limit; True if anything was dispatched."""
        end = self.limit() if limit is None else limit
        progressed = False
        while self.dispatch_from < end:
            # Bounded rounds, so the flush thread can take the dirty set between them.
            with self.lock:
                before = self.dispatch_from
                if self._round(min(end, before + DISPATCH_ROUND_BYTES), end) == before:
                    break
            progressed = True
        return progressed

    def _end_round(self) -> None:
        """Write every touched queue's buffered units, then tell listeners (long polling)."""
        touched = self._touched
        if not touched:
            return
        self._touched = {}
        self.dirty.update(touched)
        short: dict[ConsumeQueue | IndexService, DiskFullError] = {}
        for cq in touched:
            if (err := cq.commit()) is not None:
                short[cq] = err
        if self.index is not None and (err := self.index.short) is not None:
            short[self.index] = err
        if short:
            self._short.update(short)
            self.gate.refuse("dispatch-ahead", _ahead_reason(next(iter(short.values()))),
                             self.retry_ahead)
        for fn in self.listeners:
            for cq, next_offset in touched.items():
                fn(cq.topic, cq.queue_id, next_offset)

    def retry_ahead(self) -> None:
        """Allocate again the blocks ahead of every queue (and the index) that lacked them
        (the retention thread, every second while writes are refused); ``DiskFullError`` while
        some still lack them."""
        with self.lock:
            errors = {x: err for x in self._short if (err := x.reserve_ahead()) is not None}
            self._short = set(errors)
            if errors:
                raise DiskFullError(_ahead_reason(next(iter(errors.values()))))

    def _dispatch_range(self, end: int, readable: int) -> int:
        """Dispatch from ``dispatch_from`` towards ``end``; return where it stopped."""
        cl = self.commitlog
        hints = cl.dispatch_hints
        start = self.dispatch_from
        if start < cl.min_offset:
            start = cl.min_offset
        while start < end:
            while hints and hints[0].end <= start:
                hints.popleft()  # already dispatched (or below a truncation)
            stop = end
            if hints:
                h = hints[0]
                if h.start == start:
                    if h.end > readable:
                        break  # not yet flushed (SYNC_FLUSH) or committed (transient pool)
                    # (a run may end past this round's ``end``: the round is that much longer)
                    self._dispatch_hint(h)
                    hints.popleft()
                    start = h.end
                    continue
                if h.start > start:
                    stop = min(end, h.start)  # parse up to the next run the writer described
            mf = cl.files.find(start)
            if mf is None:
                break
            base = mf.file_from_offset
            self._corrupt = False
            pos = self._dispatch_segment(
                mf.mm, start - base, min(mf.committed, stop - base), mf.committed
            )
            if pos == _SEGMENT_DONE:
                start = base + mf.file_size  # BLANK: go on in the next segment
                continue
            if self._corrupt and base + pos < self.settled_end:
                log.error("CommitLog offset %d: a damaged record below the recovered end %d; the "
                          "rest of its segment is not dispatched (Java's ReputMessageService "
                          "skips it too)", base + pos, self.settled_end)
                start = min(base + mf.file_size, self.settled_end)
                continue
            reached, start = base + pos, base + pos
            if reached < stop or stop == end:
                break  # the limit, or a record past it, or a corrupt record for recovery
        return start

    def queue_ends(self, end: int) -> dict[tuple[str, int], int]:
        """Read only: the next queue offset of every queue with a record in
        ``[dispatch_from, end)``, i.e. what the queues will hold once those are dispatched."""
        cl = self.commitlog
        out: dict[tuple[str, int], int] = {}
        no_queue = (rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_ROLLBACK)
        pos = max(self.dispatch_from, cl.min_offset)
        while pos < end and (mf := cl.files.find(pos)) is not None:
            base = mf.file_from_offset
            p, limit = pos - base, min(mf.committed, end - base)
            for size, qid, qoff, _, sys_flag, _, topic_b, _ in rec.iter_dispatch(mf.mm, p, limit):
                p += size
                if sys_flag & rec.SYSFLAG_TRANSACTION_MASK not in no_queue:
                    key = (self._topic_name(topic_b), qid)
                    out[key] = max(out.get(key, 0), qoff + 1)
            try:
                if p >= limit or rec.check_head(mf.mm, p, mf.committed) != 0:
                    break
            except CorruptRecordError:
                break
            pos = base + mf.file_size  # the BLANK that closes the segment
        return out

    def _dispatch_hint(self, h: DispatchHint) -> None:
        """Dispatch a run of records of one topic and queue that an append described: its units
        packed in one call, and the index keys searched once over the run."""
        cq = self.consume_queue(h.topic, h.queue_id)
        props = h.properties
        n = len(props)
        # One property string for the whole run (the compiled decode_batch shares one object
        # among equal entries, so this is a pointer comparison per record): one tags code.
        one = props.count(props[0]) == n
        if h.topic == SCHEDULE_TOPIC:
            codes: list[int] = [self._code(p, h.store_timestamp) for p in props]
        elif one:
            codes = [_tags_code_of(props[0])] * n
        else:
            codes = tags_codes(props)
        offsets, sizes = h.offsets, h.sizes
        cq.put_units(h.queue_offset, pack_units(offsets, sizes, codes), offsets[-1] + sizes[-1])
        self._touched[cq] = h.queue_offset + n
        self.last_store_timestamp = h.store_timestamp
        if self.index is not None:
            # one search over the run instead of one per record
            keyed = props[0] if one else b"\x00".join(props)
            if _KEYS in keyed or _UNIQ in keyed:
                self.index.build_many([h.topic] * n, props, h.offsets, [h.store_timestamp] * n)

    def _code(self, props: bytes, store_ts: int) -> int:
        """The unit's tag code for a SCHEDULE_TOPIC_XXXX record: its deliver time when it has a
        DELAY level, else the ordinary tag hash."""
        if props and _DELAY in props:
            code = schedule_tags_code(find_property(props, _DELAY), store_ts, self.delay_levels_ms)
            if code is not None:
                return code
        return _tags_code_of(props)

    @staticmethod
    def _index_keys(index: IndexService, topic: str, props: bytes, phys: int, store_ts: int) -> None:
        """Index ``topic#key`` for every KEYS entry and the UNIQ_KEY of one record."""
        keys = find_property(props, _KEYS)
        uniq = find_property(props, _UNIQ)
        if keys or uniq:
            index.build(topic, keys.split(" ") if keys else [], uniq, phys, store_ts)

    def _dispatch_segment(self, buf: mmap.mmap, pos: int, limit: int, readable: int) -> int:
        """Dispatch records in [pos, limit) of one segment; return where it stopped, or
        ``_SEGMENT_DONE`` at the BLANK record that closes the segment. ``readable`` is the
        segment's committed end: a record running past ``limit`` but not past it is simply left
        for the next round.

        Plain records go by the packed units of ``record_scan.dispatch_plan`` (one call per run
        of them); a record it stops at (another shape, a transaction, the schedule topic, tags
        not in ASCII) goes through ``_dispatch_one``, then the plan resumes after it."""
        index = self.index
        plan = dispatch_plan
        while True:
            stop, runs, keyed, last_ts = plan(buf, pos, limit)
            if runs:
                self._put_runs(runs)
            if index is not None and keyed:
                name = self._topic_name
                topics, props_, offsets, stamps = zip(*keyed, strict=True)
                index.build_many(list(map(name, topics)), props_, offsets, stamps)
            if last_ts:
                self.last_store_timestamp = last_ts
            pos = stop
            if pos >= limit:
                return pos
            one = next(rec.iter_dispatch(buf, pos, limit), None)
            if one is None:
                break
            self._dispatch_one(*one)
            pos += one[0]
        try:
            if rec.check_head(buf, pos, readable) == 0:
                return _SEGMENT_DONE
            rec.check_record(buf, pos, readable, False)
            return pos  # a whole record that ends past this round's limit
        except CorruptRecordError as e:
            log.error("CommitLog position %d: %s; dispatch waits", pos, e)
            self._corrupt = True
        return pos

    def _put_runs(self, runs: list[Run]) -> None:
        """Write the packed units of a plan's runs to their queues."""
        queues = self._queues
        touched = self._touched
        for topic_b, qid, q0, units, max_end in runs:
            key = (topic_b, qid)
            cq = queues.get(key)
            if cq is None:
                if not self._names_queue(topic_b, qid, int.from_bytes(units[:8], "big", signed=True)):
                    continue  # indexed (by the plan's keyed list), but no unit
                cq = queues[key] = self.consume_queue(self._topic_name(topic_b), qid)
            cq.put_units(q0, units, max_end)
            touched[cq] = q0 + len(units) // CQ_UNIT_SIZE

    def _dispatch_one(self, size: int, qid: int, qoff: int, phys: int, sys_flag: int,
                      store_ts: int, topic_b: bytes, props: bytes) -> None:
        """Dispatch one record read from the CommitLog, whatever its shape."""
        index = self.index
        txn = sys_flag & rec.SYSFLAG_TRANSACTION_MASK
        if txn in (rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_ROLLBACK):
            if index is None or txn == rec.SYSFLAG_TRANSACTION_ROLLBACK:
                self.last_store_timestamp = store_ts
                return
            topic = self._topic_name(topic_b)
        else:
            key = (topic_b, qid)
            cq = self._queues.get(key)
            if cq is None and self._names_queue(topic_b, qid, phys):
                cq = self._queues[key] = self.consume_queue(self._topic_name(topic_b), qid)
            if cq is None:
                topic = self._topic_name(topic_b)  # indexed, but no unit
            else:
                topic = cq.topic
                if topic_b == SCHEDULE_TOPIC_BYTES:
                    cq.put(phys, size, self._code(props, store_ts), qoff)
                else:
                    tags = find_property(props, _TAGS) if props else None
                    cq.put(phys, size, tags_code(tags), qoff)
                self._touched[cq] = qoff + 1
        if index is not None and (_KEYS in props or _UNIQ in props):
            self._index_keys(index, topic, props, phys, store_ts)
        if store_ts:
            self.last_store_timestamp = store_ts

    def _topic_name(self, topic_b: bytes) -> str:
        name = self._topic_names.get(topic_b)
        if name is None:
            name = topic_b.decode("utf-8", "replace")
            if len(self._topic_names) < 100_000:
                self._topic_names[topic_b] = name
        return name

    def _names_queue(self, topic_b: bytes, qid: int, phys: int) -> bool:
        """Whether a record read from the CommitLog names a queue (``dispatch_check.names_queue``);
        one the store did not write may not: it is kept and indexed, but gets no unit."""
        if names_queue(self._topic_name(topic_b), qid):
            return True
        if len(self._odd_topics) < 64 and (topic_b, qid) not in self._odd_topics:
            self._odd_topics.add((topic_b, qid))
            log.error("CommitLog offset %d: topic %r queue %d cannot name a ConsumeQueue; records "
                      "there are kept but get no unit", phys, topic_b[:80], qid)
        return False

    def forget_topic(self, topic: str) -> None:
        """Drop cached references to a deleted topic's queues (call holding ``lock``)."""
        for key in [k for k, cq in self._queues.items() if cq.topic == topic]:
            del self._queues[key]
        self.dirty = {cq for cq in self.dirty if cq.topic != topic}

    def forget_queue(self, cq: ConsumeQueue) -> None:
        """Drop cached references to one dropped queue (call holding ``lock``)."""
        for key in [k for k, q in self._queues.items() if q is cq]:
            del self._queues[key]
        self.dirty.discard(cq)

    def mark_dirty(self, queues: list[ConsumeQueue]) -> None:
        with self.lock:
            self.dirty.update(queues)

    def take_dirty(self) -> tuple[list[ConsumeQueue], int]:
        """ConsumeQueues written since the last call, and the store time they cover."""
        with self.lock:
            dirty = list(self.dirty)
            self.dirty.clear()
            return dirty, self.last_store_timestamp

    def shutdown(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
