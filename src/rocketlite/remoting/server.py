"""RemotingServer: accepts connections and hands each request to the processor registered for its
code (RocketMQ's ``NettyRemotingServer`` with its processor table).

A processor is any callable ``(connection, request) -> response | awaitable | None``; synchronous
ones answer inline (the cheap path for hot requests), coroutines run as tasks, bounded per
connection. A processor may also register a run handler: a connection then hands it consecutive
requests of its codes read together in one call (the hot sends: per-run instead of per-frame
work). Unknown codes get REQUEST_CODE_NOT_SUPPORTED with a remark naming the code.

Every connection gets the server's ``ConnectionLimits`` (write-buffer water marks with read
backpressure, in-flight bound, frame size), one ``FrameBudget`` for the partial frames of all of
them, and one ``PeerLog`` for warnings about bad peers. With ``max_idle_s`` a sweep (every tenth of
it, at most 5 s apart) closes connections with neither a read nor a write for that long (as
RocketMQ's IdleStateHandler with ``serverChannelMaxIdleTimeSeconds``), and aborts those whose
replies have waited above the write-buffer high mark for that long.

Connections beyond ``max_connections``, or beyond ``max_connections_per_address`` from one client
IP, are closed as soon as they are accepted (logged once per host and minute). Every crossing of
a limit is counted in ``counts`` (``LimitCounts``: the broker's
``rocketlite_limit_rejections_total``).

With ``tls`` (``TlsServerConfig``, not disabled) the port takes TLS connections, and plain ones
too in permissive mode (``tls_listen``); in enforcing mode a plain client's first request is
answered SYSTEM_ERROR with a remark that the port needs TLS (``PlainRefusal``), then closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.remoting.connection import SERVER_LIMITS, Connection, RunHandler
from rocketlite.remoting.gated_runs import Gate, GatedRuns
from rocketlite.remoting.limits import ConnectionLimits, FrameBudget, LimitCounts, PeerLog
from rocketlite.remoting.tls import TlsServerConfig
from rocketlite.remoting.tls_listen import Listening, listen

log = logging.getLogger(__name__)

Processor = Callable[
    [Connection, RemotingCommand], RemotingCommand | Awaitable[RemotingCommand | None] | None
]


class RemotingServer:
    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = 0,
        *,
        name: str = "remoting",
        limits: ConnectionLimits = SERVER_LIMITS,
        tls: TlsServerConfig | None = None,
    ) -> None:
        self.host = host
        self.tls = tls
        self.port = port
        self.name = name
        self.limits = limits
        self.processors: dict[int, Processor] = {}
        self.run_processors: dict[int, RunHandler] = {}  # shared with every connection
        self.connections: set[Connection] = set()
        self.per_address: dict[str, int] = {}  # admitted connections by client IP
        self.admitted = 0  # their sum: refused ones, closing, are not counted
        self.counts = LimitCounts()
        self.close_listeners: list[Callable[[Connection], None]] = []
        self.peer_log = PeerLog(log)  # bad frames, rate-limited per peer host
        # connections refused: over a connection limit, plain ones on an enforcing port, failed
        # TLS handshakes: once per peer host and minute
        self.refused_log = PeerLog(log, "refused connections", first=1)
        self.frame_budget = (FrameBudget(limits.buffered_frames_max, self.peer_log)
                             if limits.buffered_frames_max else None)
        # Checks each request before its processor (``acl_gate.AclGate``): None lets it run, a
        # response answers it instead (run handlers get only the requests it lets run).
        self.gate: Gate | None = None
        self._server: Listening | None = None
        self._sweeper: asyncio.TimerHandle | None = None

    def register(self, code: int, processor: Processor, *, run: RunHandler | None = None) -> None:
        """``processor`` answers requests of ``code``; with ``run``, consecutive requests of the
        codes registered with that same ``run`` go to it in one call (it answers as
        ``processor`` would, handing back to it, through ``Connection.handle_request``, the
        requests it does not take). Registering again replaces both."""
        code = int(code)
        self.processors[code] = processor
        if run is None:
            self.run_processors.pop(code, None)
        else:
            self.run_processors[code] = run

    def _dispatch(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        processor = self.processors.get(cmd.code)
        if processor is None:
            return cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"{self.name}: request code {cmd.code} is not supported",
            )
        if self.gate is not None and (refused := self.gate(conn, cmd)) is not None:
            return refused
        return processor(conn, cmd)

    def _make_connection(self) -> Connection:
        conn = Connection(self._dispatch, limits=self.limits, on_close=self._closed,
                          peer_log=self.peer_log, frame_budget=self.frame_budget,
                          counts=self.counts, on_open=self._admit,
                          run_handlers=self.run_processors if self.gate is None
                          else GatedRuns(self.run_processors, self.gate))
        self.connections.add(conn)
        return conn

    def _admit(self, conn: Connection) -> bool:
        """Whether ``conn`` (its peer known) may stay: within both connection limits."""
        limits = self.limits
        ip = conn.peer_ip
        n = self.per_address.get(ip, 0)
        if self.admitted >= limits.max_connections:
            limit, what = "connections", f"maxConnections ({limits.max_connections}) connections"
        elif n >= limits.max_connections_per_address:
            limit = "connections_per_address"
            what = (f"maxConnectionsPerAddress ({limits.max_connections_per_address}) "
                    f"connections from {ip}")
        else:
            self.per_address[ip] = n + 1
            self.admitted += 1
            return True
        self.counts.hit(limit)
        self.refused_log.warning(ip, "%s: refused a connection from %s: %s are open", self.name,
                             conn.peer, what)
        return False

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if conn.admitted:
            ip = conn.peer_ip
            n = self.per_address.get(ip, 0) - 1
            if n > 0:
                self.per_address[ip] = n
            else:
                self.per_address.pop(ip, None)
            conn.admitted = False
            self.admitted -= 1
        for fn in self.close_listeners:
            try:
                fn(conn)
            except Exception:
                log.exception("%s: connection close listener failed", self.name)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server, self.port = await listen(
            self._make_connection, self.host, self.port, self.tls, name=self.name,
            peer_log=self.refused_log, refuse=lambda: PlainRefusal(self.name))
        mode = "" if self.tls is None else f" (TLS {self.tls.mode})"
        log.info("%s listening on %s:%d%s", self.name, self.host, self.port, mode)
        if self.limits.max_idle_s:
            self._sweeper = loop.call_later(self._sweep_interval, self._sweep)

    @property
    def _sweep_interval(self) -> float:
        return min(5.0, max(0.05, self.limits.max_idle_s / 10))

    def _sweep(self) -> None:
        """Close the connections idle, or stuck above the write-buffer high mark, too long."""
        max_idle = self.limits.max_idle_s
        now = time.monotonic()
        idle: list[Connection] = []
        for conn in list(self.connections):
            if not conn.is_open:  # closing already
                continue
            since = conn.blocked_since
            if since and now - since >= max_idle:
                self.peer_log.warning(
                    conn.peer_ip, "%s: closing connection from %s: its replies have waited unread "
                    "above the write-buffer high mark (%d bytes) for %.0f s", self.name, conn.peer,
                    self.limits.write_high, now - since)
                self.counts.hit("pending_bytes")
                conn.abort()
            elif now - conn.last_io >= max_idle:
                idle.append(conn)
                conn.close_idle()
        if idle:
            log.info("%s: closed %d connection(s) idle for %.0f s: %s%s", self.name, len(idle),
                     max_idle, idle[0].peer, ", ..." if len(idle) > 1 else "")
        self._sweeper = asyncio.get_running_loop().call_later(self._sweep_interval, self._sweep)

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        for conn in list(self.connections):
            await conn.wait_closed()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        self.peer_log.flush()
        self.refused_log.flush()


REFUSAL_MAX_FRAME = 1 << 20
REFUSAL_WAIT_S = 10.0


class PlainRefusal(asyncio.Protocol):
    """A plain connection to an enforcing port: its first request is answered SYSTEM_ERROR naming
    TLS (the client's error then says why), then the connection is closed; one that sends no
    whole frame within ``REFUSAL_WAIT_S`` (or a frame above ``REFUSAL_MAX_FRAME``) is closed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.decoder = FrameDecoder(REFUSAL_MAX_FRAME)
        self.transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        self._timer = asyncio.get_running_loop().call_later(REFUSAL_WAIT_S, transport.close)

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        try:
            items = self.decoder.feed(data)
        except Exception:  # noqa: BLE001 - a broken stream: nothing to answer
            transport.close()
            return
        for item in items:
            if isinstance(item, RemotingCommand) and not item.flag & 1:
                if not item.is_oneway:
                    reply = item.response(
                        ResponseCode.SYSTEM_ERROR,
                        f"{self.name}: this port accepts TLS connections only "
                        "(tlsServerMode=enforcing): connect with TLS")
                    transport.write(reply.encode())
                transport.close()
                return

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
