"""The master's side of 4.x replication (Java's ``HAService`` and ``HAConnection``): slaves
connect to ``haListenPort`` and get the master's CommitLog, byte for byte.

Protocol (frames in ``formats/ha``). A slave sends 8-byte reports of its CommitLog max offset: at
connect, after each frame it applied and every ``haSendHeartbeatInterval``. The master remembers
each slave's last report (its acked offset) and the time. The first report decides where the
transfer starts:

* the slave's offset, when the master has it;
* the master's min offset when the slave reports 0 and the master's log starts later (its first
  segments expired): the slave starts with the master's first segment (Java 4.x starts an empty
  slave at the master's last segment instead; rocketlite sends everything the master has);
* the master's max offset when the slave's offset is beyond it (see the divergence rule).

Then the master streams frames ``[8 phyOffset][4 size][size bytes]`` of at most
``haTransferBatchSize`` bytes, never across a segment end, as fast as the slave reads them,
waking on new appends (``MessageStore.on_append``: one flag test per append while no connection
waits, one loop wake-up when one does), and sends a size-0 heartbeat carrying its next offset when
it has had nothing to send for ``haSendHeartbeatInterval`` (and at once after the first report).
A connection with no report for ``haHousekeepingInterval`` is closed. A slave behind the master's
min offset (not empty) cannot be served: the connection is closed with an error logged.

Divergence rule (4.x has no epochs; this is rocketlite's rule): a slave whose max offset is
beyond the master's is told to start at the master's max; a slave that gets a frame whose
phyOffset is below its own max offset truncates its CommitLog (and ConsumeQueues and index) to
phyOffset, then appends; a frame whose phyOffset is above its max offset is a protocol error
(the slave reconnects), except on an empty slave, which takes a first frame at any segment
boundary.

``wait_for_ack`` returns a future resolved once any slave has acked an offset (in controller mode
any slave of the SyncStateSet: ``count_only``); under SYNC_MASTER
``transfer`` (``transfer.GroupTransfer``) holds the sends' waits for the slave, told of each new
acked offset. ``status`` gives each slave's acked offset, lag and last report time.

Lag in time (rocketlite's figure; RocketMQ's haStatus shows bytes only): 0 when the slave has
acked the master's max offset, else the time since the latest moment the slave is known to have
held everything the master had then. At each report the master notes ``(now, its max offset)``;
a later report whose acked offset reaches a noted max offset moves "caught up at" to that note's
time. So a slave that keeps up under load shows about one report interval, and one that stopped
applying shows a figure that grows by the second. Before its first catch-up on a connection the
time counts from the connection (a lower bound). At most ``LAG_NOTES`` notes are kept per slave;
past that none is added, which can only make the figure larger, never smaller.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import heapq
import itertools
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from rocketlite.broker.ha.transfer import GroupTransfer
from rocketlite.common.errors import FormatError
from rocketlite.formats import ha
from rocketlite.store.config import StoreConfig
from rocketlite.store.message_store import MessageStore

log = logging.getLogger(__name__)


LAG_NOTES = 4096


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class SlaveStatus:
    address: str
    acked_offset: int  # -1 before the first report
    lag: int  # bytes: the master's max offset - acked_offset
    last_report_ms: int  # wall-clock ms of the last report (0: none yet)
    lag_ms: int = 0  # time behind (see the module docstring): 0 when lag is 0
    transfer_from: int = -1  # where the transfer started (-1 before the first report)


@dataclass(frozen=True, slots=True)
class MasterStatus:
    max_offset: int
    slaves: list[SlaveStatus]


class _Slave:
    __slots__ = ("acked", "address", "caught_up_ms", "last_report_ms", "notes", "start", "wake")

    def __init__(self, address: str) -> None:
        self.address = address
        self.acked = -1
        self.last_report_ms = 0
        self.start: int | None = None  # where the transfer starts, set by the first report
        self.wake = asyncio.Event()
        # The latest time the slave is known to have held all the master had (see the module
        # docstring); the connection time until then. ``notes``: (time, master max offset) at
        # reports the slave was behind, oldest first.
        self.caught_up_ms = now_ms()
        self.notes: deque[tuple[int, int]] = deque()

    def note_report(self, acked: int, top: int, now: int) -> None:
        """Record a report of ``acked`` while the master's max offset is ``top``."""
        notes = self.notes
        while notes and notes[0][1] <= acked:
            self.caught_up_ms = notes.popleft()[0]
        if acked >= top:
            self.caught_up_ms = now
            notes.clear()
        elif len(notes) < LAG_NOTES and (not notes or notes[-1][1] < top):
            notes.append((now, top))

    def lag_ms(self, top: int, now: int) -> int:
        if self.acked >= top:
            return 0
        return max(0, now - self.caught_up_ms)


class HAServer:
    def __init__(self, store: MessageStore, config: StoreConfig, host: str = "0.0.0.0") -> None:
        self.store = store
        self.config = config
        self.host = host
        self.port = config.ha_port
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slaves: dict[_Slave, asyncio.Task[None]] = {}
        self._idle = False  # a connection waits for appends: the next append wakes it
        self._lock = threading.Lock()  # the ack waiters, taken from any thread
        self._waiters: list[tuple[int, int, concurrent.futures.Future[None]]] = []
        self._seq = itertools.count()
        self.max_acked = -1  # the highest offset any slave acked (any counted one, see below)
        # Controller mode (``role``): the peer addresses of the SyncStateSet members' connections,
        # the only ones whose acks count (None: every connection's, as in 4.x)
        self.counted: frozenset[str] | None = None
        # SYNC_MASTER: the sends waiting for a slave's ack (None otherwise: no cost on sends)
        self.transfer: GroupTransfer | None = (
            GroupTransfer(self, config.sync_flush_timeout)
            if config.broker_role == "SYNC_MASTER" else None)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        except OSError as e:
            # haListenPort defaults to listenPort + 1, which another server may hold on a
            # broker that has no slaves (``rocketlite start``): the broker serves on. An error
            # when slaves are expected (the port set, or SYNC_MASTER), a warning otherwise.
            expected = self.config.ha_listen_port >= 0 or self.transfer is not None
            log.log(logging.ERROR if expected else logging.WARNING,
                    "HA server cannot listen on %s:%d (%s): slaves cannot replicate from "
                    "this broker; set haListenPort", self.host, self.port, e)
            return
        self.port = self._server.sockets[0].getsockname()[1]
        self.store.on_append = self._appended
        log.info("HA server listening on %s:%d for slaves", self.host, self.port)

    async def close(self) -> None:
        self.store.on_append = None
        if self._server is not None:
            self._server.close()
        tasks = list(self._slaves.values())
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for _, _, fut in waiters:
            fut.cancel()
        if self.transfer is not None:
            self.transfer.close()

    # -- what SYNC_MASTER and haStatus read -------------------------------------------------

    @property
    def slave_connected(self) -> bool:
        return bool(self._slaves)

    def wait_for_ack(self, offset: int) -> concurrent.futures.Future[None]:
        """A future resolved when any slave has acked ``offset`` (its max offset reached it);
        cancelled when the server closes. Callable from any thread."""
        fut: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._lock:
            if self.max_acked >= offset:
                fut.set_result(None)
            else:
                heapq.heappush(self._waiters, (offset, next(self._seq), fut))
        return fut

    def count_only(self, peers: frozenset[str] | None) -> None:
        """Count the acks of the connections from ``peers`` only (None: of every connection).
        Controller mode: only SyncStateSet members may be elected, so an append held by a
        slave outside the set only is not safe yet. Acks already counted stay counted; a
        connection counted from now on has its last ack taken at once."""
        self.counted = peers
        for s in list(self._slaves):
            if s.acked >= 0 and (peers is None or s.address in peers):
                self._acked(s.acked)

    def status(self) -> MasterStatus:
        top = self.store.commitlog.max_offset
        now = now_ms()
        return MasterStatus(top, [
            SlaveStatus(s.address, s.acked, top - s.acked if s.acked >= 0 else top,
                        s.last_report_ms, s.lag_ms(top, now),
                        s.start if s.start is not None else -1)
            for s in self._slaves
        ])

    # -- connections ---------------------------------------------------------------------

    def _appended(self) -> None:
        """``MessageStore.on_append``, on the appending thread: wake waiting connections."""
        if self._idle and self._loop is not None:
            self._idle = False
            with contextlib.suppress(RuntimeError):  # the loop is closing
                self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for s in self._slaves:
            s.wake.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        slave = _Slave(address)
        task = asyncio.current_task()
        assert task is not None
        self._slaves[slave] = task
        log.info("HA: slave %s connected", address)
        reading = asyncio.create_task(self._read_reports(slave, reader), name="ha-reports")
        writing = asyncio.create_task(self._transfer(slave, writer), name="ha-transfer")
        try:
            await asyncio.wait((reading, writing), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # the server closes: this connection's task ends here (a cancelled handler task is
            # logged by asyncio.start_server's callback as an error in 3.11)
            pass
        finally:
            for t in (reading, writing):
                t.cancel()
            await asyncio.wait((reading, writing))
            for t in (reading, writing):
                if not t.cancelled() and (e := t.exception()) is not None:
                    log.warning("HA: slave %s: %s", address, e)
            del self._slaves[slave]
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            log.info("HA: slave %s disconnected (acked %d)", address, slave.acked)

    async def _read_reports(self, slave: _Slave, reader: asyncio.StreamReader) -> None:
        quiet = self.config.ha_housekeeping_interval / 1000
        while True:
            try:
                async with asyncio.timeout(quiet):
                    data = await reader.readexactly(ha.REPORT_SIZE)
            except TimeoutError:
                log.warning("HA: slave %s sent no report for %d ms; closing", slave.address,
                            self.config.ha_housekeeping_interval)
                return
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            try:
                offset = ha.decode_report(data)
            except FormatError as e:
                log.warning("HA: slave %s: %s; closing", slave.address, e)
                return
            slave.acked = offset
            slave.last_report_ms = now_ms()
            slave.note_report(offset, self.store.commitlog.max_offset, slave.last_report_ms)
            if slave.start is None:
                slave.start = self._start_offset(slave, offset)
                slave.wake.set()
            if self.counted is None or slave.address in self.counted:
                self._acked(offset)

    def _start_offset(self, slave: _Slave, reported: int) -> int:
        cl = self.store.commitlog
        top, low = cl.max_offset, cl.min_offset
        if reported > top:
            log.warning("HA: slave %s is at %d, beyond the master's max offset %d: it starts "
                        "there and truncates its log", slave.address, reported, top)
            return top
        if reported == 0 and low > 0:
            return low
        return reported

    def _acked(self, offset: int) -> None:
        done: list[concurrent.futures.Future[None]] = []
        with self._lock:
            if offset <= self.max_acked:
                return
            self.max_acked = offset
            while self._waiters and self._waiters[0][0] <= offset:
                done.append(heapq.heappop(self._waiters)[2])
        for fut in done:
            if not fut.done():
                fut.set_result(None)
        if self.transfer is not None:
            self.transfer.acked(offset)

    async def _transfer(self, slave: _Slave, writer: asyncio.StreamWriter) -> None:
        while slave.start is None:
            slave.wake.clear()
            await slave.wake.wait()
        nxt = slave.start
        batch = self.config.ha_transfer_batch_size
        beat = self.config.ha_send_heartbeat_interval / 1000
        # Under the transient store pool appends become readable when committed, which does
        # not call on_append: look again at least this often.
        poll = 0.2 if self.config.transient_store_pool_enable else beat
        store = self.store
        last_write = float("-inf")  # the first idle moment sends a heartbeat at once
        while True:
            data = store.read_commitlog(nxt, batch)
            if data == b"":
                slave.wake.clear()
                self._idle = True
                data = store.read_commitlog(nxt, batch)  # an append may have come meanwhile
            if data is None:
                log.error("HA: slave %s asks for CommitLog offset %d, which the master no longer "
                          "has (its log starts at %d): the slave needs a new store", slave.address,
                          nxt, store.commitlog.min_offset)
                return
            if data:
                writer.write(ha.encode_transfer_header(nxt, len(data)))
                writer.write(data)
                nxt += len(data)
                await writer.drain()
                last_write = time.monotonic()
                continue
            now = time.monotonic()
            if now - last_write >= beat:
                writer.write(ha.encode_transfer_header(nxt, 0))
                await writer.drain()
                last_write = now
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(poll, max(0.0, last_write + beat - now))):
                    await slave.wake.wait()
