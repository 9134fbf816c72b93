"""``listen``: a server's port, plain (``tlsServerMode=disabled``: asyncio's ``create_server``, as
before) or with TLS through ``SniffingListener``.

``SniffingListener`` (RocketMQ's ``TlsModeHandler``) accepts each connection itself and peeks at
its first byte without consuming it (``MSG_PEEK``): a TLS handshake record (0x16) gets the TLS
transport (``connect_accepted_socket`` with the server's context: the handshake reads the bytes
peeked), anything else the plain transport in ``permissive`` mode, or is refused in
``enforcing`` mode: logged once per peer host, and answered by the ``refuse`` protocol when the
caller gives one (the Remoting server answers the first request with an error that names TLS, so
the client's error says why) or closed. Either way the connection's protocol is the one the plain
server would run, on asyncio's own transports: no copy per frame is added to the plain path.

A failed handshake (an untrusted client certificate, none when mutual TLS requires one, a
timeout) is logged once per peer host and closes the connection.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Protocol

from rocketlite.remoting.limits import PeerLog
from rocketlite.remoting.tls import TLS_HANDSHAKE_RECORD, TlsMode, TlsServerConfig

log = logging.getLogger(__name__)

ProtocolFactory = Callable[[], asyncio.BaseProtocol]
FIRST_BYTE_TIMEOUT_S = 120.0
"""How long a new connection may stay silent before its first byte tells TLS from plain."""
ACCEPT_RETRY_S = 0.1  # after an accept failure such as EMFILE


class Listening(Protocol):
    """What a server keeps of its port: asyncio's ``Server`` or a ``SniffingListener``."""

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


async def listen(factory: ProtocolFactory, host: str, port: int, tls: TlsServerConfig | None, *,
                 name: str, peer_log: PeerLog, refuse: ProtocolFactory | None = None,
                 alpn: list[str] | None = None) -> tuple[Listening, int]:
    """Serve ``factory``'s protocol on ``host:port`` (0: a free port) as ``tls`` says; returns the
    listener and the bound port."""
    loop = asyncio.get_running_loop()
    if tls is None or not tls.enabled:
        server = await loop.create_server(factory, host, port, reuse_address=True, backlog=1024)
        return server, int(server.sockets[0].getsockname()[1])
    sniffing = SniffingListener(factory, tls, name=name, peer_log=peer_log, refuse=refuse,
                                alpn=alpn)
    return sniffing, sniffing.start(host, port)


class SniffingListener:
    """One port for TLS and, in permissive mode, plain connections (module doc)."""

    def __init__(self, factory: ProtocolFactory, tls: TlsServerConfig, *, name: str,
                 peer_log: PeerLog, refuse: ProtocolFactory | None = None,
                 alpn: list[str] | None = None) -> None:
        self.factory = factory
        self.tls = tls
        self.context = tls.context(alpn)  # a bad file fails here, before the port is bound
        self.name = name
        self.peer_log = peer_log
        self.refuse = refuse
        self.first_byte_timeout_s = FIRST_BYTE_TIMEOUT_S
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    def start(self, host: str, port: int) -> int:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=1024)
        sock.setblocking(False)
        self._sock = sock
        self._accepting = asyncio.get_running_loop().create_task(
            self._accept_loop(sock), name=f"{self.name}-accept")
        return int(sock.getsockname()[1])

    async def _accept_loop(self, lsock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, addr = await loop.sock_accept(lsock)
            except OSError as e:
                if e.errno in (errno.EBADF, errno.EINVAL):  # the listener was closed
                    return
                log.warning("%s: accept failed: %s", self.name, e)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            task = loop.create_task(self._serve(sock, addr))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _serve(self, sock: socket.socket, addr: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        ip = str(addr[0])
        peer = f"{ip}:{addr[1]}"
        try:
            sock.setblocking(False)  # (the peek must never wait)
            first = await self._first_byte(sock)
            if not first:
                sock.close()
            elif first[0] == TLS_HANDSHAKE_RECORD:
                try:
                    await loop.connect_accepted_socket(
                        self.factory, sock, ssl=self.context,
                        ssl_handshake_timeout=self.tls.handshake_timeout_s)
                except (OSError, TimeoutError) as e:
                    sock.close()
                    self.peer_log.warning(ip, "%s: TLS handshake with %s failed: %s", self.name,
                                          peer, _reason(e))
            elif self.tls.mode is TlsMode.PERMISSIVE:
                await loop.connect_accepted_socket(self.factory, sock)
            else:
                self.peer_log.warning(ip, "%s: refused a plain (non-TLS) connection from %s: "
                                      "tlsServerMode=enforcing accepts TLS only", self.name, peer)
                if self.refuse is None:
                    sock.close()
                else:
                    await loop.connect_accepted_socket(self.refuse, sock)
        except (OSError, TimeoutError) as e:
            sock.close()
            log.debug("%s: connection from %s dropped before it was served: %s", self.name, peer, e)
        except BaseException:
            sock.close()
            raise

    async def _first_byte(self, sock: socket.socket) -> bytes:
        """The connection's first byte, left in the socket for whoever reads it next; b"" when
        the peer closed first. TimeoutError after ``first_byte_timeout_s`` of silence."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.first_byte_timeout_s):
            while True:
                try:
                    return sock.recv(1, socket.MSG_PEEK)
                except BlockingIOError:
                    pass
                except ConnectionError:
                    return b""
                readable: asyncio.Future[None] = loop.create_future()
                fd = sock.fileno()
                loop.add_reader(fd, _set_once, readable)
                try:
                    await readable
                finally:
                    loop.remove_reader(fd)

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        if self._sock is not None:
            self._sock.close()
        for task in list(self._pending):
            task.cancel()

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._accepting, *self._pending) if t is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._accepting = None


def _set_once(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _reason(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError):
        return str(e.reason or e)
    if isinstance(e, TimeoutError):
        return "no complete handshake in time"
    return str(e) or type(e).__name__
