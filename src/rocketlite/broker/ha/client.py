"""The slave's side of 4.x replication (Java's ``HAService.HAClient``): connect to the master's
``haMasterAddress``, report the CommitLog max offset (at connect, after each applied frame and
every ``haSendHeartbeatInterval``), append each frame's bytes at exactly the slave's max offset.

Divergence (see ``server``): a frame below the slave's max offset truncates the slave's log to
its phyOffset first; one above it is a protocol error (the connection closes and the slave
reconnects), except that an empty slave takes a first frame at any segment boundary. A master
silent for ``haHousekeepingInterval`` (it sends heartbeats every ``haSendHeartbeatInterval``), a
closed connection or an unreachable master: reconnect after 0.5 s, doubling to 5 s while it fails.

The master's address is ``haMasterAddress`` or, without it, the ``haServerAddr`` the NameServer
answers to the slave's registration (the broker calls ``update_master_address``): an empty
address waits for it, and a new one closes the connection to the old master and connects there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from rocketlite.common.errors import FormatError, StoreError
from rocketlite.formats import ha
from rocketlite.store.config import StoreConfig
from rocketlite.store.message_store import MessageStore

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 5.0


class HAProtocolError(FormatError):
    """A frame the slave cannot apply (an offset beyond its log)."""


@dataclass(frozen=True, slots=True)
class SlaveStatusView:
    master_address: str
    connected: bool
    master_offset: int  # the end of the master's last frame (its max offset as last heard)
    max_offset: int  # this slave's CommitLog max offset
    last_read_ms: int  # wall-clock ms of the last frame (0: none yet)


class HAClient:
    def __init__(self, store: MessageStore, config: StoreConfig, master_address: str) -> None:
        self.store = store
        self.config = config
        self.master_address = master_address
        self.connected = False
        self.master_offset = -1
        self.last_read_ms = 0
        self.truncations = 0
        # this end of the HA connection, "host:port" ("" while not connected): the master sees
        # it as the connection's peer address (controller mode publishes it; see ``role``)
        self.local_address = ""
        self._task: asyncio.Task[None] | None = None
        self._started = False

    async def start(self) -> None:
        self._started = True
        if self.master_address and self._task is None:
            self._task = asyncio.create_task(self._run(), name="ha-client")

    async def close(self) -> None:
        self._started = False
        await self._stop_task()

    async def update_master_address(self, address: str) -> None:
        """Replicate from ``address`` from now on (the master's HA address as the NameServer
        knows it); a no-op when it is the current one."""
        if address == self.master_address:
            return
        log.info("HA: master address %s (was %s)", address, self.master_address or "unknown")
        started = self._started
        await self._stop_task()
        self.master_address = address
        if started:
            await self.start()

    async def _stop_task(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def status(self) -> SlaveStatusView:
        return SlaveStatusView(self.master_address, self.connected, self.master_offset,
                               self.store.commitlog.max_offset, self.last_read_ms)

    async def _run(self) -> None:
        host, _, port = self.master_address.rpartition(":")
        host = host.strip("[]")
        retry = RETRY_FIRST_S
        failures = 0
        while True:
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
            except OSError as e:
                failures += 1
                if failures == 1 or failures % 60 == 0:
                    log.warning("HA: cannot connect to master %s: %s (retrying)",
                                self.master_address, e)
                await asyncio.sleep(retry)
                retry = min(retry * 2, RETRY_MAX_S)
                continue
            failures = 0
            self.connected = True
            local = writer.get_extra_info("sockname")
            self.local_address = f"{local[0]}:{local[1]}" if isinstance(local, tuple) else ""
            log.info("HA: connected to master %s at offset %d", self.master_address,
                     self.store.commitlog.max_offset)
            try:
                await self._session(reader, writer)
                retry = RETRY_FIRST_S
            except (OSError, asyncio.IncompleteReadError, FormatError, StoreError,
                    TimeoutError) as e:
                log.warning("HA: connection to master %s closed: %s", self.master_address,
                            str(e) or type(e).__name__)
            finally:
                self.connected = False
                self.local_address = ""
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
            await asyncio.sleep(retry)
            retry = min(retry * 2, RETRY_MAX_S)

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        store = self.store
        writer.write(ha.encode_report(store.commitlog.max_offset))
        reporter = asyncio.create_task(self._report_loop(writer), name="ha-report")
        quiet = self.config.ha_housekeeping_interval / 1000
        max_body = self.config.mapped_file_size_commit_log
        try:
            while True:
                async with asyncio.timeout(quiet):
                    phy, size = ha.decode_transfer_header(
                        await reader.readexactly(ha.TRANSFER_HEADER_SIZE), max_body)
                    body = await reader.readexactly(size) if size else b""
                self.last_read_ms = time.time_ns() // 1_000_000
                self.master_offset = phy + size
                if self._apply(phy, body):
                    writer.write(ha.encode_report(store.commitlog.max_offset))
                    await writer.drain()
                if reporter.done():
                    reporter.result()  # raises what ended it
                    return
        finally:
            reporter.cancel()
            # asyncio.wait, not ``await reporter`` under suppress(CancelledError): that would
            # also swallow a cancel of this task (close() during a session's end), and the
            # reconnect loop would go on after the broker stopped
            await asyncio.wait((reporter,))
            if not reporter.cancelled():
                reporter.exception()  # retrieved: a failed write shows as the session's end

    def _apply(self, phy: int, body: bytes) -> bool:
        """Apply one frame; True if the log changed. ``HAProtocolError`` for a gap."""
        cl = self.store.commitlog
        mine = cl.max_offset
        if phy < mine:
            self.truncations += 1
            self.store.truncate_commitlog(phy)
        elif phy > mine and not (not cl.files.files
                                 and phy % self.config.mapped_file_size_commit_log == 0):
            raise HAProtocolError(f"the master sent CommitLog offset {phy}, beyond this slave's "
                                  f"max offset {mine}")
        if body:
            self.store.append_raw(phy, body)
        return bool(body) or phy < mine

    async def _report_loop(self, writer: asyncio.StreamWriter) -> None:
        beat = self.config.ha_send_heartbeat_interval / 1000
        while True:
            await asyncio.sleep(beat)
            writer.write(ha.encode_report(self.store.commitlog.max_offset))
            await writer.drain()
