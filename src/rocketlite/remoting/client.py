"""RemotingClient: connections by address ("host:port"), opened on first use and reused, with a
connect timeout; requests with timeouts; oneway sends. Broker-initiated requests (e.g.
NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) go to the optional handler; ``on_close``
hears the address of each connection that closes (however it closed: by the peer, by ``drop``,
by ``close``), e.g. for a broker to register again at once on a new one.

With ``tls`` (``True``: verified against the system's CAs; or an ``ssl.SSLContext``) every
connection is TLS, its certificate checked for the host of the address; a failed handshake is a
``RemotingError`` naming the problem (``tls.handshake_error``)."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable

from rocketlite.common.errors import RemotingError
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import Connection, RequestHandler, Signer
from rocketlite.remoting.limits import DEFAULT_MAX_FRAME, ConnectionLimits
from rocketlite.remoting.tls import TlsOption, client_context, handshake_error

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
        tls: TlsOption = None,
        signer: Signer | None = None,
    ) -> None:
        self.handler = handler
        self.ssl = client_context(tls)
        self.signer = signer  # signs every request on our connections (ACL credentials)
        self.on_close = on_close
        self.connect_timeout = connect_timeout
        # The client keeps reading whatever it writes (the replies it reads are what unblock a
        # broker that stopped reading it); it never closes a connection for being idle.
        self.limits = ConnectionLimits.for_client(max_frame)
        self._conns: dict[str, Connection] = {}
        # TLS connections not yet answered: a server that refuses the client's certificate (or
        # its lack of one) drops the connection only after the handshake (TLS 1.3)
        self._unproven: set[Connection] = set()
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
            tls = self.ssl
            handshaking = False
            try:
                async with asyncio.timeout(self.connect_timeout):
                    if tls is None:
                        _, new = await loop.create_connection(
                            lambda: Connection(self.handler, limits=self.limits,
                                               on_close=self._closed_listener(addr)), host, port)
                    else:
                        sock = await self._tcp(host, port)
                        handshaking = True
                        _, new = await loop.create_connection(
                            lambda: Connection(self.handler, limits=self.limits,
                                               on_close=self._closed_listener(addr)),
                            sock=sock, ssl=tls, server_hostname=host,
                            ssl_handshake_timeout=self.connect_timeout)
            except TimeoutError as e:
                what = "complete the TLS handshake with" if handshaking else "connect to"
                raise RemotingError(
                    f"cannot {what} {addr} within {self.connect_timeout} s") from e
            except (ssl.SSLError, ConnectionError, EOFError) as e:
                if handshaking:
                    raise RemotingError(handshake_error(addr, e)) from e
                raise RemotingError(f"cannot connect to {addr}: {e}") from e
            except OSError as e:
                raise RemotingError(f"cannot connect to {addr}: {e}") from e
            new.signer = self.signer
            self._conns[addr] = new
            if tls is not None:  # (the closed ones are forgotten here: the set stays bounded)
                self._unproven = {c for c in self._unproven if c.is_open}
                self._unproven.add(new)
            return new

    @staticmethod
    async def _tcp(host: str, port: int) -> socket.socket:
        """A connected TCP socket (the TLS handshake then runs on it: its failures are told apart
        from the connect's)."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        err: OSError | None = None
        for family, type_, proto, _, sockaddr in infos:
            sock = socket.socket(family, type_, proto)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, sockaddr)
                return sock
            except OSError as e:
                sock.close()
                err = e
            except BaseException:
                sock.close()
                raise
        raise err or OSError(f"no address for {host}")

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
        if not self._unproven:
            return await conn.request(cmd, timeout)
        try:
            reply = await conn.request(cmd, timeout)
        except RemotingError as e:
            if conn in self._unproven and not conn.is_open:
                self._unproven.discard(conn)
                raise RemotingError(
                    f"{e}: {addr} dropped the connection right after the TLS handshake; it may "
                    "require a client certificate (mutual TLS) that was not sent or not trusted"
                ) from e
            raise
        self._unproven.discard(conn)
        return reply

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
