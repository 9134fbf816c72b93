"""Delay levels (seed S19, RocketMQ 4.x's ``ScheduleMessageService``): a message sent with
``DELAY=<level>`` waits in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` and is re-written to its
real topic once the level's delay (``messageDelayLevel``) has passed since it was stored.

Divert (``ScheduleMessageService.divert``, the broker's last diverter): a message with a positive
DELAY, not prepared or rolled back (a transactional message is delayed when it is committed), not
already in the schedule topic, is stored to ``SCHEDULE_TOPIC_XXXX`` with ``REAL_TOPIC`` and
``REAL_QID``; a level above the table's maximum is clamped to it (DELAY rewritten, as Java does).

Store: the dispatcher writes each schedule unit's tag code as the deliver time (store time + the
level's delay, ``formats/delay.py``), so a level's queue is scanned without reading the CommitLog.

Deliver (thread ``schedule-deliver``): for each level, from its offset, while the unit's deliver
time has come, read the record, rebuild it for REAL_TOPIC/REAL_QID (DELAY removed, everything
else kept, UNIQ_KEY so the client's message id too: Java's ``messageTimeup``), put the batch
straight to the store (never through the diverters: a delivered message must not be delayed
again), then advance the offset. Bounded per round (``DELIVER_BATCH``); the thread sleeps until
the earliest due time or ``IDLE_WAIT_S``, whichever is sooner.

Progress: ``config/delayOffset.json`` (``{"offsetTable":{"1":n,...}}``, level → queue offset,
RocketMQ's shape), written every ``flushDelayOffsetInterval`` (10 s) and at shutdown, read at
start. Offsets move only after their messages are stored, and the file is written only once the
CommitLog is durable past them, so a restart repeats at most what was delivered since the last
write (duplicates, at-least-once) and loses nothing, power loss included.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from rocketlite.broker import config_file
from rocketlite.broker.redeliver import put_until_stored
from rocketlite.broker.timer_divert import get_property, parse_int, set_properties
from rocketlite.broker.topics import TRANS_HALF_TOPIC
from rocketlite.common.errors import (
    ConfigError,
    FlushError,
    FlushTimeoutError,
    RocketliteError,
)
from rocketlite.formats.delay import SCHEDULE_TOPIC, clamp_level, parse_level
from rocketlite.formats.message_record import (
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_PREPARED,
    SYSFLAG_TRANSACTION_ROLLBACK,
    MessageRecord,
)
from rocketlite.formats.properties import DELAY, REAL_QID, REAL_TOPIC
from rocketlite.protocol import fastjson
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.store.commitlog import now_ms
from rocketlite.store.flush import FlushService
from rocketlite.store.message import MessageToStore
from rocketlite.store.message_store import MessageStore

if TYPE_CHECKING:
    from rocketlite.remoting.connection import Connection
    from rocketlite.remoting.server import RemotingServer

log = logging.getLogger(__name__)

DELIVER_BATCH = 256  # units read per level per round
IDLE_WAIT_S = 0.1  # longest sleep (a new message's due time is at least its level's delay away)
RETRY_S = 0.5  # pause before retrying a put the store refused (disk full, flush failure)
_HOST_FLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6  # the store sets these itself
_NOT_DELAYED = (SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK)


class ScheduleMessageService:
    """The delay-level diverter and delivery service of one broker. ``deliver_round`` and
    ``persist`` are public so tests can drive them; ``start`` runs them on a thread."""

    def __init__(self, store: MessageStore, clock: Callable[[], int] = now_ms) -> None:
        self.store = store
        self.levels_ms: tuple[int, ...] = store.config.delay_levels_ms
        self.clock = clock
        self.persist_interval_s = store.config.flush_delay_offset_interval / 1000
        self.path = store.config.config_dir / "delayOffset.json"
        self.offsets: dict[int, int] = {}  # level -> next queue offset to deliver
        self.lock = threading.Lock()  # guards ``offsets`` against a concurrent encode
        self.diverted = 0
        self.delivered = 0
        self.dropped = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.running = False

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    # -- divert ------------------------------------------------------------------------------

    def divert(self, msg: MessageToStore) -> MessageToStore | None:
        """``msg`` rewritten for its level's schedule queue, or None if it is not delayed."""
        text = msg.properties
        if "DELAY\x01" not in text or msg.topic == SCHEDULE_TOPIC:
            return None
        if msg.sys_flag & SYSFLAG_TRANSACTION_MASK in _NOT_DELAYED:
            return None
        level = clamp_level(parse_level(get_property(text, DELAY)), self.levels_ms)
        if level <= 0:
            return None
        self.diverted += 1
        return MessageToStore(
            SCHEDULE_TOPIC, msg.body, level - 1, msg.flag,
            set_properties(text, (), {DELAY: str(level), REAL_TOPIC: msg.topic,
                                      REAL_QID: str(msg.queue_id)}),
            msg.sys_flag, msg.born_timestamp, msg.born_host, msg.born_port, msg.reconsume_times,
            msg.prepared_transaction_offset,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def load(self) -> None:
        """Read ``delayOffset.json``; ConfigError if it exists but is not that file's shape."""
        obj = config_file.load(self.path)
        if obj is None:
            return
        table = obj.get("offsetTable", {}) if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            raise ConfigError(f"{self.path}: expected {{\"offsetTable\": {{level: offset}}}}")
        offsets: dict[int, int] = {}
        for key, value in table.items():
            level, offset = parse_int(str(key)), value
            if level is None or not isinstance(offset, int) or isinstance(offset, bool):
                log.warning("%s: ignoring entry %r: %r", self.path, key, value)
                continue
            offsets[level] = offset
        with self.lock:
            self.offsets = offsets

    def encode(self, offsets: dict[int, int] | None = None) -> bytes:
        """``delayOffset.json``'s body for ``offsets`` (default: the current ones)."""
        if offsets is None:
            with self.lock:
                offsets = dict(self.offsets)
        table = {str(level): off for level, off in sorted(offsets.items())}
        return fastjson.dumps({"offsetTable": table})

    def _snapshot(self) -> tuple[dict[int, int], Future[None] | None]:
        """The offsets and a future completed once the CommitLog is durable past every delivery
        they count (None if the store is stopped: it flushed, or crashed, already). Under
        ASYNC_FLUSH a delivered message sits in the page cache for up to a flush interval: a
        file that counted it before then could, after a power loss, lose it for good."""
        with self.lock:
            offsets = dict(self.offsets)
        if not self.store.running:
            return offsets, None
        return offsets, self.store.flusher.request(self.store.commitlog.max_offset)

    def _write(self, offsets: dict[int, int]) -> None:
        config_file.save(self.path, self.encode(offsets))

    def persist(self) -> None:
        """Write ``delayOffset.json`` once the deliveries it counts are durable (waits up to
        ``syncFlushTimeout``); if they do not become durable the file keeps its older offsets
        (a restart repeats more, loses nothing)."""
        offsets, flushed = self._snapshot()
        if flushed is not None:
            try:
                FlushService.wait(flushed, self.store.config.sync_flush_timeout)
            except (FlushError, FlushTimeoutError) as e:
                log.warning("%s not written: the deliveries it counts are not durable: %s",
                            self.path, e)
                return
        self._write(offsets)

    def start(self) -> None:
        """Load the offsets and start delivering; the store must be running."""
        if self.running:
            return
        self.load()
        self._stop.clear()
        self.running = True
        self._thread = threading.Thread(target=self._run, name="schedule-deliver", daemon=True)
        self._thread.start()
        log.info("schedule service started: %d levels, offsets %s", self.max_level, self.offsets)

    def shutdown(self) -> None:
        """Stop delivering (the round in progress finishes) and write the offsets."""
        was_running = self.running
        self.running = False
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if was_running:
            self.persist()

    def register(self, server: RemotingServer) -> None:
        server.register(RequestCode.GET_ALL_DELAY_OFFSET, self.all_delay_offset)

    def all_delay_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET (45): the body is ``delayOffset.json``'s content, as Java's."""
        return cmd.response(ResponseCode.SUCCESS, None, body=self.encode())

    # -- delivery ----------------------------------------------------------------------------

    def deliver_round(self) -> tuple[int, int | None]:
        """Deliver what is due on every level, at most ``DELIVER_BATCH`` per level; returns how
        many were delivered and the earliest deliver time still waiting (None if none seen)."""
        total, earliest = 0, None
        for level in range(1, self.max_level + 1):
            n, due = self._deliver_level(level)
            total += n
            if due is not None and (earliest is None or due < earliest):
                earliest = due
            if self._stop.is_set():
                break
        return total, earliest

    def _deliver_level(self, level: int) -> tuple[int, int | None]:
        cq = self.store.find_queue(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return 0, None
        offset = self.offsets.get(level, 0)
        lo, hi = cq.min_offset, cq.max_offset
        if not lo <= offset <= hi:  # deleted below us, or the queue was rebuilt shorter
            log.warning("delay level %d: offset %d outside the queue [%d, %d]; moved inside",
                        level, offset, lo, hi)
            offset = min(max(offset, lo), hi)
        units = cq.get_units(offset, min(DELIVER_BATCH, hi - offset)) if hi > offset else []
        now = self.clock()
        delay = self.levels_ms[level - 1]
        batch: list[MessageToStore] = []
        waiting: int | None = None
        for phys, size, deliver_at in units:
            # A deliver time beyond now + the level's delay cannot come from this table and
            # this clock (the clock went back, or the table was shortened): Java's
            # correctDeliverTimestamp delivers such a message at once rather than hold it.
            if deliver_at > now + delay:
                deliver_at = now
            if deliver_at > now:
                waiting = deliver_at
                break
            offset += 1
            m = self._convert(phys, size)
            if m is not None:
                batch.append(m)
        if batch and not self._put(batch):
            return 0, None  # stopping: the offset stays, the round is redone after a restart
        with self.lock:
            self.offsets[level] = offset
        self.delivered += len(batch)
        if waiting is None and units and offset < hi:
            waiting = now  # more to read (the batch's bound, or a segment's end): at once
        return len(batch), waiting

    def _convert(self, phys: int, size: int) -> MessageToStore | None:
        """Java's ``messageTimeup``: the message for its real topic and queue, DELAY cleared
        (REAL_TOPIC/REAL_QID stay, as in Java). None, logged, if it cannot be read."""
        try:
            rec: MessageRecord | None = self.store.look_message(phys)
            why = "it is no longer in the CommitLog"
        except RocketliteError as e:
            rec, why = None, str(e)
        if rec is not None and (rec.total_size != size or rec.topic != SCHEDULE_TOPIC):
            rec, why = None, "another record is there"
        if rec is None:
            log.error("delayed message at CommitLog offset %d cannot be read: %s; dropped",
                      phys, why)
            self.dropped += 1
            return None
        text = rec.properties_text
        topic = get_property(text, REAL_TOPIC)
        qid = parse_int(get_property(text, REAL_QID))
        if not topic or qid is None or topic == TRANS_HALF_TOPIC:
            # Java drops a half message found here too: delivering it would make an undecided
            # transaction look like a fresh half (the divert never lets one in).
            log.error("delayed message at %d has REAL_TOPIC=%r REAL_QID=%r; dropped", phys, topic,
                      qid)
            self.dropped += 1
            return None
        return MessageToStore(
            topic, rec.body, qid, rec.flag, set_properties(text, (DELAY,), {}),
            rec.sys_flag & ~_HOST_FLAGS, rec.born_timestamp, rec.born_host, rec.born_port,
            rec.reconsume_times,
        )

    def _put(self, msgs: Sequence[MessageToStore]) -> bool:
        """Store ``msgs`` (``redeliver.put_until_stored``); False only if the service stops first."""
        ok, dropped = put_until_stored(self.store, msgs, self._stop, "delayed message")
        self.dropped += dropped
        return ok

    def _run(self) -> None:
        next_persist = time.monotonic() + self.persist_interval_s
        pending: tuple[dict[int, int], Future[None] | None] | None = None
        while not self._stop.is_set():
            try:
                _, earliest = self.deliver_round()
            except Exception:
                log.exception("delay delivery round failed")
                earliest = None
                self._stop.wait(RETRY_S)
            # Periodic write without blocking delivery: snapshot, then write it on a later
            # round once the flush that covers it is done (a flush interval later at most).
            if pending is None and time.monotonic() >= next_persist:
                next_persist = time.monotonic() + self.persist_interval_s
                pending = self._snapshot()
            if pending is not None and (pending[1] is None or pending[1].done()):
                offsets, flushed = pending
                pending = None
                try:
                    if flushed is not None and flushed.exception() is not None:
                        log.warning("%s not written: %s", self.path, flushed.exception())
                    else:
                        self._write(offsets)
                except Exception:
                    log.exception("cannot write %s", self.path)
            now = self.clock()
            wait = IDLE_WAIT_S if earliest is None else min(IDLE_WAIT_S, (earliest - now) / 1000)
            if wait > 0:
                self._stop.wait(wait)
