"""RemotingServer: accepts connections and hands each request to the processor registered for its
code (RocketMQ's ``NettyRemotingServer`` with its processor table).

A processor is any callable ``(connection, request) -> response | awaitable | None``; synchronous
ones answer inline (the cheap path for hot requests), coroutines run as tasks, bounded per
connection. Unknown codes get REQUEST_CODE_NOT_SUPPORTED with a remark naming the code.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.connection import (
    DEFAULT_MAX_FRAME,
    DEFAULT_MAX_INFLIGHT,
    Connection,
)
from rocketlite.remoting.limits import PeerLog

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
        max_frame: int = DEFAULT_MAX_FRAME,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> None:
        self.host = host
        self.port = port
        self.name = name
        self.max_frame = max_frame
        self.max_inflight = max_inflight
        self.processors: dict[int, Processor] = {}
        self.connections: set[Connection] = set()
        self.close_listeners: list[Callable[[Connection], None]] = []
        self.peer_log = PeerLog(log)  # bad frames, rate-limited per peer host
        self._server: asyncio.Server | None = None

    def register(self, code: int, processor: Processor) -> None:
        self.processors[int(code)] = processor

    def _dispatch(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        processor = self.processors.get(cmd.code)
        if processor is None:
            return cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"{self.name}: request code {cmd.code} is not supported",
            )
        return processor(conn, cmd)

    def _make_connection(self) -> Connection:
        conn = Connection(self._dispatch, max_frame=self.max_frame,
                          max_inflight=self.max_inflight, on_close=self._closed,
                          peer_log=self.peer_log)
        self.connections.add(conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        for fn in self.close_listeners:
            try:
                fn(conn)
            except Exception:
                log.exception("%s: connection close listener failed", self.name)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._make_connection, self.host, self.port, reuse_address=True, backlog=1024
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info("%s listening on %s:%d", self.name, self.host, self.port)

    async def close(self) -> None:
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
