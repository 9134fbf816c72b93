"""RemotingClient: connections by address ("host:port"), opened on first use and reused, with a
connect timeout; requests with timeouts; oneway sends. Broker-initiated requests (e.g.
NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) go to the optional handler; ``on_close``
hears the address of each connection that closes (however it closed: by the peer, by ``drop``,
by ``close``), e.g. for a broker to register again at once on a new one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocketlite.common.errors import RemotingError
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection, RequestHandler, Signer
from rocketlite.remoting.limits import DEFAULT_MAX_FRAME, ConnectionLimits

log = logging.getLogger(__name__)


def split_address(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise RemotingError(f"address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    def __init__(
        self,
        handler: RequestHandler | None = None,
        *,
        connect_timeout: float = 3.0,
        max_frame: int = DEFAULT_MAX_FRAME,
        on_close: Callable[[str], None] | None = None,
        signer: Signer | None = None,
    ) -> None:
        self.handler = handler
        self.signer = signer  # signs every request on our connections (ACL credentials)
        self.on_close = on_close
        self.connect_timeout = connect_timeout
        # The client keeps reading whatever it writes (the replies it reads are what unblock a
        # broker that stopped reading it); it never closes a connection for being idle.
        self.limits = ConnectionLimits.for_client(max_frame)
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    def cached(self, addr: str) -> Connection | None:
        """The open connection to ``addr``, if there is one (no connect, no await)."""
        conn = self._conns.get(addr)
        return conn if conn is not None and conn.is_open else None

    async def connection(self, addr: str) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and conn.is_open:
            return conn
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is not None and conn.is_open:
                return conn
            if self._closed:
                raise RemotingError("the client is closed")
            host, port = split_address(addr)
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(self.connect_timeout):
                    _, new = await loop.create_connection(
                        lambda: Connection(self.handler, limits=self.limits,
                                           on_close=self._closed_listener(addr)), host, port
                    )
            except TimeoutError as e:
                raise RemotingError(f"cannot connect to {addr} within {self.connect_timeout} s") from e
            except OSError as e:
                raise RemotingError(f"cannot connect to {addr}: {e}") from e
            new.signer = self.signer
            self._conns[addr] = new
            return new

    def _closed_listener(self, addr: str) -> Callable[[Connection], None] | None:
        on_close = self.on_close
        if on_close is None:
            return None

        def closed(conn: Connection) -> None:
            try:
                on_close(addr)
            except Exception:
                log.exception("the close listener of the connection to %s failed", addr)

        return closed

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout: float = 3.0  # noqa: ASYNC109 - Remoting API
    ) -> RemotingCommand:
        conn = await self.connection(addr)
        return await conn.request(cmd, timeout)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        conn = await self.connection(addr)
        conn.send_oneway(cmd)

    def drop(self, addr: str) -> None:
        """Close the connection to ``addr`` (e.g. after the peer stopped answering)."""
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        self._closed = True
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()
        for conn in conns:
            await conn.wait_closed()
