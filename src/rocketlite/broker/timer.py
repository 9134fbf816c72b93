"""The timer wheel of RocketMQ 5.x (``store/timer/TimerMessageStore``): timer messages (see
``broker/timer_divert.py`` for which, and how they are rewritten) wait in ``rmq_sys_wheel_timer``
and are delivered to their topic once their time has passed, to within ``timerPrecisionMs``.

Enqueue (thread ``timer-enqueue``): read the timer topic's ConsumeQueue from ``queue_offset``,
append one TimerLog unit per message and make it the head of its slot's chain; a slot already
behind the write time is delivered at once. The write time (the current tick) moves only between
enqueue rounds, and only slots before it are dequeued, so a slot is never linked while read.

Roll (5.x): a wheel spans ``slots_total`` ticks (5.x: 7 days) but units are linked at most
``timerRollWindowSlot`` ticks (2 days) ahead. A farther message is linked with the ROLL flag at the
window's end (or its middle when it is just past the window); when that slot comes it is written
back to the timer topic (``TIMER_ROLL_TIMES`` + 1) and enqueued again against its real
``TIMER_OUT_MS``. So ``timerMaxDelaySec`` may exceed the wheel (3 days by default, any value).

Dequeue (thread ``timer-dequeue``): for each tick from ``read_time`` up to the write time walk the
slot's chain back from its head, then read each message from the CommitLog in enqueue order,
convert it and put it. ``read_time`` passes a slot only once all its messages are stored; after
downtime the missed ticks are caught up the same way.

Delete markers (recall): a unit whose message carries ``TIMER_DEL_UNIQKEY`` is linked with the
DELETE flag. Delivering a slot first reads its markers (DELETE, not ROLL) and collects their keys,
then delivers the other messages except those whose ``build_delete_key(REAL_TOPIC, UNIQ_KEY)`` is
one of them; a marker is never delivered (one found due at enqueue is dropped, a rolling one
rolls like any message). No state is kept beyond the slot being delivered: the markers are units
of the TimerLog, so a slot redone after a restart or a crash honours them again.

Checkpoint (thread ``timer-flush``, every ``timerFlushIntervalMs`` and at shutdown): snapshot the
progress (queue offset, read time), fdatasync the TimerLog and the wheel, then write
``config/timercheck``. Recovery replays the TimerLog from the checkpointed flush position into the
wheel, re-enqueues from the checkpointed queue offset and delivers from the checkpointed read
time: work since the last checkpoint is repeated (duplicates, at-least-once), nothing is lost.
Queue offsets only move once a message is linked (or stored), read times once a slot is stored,
and both are snapshot before the fdatasyncs, so the checkpoint never claims more than is durable.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from array import array
from collections.abc import Callable, Sequence

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.redeliver import put_until_stored
from rocketlite.broker.timer_divert import (
    NEVER_ENQUEUED,
    TIMER_DEL_UNIQKEY,
    TIMER_OUT_MS,
    TIMER_TOPIC,
    TimerDiverter,
    convert_message,
    delete_key_of,
    get_property,
    parse_int,
)
from rocketlite.common.errors import (
    RocketliteError,
)
from rocketlite.formats.javahash import java_string_hash
from rocketlite.formats.message_record import MessageRecord
from rocketlite.formats.properties import REAL_TOPIC
from rocketlite.formats.timer import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    TimerLogUnit,
    encode_unit,
)
from rocketlite.store.commitlog import now_ms
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore
from rocketlite.store.timer_checkpoint import TimerCheckpoint
from rocketlite.store.timer_log import TimerLog
from rocketlite.store.timer_wheel import IGNORE, TimerWheel

log = logging.getLogger(__name__)

TIMER_WHEEL_TTL_DAY = 7  # 5.x: the wheel spans 7 days of ticks whatever the precision
DAY_SECS = 86_400
TIMER_BLANK_SLOTS = 60  # 5.x: ticks kept between the roll window and the wheel's end
PRECISIONS = (100, 200, 500, 1000)  # 5.x's candidates for timerPrecisionMs

ENQUEUE_BATCH = 1024  # ConsumeQueue units per enqueue round
DEQUEUE_BATCH = 256  # messages per put while delivering a slot ...
DEQUEUE_BATCH_BYTES = 4 << 20  # ... or bytes
IDLE_WAIT_S = 0.1  # longest sleep of an idle service (a dispatch or a new tick wakes it sooner)
RETRY_S = 0.5  # pause before retrying a put the store refused (disk full, flush failure)
CLEAN_INTERVAL_S = 30.0  # TimerLog retention (5.x: every 30 s)
MAX_DELETE_KEYS = 100_000  # delete markers honoured per slot (more are logged and ignored)


@dataclasses.dataclass(slots=True)
class TimerStats:
    enqueued: int = 0  # units linked into the wheel
    delivered: int = 0  # messages put to their real topic
    rolled: int = 0  # messages written back to the timer topic to be enqueued again
    dropped: int = 0  # messages that could not be delivered (logged)
    recalled: int = 0  # messages not delivered because a delete marker of their slot names them


def snap_precision(precision_ms: int) -> int:
    """5.x's ``setTimerPrecisionMs``: the largest candidate not above the value (100 at least)."""
    chosen = PRECISIONS[0]
    for p in PRECISIONS:
        if precision_ms >= p:
            chosen = p
    return chosen


class TimerMessageStore:
    """The timer wheel of one broker: the diverter and the enqueue, dequeue and flush services.

    The rounds (``enqueue_round``, ``dequeue_round``, ``flush``) are public so tests can drive
    them with a fake clock; ``start`` runs them on threads."""

    def __init__(self, store: MessageStore, config: BrokerConfig,
                 clock: Callable[[], int] = now_ms, slots_total: int | None = None) -> None:
        self.store = store
        self.enabled = config.timer_wheel_enable
        self.clock = clock
        self.precision_ms = p = snap_precision(config.timer_precision_ms)
        if p != config.timer_precision_ms:
            log.warning("timerPrecisionMs=%d is not one of %s; using %d", config.timer_precision_ms,
                        PRECISIONS, p)
        self.diverter = TimerDiverter(self.enabled, p, config.timer_max_delay_sec * 1000, clock)
        self.slots_total = slots_total or TIMER_WHEEL_TTL_DAY * DAY_SECS
        window = config.timer_roll_window_slot
        if not 2 <= window <= self.slots_total - TIMER_BLANK_SLOTS:
            window = self.slots_total - TIMER_BLANK_SLOTS
        self.roll_window_slots = window
        self.log_file_size = config.mapped_file_size_timer_log
        self.flush_interval_s = config.timer_flush_interval_ms / 1000
        self.sync_flush_timeout = store.config.sync_flush_timeout
        self.stats = TimerStats()
        # The wheel is checked for slots pointing past the log only if the last run did not stop
        # cleanly (the store's abort file, read before the store recreates it).
        self.after_crash = store.config.abort_path.exists()
        self.wheel: TimerWheel | None = None
        self.log: TimerLog | None = None
        self.checkpoint: TimerCheckpoint | None = None
        self.queue_offset = 0  # timer-topic queue offset: everything before it is enqueued
        self.read_time = 0  # every slot before it was delivered
        self.write_time = 0  # the current tick; units are linked at or after it
        self._stop = threading.Event()
        self._enqueue_wake = threading.Event()
        self._dequeue_wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._next_clean = 0.0
        self.running = False

    def divert(self, msg: MessageToStore) -> MessageToStore | None:
        """The broker's diverter hook (see ``TimerDiverter``)."""
        return self.diverter.divert(msg)

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Open the files (under the store root: ``timerwheel``, ``timerlog/``,
        ``config/timercheck``) and recover; the store must be running. ``start`` does this."""
        cfg = self.store.config
        self.checkpoint = TimerCheckpoint(cfg.config_dir / "timercheck")
        self.wheel = TimerWheel(cfg.store_path_root_dir / "timerwheel", self.slots_total,
                                self.precision_ms)
        self.log = TimerLog(cfg.store_path_root_dir / "timerlog", self.log_file_size)
        self.log.load()
        self.recover()

    def start(self) -> None:
        """Open (unless opened already) and start the services."""
        if not self.enabled or self.running:
            return
        if self.log is None:
            self.open()
        assert self.log is not None
        self._stop.clear()
        self.store.dispatcher.listeners.append(self._on_dispatched)
        self.running = True
        for name, target in (("timer-enqueue", self._enqueue_loop),
                             ("timer-dequeue", self._dequeue_loop),
                             ("timer-flush", self._flush_loop)):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        log.info("timer wheel started: read time %d, queue offset %d, log end %d",
                 self.read_time, self.queue_offset, self.log.max_offset)

    def shutdown(self) -> None:
        """Stop the services (each finishes its round), checkpoint, close the files."""
        self._stop_threads()
        if self.checkpoint is not None:
            try:
                self.flush()
            finally:
                self._close(flush=True)

    def halt(self) -> None:
        """Stop as a crash would: services stop, nothing more is flushed (for crash tests)."""
        self._stop_threads()
        self._close(flush=False)

    def _stop_threads(self) -> None:
        self.running = False
        self._stop.set()
        self._enqueue_wake.set()
        self._dequeue_wake.set()
        for t in self._threads:
            t.join()
        self._threads = []
        listeners = self.store.dispatcher.listeners
        if self._on_dispatched in listeners:
            listeners.remove(self._on_dispatched)

    def _close(self, flush: bool) -> None:
        for part in (self.log, self.wheel, self.checkpoint):
            if part is not None:
                part.close(flush=flush)
        self.log = self.wheel = self.checkpoint = None

    def _on_dispatched(self, topic: str, queue_id: int, next_offset: int) -> None:
        if topic == TIMER_TOPIC:
            self._enqueue_wake.set()

    # -- recovery ----------------------------------------------------------------------------

    def recover(self) -> None:
        """Rebuild the in-memory progress from the checkpoint and the files (see the module
        docstring); the store's recovery has already rebuilt the timer topic's queue."""
        cp, wheel, tlog = self.checkpoint, self.wheel, self.log
        assert cp is not None and wheel is not None and tlog is not None
        p = self.precision_ms

        def relink(pos: int, unit: TimerLogUnit) -> None:
            wheel.revise_slot(unit.delayed_time_ms, IGNORE, pos, True)

        end = tlog.recover(cp.last_timer_log_flush_pos, relink)
        now = self.clock() // p * p
        oldest = now - (self.slots_total - TIMER_BLANK_SLOTS) * p  # older slots were overwritten
        read = cp.last_read_time_ms
        if read <= 0:
            read = now if end == 0 else oldest
        read = max(read // p * p, oldest)
        # After a power loss a slot may point at units that never reached the disk: re-link it
        # from its first unit (5.x's checkPhyPos), or empty it if none survived.
        bad = wheel.check_phy_pos(read, end) if self.after_crash else []
        if bad:
            log.warning("timer wheel: %d slots point past the log end %d; re-linking", len(bad), end)
            first = min(s.first_pos for s in bad)
            if 0 <= first < end:
                for pos, unit in tlog.units_from(max(first, tlog.min_offset)):
                    wheel.revise_slot(unit.delayed_time_ms, IGNORE, pos, False)
            for s in bad:
                if wheel.get_slot(s.time_ms).last_pos >= end:
                    wheel.clear_slot(s.time_ms)
        offset = min(cp.last_timer_queue_offset, cp.master_timer_queue_offset)
        cq = self.store.find_queue(TIMER_TOPIC, 0)
        if cq is not None and not cq.min_offset <= offset <= cq.max_offset:
            log.warning("timer queue offset %d outside the queue [%d, %d]; clamped", offset,
                        cq.min_offset, cq.max_offset)
            offset = min(max(offset, cq.min_offset), cq.max_offset)
        self.queue_offset = offset
        self.read_time = read
        self.write_time = max(now, read)
        log.info("timer recovery: log end %d, read from %d (%d ticks to catch up), enqueue from "
                 "queue offset %d", end, read, (now - read) // p, offset)

    # -- enqueue -----------------------------------------------------------------------------

    def move_write_time(self) -> None:
        """Advance the write time to the current tick (only between enqueue rounds)."""
        tick = self.clock() // self.precision_ms * self.precision_ms
        if tick > self.write_time:
            self.write_time = tick
            self._dequeue_wake.set()

    def enqueue_round(self) -> int:
        """Enqueue up to ``ENQUEUE_BATCH`` timer-topic messages; returns how many were read."""
        tlog = self.log
        cq = self.store.find_queue(TIMER_TOPIC, 0)
        if cq is None or tlog is None:
            return 0
        offset = self.queue_offset
        lo, hi = cq.min_offset, cq.max_offset
        if not lo <= offset <= hi:  # deleted below us, or the queue was rebuilt shorter
            log.warning("timer queue offset %d outside the queue [%d, %d]; moved inside", offset,
                        lo, hi)
            offset = min(max(offset, lo), hi)
        units = cq.get_units(offset, min(ENQUEUE_BATCH, hi - offset)) if hi > offset else []
        write = self.write_time
        due: list[MessageToStore] = []
        for phys, size, _ in units:
            offset += 1
            rec = self._read(phys, size)
            if rec is None:
                continue
            text = rec.properties_text
            out_ms = parse_int(get_property(text, TIMER_OUT_MS))
            if out_ms is None:
                log.error("timer message at %d has no valid TIMER_OUT_MS; dropped", phys)
                self.stats.dropped += 1
            elif out_ms < write:  # its slot was dequeued already: deliver now (5.x does too)
                if get_property(text, TIMER_DEL_UNIQKEY) is not None:
                    log.warning("timer delete marker at %d came after its slot; its message "
                                "was not recalled", phys)
                    continue  # a marker is never delivered (5.x's doPut refuses it)
                m = self._convert(rec, NEVER_ENQUEUED, roll=False)
                if m is not None:
                    due.append(m)
            else:
                delete = get_property(text, TIMER_DEL_UNIQKEY) is not None
                self._link(out_ms, phys, size, get_property(text, REAL_TOPIC) or "", write,
                           delete)
        if due and not self._put(due):
            return 0  # stopping: the offset stays, the round is redone after a restart
        self.queue_offset = offset
        return len(units)

    def _link(self, out_ms: int, phys: int, size: int, real_topic: str, write: int,
              delete: bool = False) -> None:
        """Append a unit for the message and make it its slot's head (5.x's ``doEnqueue``)."""
        wheel, tlog = self.wheel, self.log
        assert wheel is not None and tlog is not None
        p, window = self.precision_ms, self.roll_window_slots
        delayed, magic = out_ms, MAGIC_DEFAULT
        if delayed - write >= window * p:
            magic |= MAGIC_ROLL
            if delayed - write - window * p < window // 3 * p:
                delayed = write + window // 2 * p  # just past the window: roll at its middle
            else:
                delayed = write + window * p
        if delete:
            magic |= MAGIC_DELETE
        slot = wheel.get_slot(delayed)
        pos = tlog.append(encode_unit(slot.last_pos, magic, write, delayed, phys, size,
                                      java_string_hash(real_topic)), delayed)
        wheel.put_slot(delayed, pos if slot.first_pos == -1 else slot.first_pos, pos,
                       slot.num + 1, slot.magic)
        self.stats.enqueued += 1

    # -- dequeue -----------------------------------------------------------------------------

    def dequeue_round(self) -> bool:
        """Deliver the slot at ``read_time`` if its tick has passed; False if there was nothing
        to do yet (or the service is stopping mid-slot: the slot is redone)."""
        read = self.read_time
        if read >= self.write_time:
            return False
        wheel = self.wheel
        assert wheel is not None
        slot = wheel.get_slot(read)
        if not slot.empty and not self._deliver_slot(read, slot.last_pos):
            return False
        self.read_time = read + self.precision_ms
        return True

    def _deliver_slot(self, slot_time: int, head: int) -> bool:
        tlog = self.log
        assert tlog is not None
        p = self.precision_ms
        offsets, sizes, magics, writes = array("q"), array("i"), array("i"), array("q")
        pos = head
        while pos >= 0:
            unit = tlog.read_unit(pos)
            if unit is None or not unit.valid or unit.delayed_time_ms // p != slot_time // p:
                if pos >= tlog.min_offset:
                    log.warning("timer slot %d: unit at %d is not one of its units; chain cut",
                                slot_time, pos)
                break
            offsets.append(unit.commit_log_offset)
            sizes.append(unit.size_py)
            magics.append(unit.magic)
            writes.append(unit.write_time_ms)
            if unit.prev_pos >= pos:
                log.warning("timer slot %d: unit at %d links forward; chain cut", slot_time, pos)
                break
            pos = unit.prev_pos
        marker = [m & (MAGIC_DELETE | MAGIC_ROLL) == MAGIC_DELETE for m in magics]
        deleted = self._delete_keys(slot_time, offsets, sizes, marker)
        batch: list[MessageToStore] = []
        batch_bytes = 0
        for i in range(len(offsets) - 1, -1, -1):  # oldest first: the order they were sent in
            if marker[i]:
                continue  # read already; never delivered
            rec = self._read(offsets[i], sizes[i])
            if rec is None:
                continue
            if deleted and delete_key_of(rec.properties_text) in deleted:
                self.stats.recalled += 1
                continue
            m = self._convert(rec, str(writes[i]), bool(magics[i] & MAGIC_ROLL))
            if m is not None:
                batch.append(m)
                batch_bytes += sizes[i]
            if len(batch) >= DEQUEUE_BATCH or batch_bytes >= DEQUEUE_BATCH_BYTES:
                if not self._put(batch):
                    return False
                batch, batch_bytes = [], 0
        return not batch or self._put(batch)

    def _delete_keys(self, slot_time: int, offsets: array[int], sizes: array[int],
                     marker: list[bool]) -> set[str]:
        """The keys of the slot's delete markers (at most ``MAX_DELETE_KEYS``)."""
        keys: set[str] = set()
        for i, is_marker in enumerate(marker):
            if not is_marker:
                continue
            if len(keys) >= MAX_DELETE_KEYS:
                log.warning("timer slot %d: more than %d delete markers; the rest are ignored",
                            slot_time, MAX_DELETE_KEYS)
                break
            rec = self._read(offsets[i], sizes[i])
            key = None if rec is None else get_property(rec.properties_text, TIMER_DEL_UNIQKEY)
            if key is not None:
                keys.add(key)
        return keys

    def _read(self, phys: int, size: int) -> MessageRecord | None:
        try:
            rec = self.store.look_message(phys)
        except RocketliteError as e:
            rec, why = None, str(e)
        else:
            why = "it is no longer in the CommitLog"
        if rec is None or rec.total_size != size or rec.topic != TIMER_TOPIC:
            log.error("timer message at CommitLog offset %d (%d bytes) cannot be read: %s; dropped",
                      phys, size, why if rec is None else "another record is there")
            self.stats.dropped += 1
            return None
        return rec

    def _convert(self, rec: MessageRecord, enqueue_ms: str, roll: bool) -> MessageToStore | None:
        m = convert_message(rec, enqueue_ms, self.clock(), roll)
        if m is None:
            log.error("timer message at %d has no REAL_TOPIC/REAL_QID; dropped",
                      rec.commit_log_offset)
            self.stats.dropped += 1
        return m

    def _put(self, msgs: Sequence[MessageToStore]) -> bool:
        """Store ``msgs`` (``redeliver.put_until_stored``); False only if the service stops first."""
        ok, dropped = put_until_stored(self.store, msgs, self._stop, "timer message")
        self.stats.dropped += dropped
        if ok:
            rolled = sum(1 for m in msgs if m.topic == TIMER_TOPIC)
            self.stats.rolled += rolled
            self.stats.delivered += len(msgs) - rolled - dropped
        return ok

    # -- checkpoint --------------------------------------------------------------------------

    def flush(self) -> None:
        """Make the progress durable: snapshot it, fdatasync the log and the wheel (which then
        cover it), write the checkpoint. Every ``CLEAN_INTERVAL_S`` delete delivered log segments."""
        tlog, wheel, cp = self.log, self.wheel, self.checkpoint
        if tlog is None or wheel is None or cp is None:
            return
        queue_offset, read_time = self.queue_offset, self.read_time
        flushed = tlog.flush()
        wheel.flush()
        cp.update(read_time, flushed, queue_offset)
        cp.flush()
        now = self.clock() / 1000
        if now >= self._next_clean:
            self._next_clean = now + CLEAN_INTERVAL_S
            tlog.delete_expired(read_time, self.store.commitlog.min_offset,
                                self.roll_window_slots * self.precision_ms)

    # -- threads -----------------------------------------------------------------------------

    def _enqueue_loop(self) -> None:
        while not self._stop.is_set():
            self._enqueue_wake.clear()  # before the round: a dispatch during it wakes the wait
            try:
                n = self.enqueue_round()
            except Exception:
                log.exception("timer enqueue round failed")
                n = 0
                self._stop.wait(RETRY_S)
            self.move_write_time()
            if n == 0:
                p = self.precision_ms
                to_tick = (p - self.clock() % p + 1) / 1000  # wake just after the next tick
                self._enqueue_wake.wait(min(IDLE_WAIT_S, to_tick))

    def _dequeue_loop(self) -> None:
        while not self._stop.is_set():
            self._dequeue_wake.clear()
            try:
                progressed = self.dequeue_round()
            except Exception:
                log.exception("timer dequeue round failed; retrying the slot")
                progressed = False
                self._stop.wait(RETRY_S)
            if not progressed:
                self._dequeue_wake.wait(IDLE_WAIT_S)

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            try:
                self.flush()
            except Exception:
                log.exception("timer checkpoint failed")
