"""MetricsServer: ``GET /metrics`` in Prometheus' text format, served on the broker's event loop.

Why on the loop and not ``prometheus_client.start_http_server`` (a thread): the collector reads
the broker's tables (offsets, clients, queues) that the loop changes; on the loop it reads them
between two events with no lock and no "dict changed size" race, and the hot path never
contends with a second Python thread for the GIL between scrapes. A scrape costs the loop the
collector's time (about a millisecond for a few hundred queues), once per scrape interval.

Minimal HTTP/1.1: one request per connection (``Connection: close``), a request head of at most
16 KiB read within 10 s; ``/metrics`` (and ``/``) answer 200, any other path 404, any other
method 405.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

__all__ = ["MetricsServer"]

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024
READ_TIMEOUT_S = 10.0


class MetricsServer:
    """Serves ``registry`` on ``host:port`` (port 0: a free one, see ``port`` once started)."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port,
                                                  reuse_address=True, limit=MAX_HEAD)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            method, _, rest = head.partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
            if method not in (b"GET", b"HEAD"):
                status, body, ctype = "405 Method Not Allowed", b"GET only\n", "text/plain"
            elif path in (b"/metrics", b"/"):
                status, ctype = "200 OK", CONTENT_TYPE_LATEST
                body = generate_latest(self.registry)
            else:
                status, body, ctype = "404 Not Found", b"see /metrics\n", "text/plain"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
            if method != b"HEAD":
                writer.write(body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError):
            pass  # a slow, cut or oversized request: nothing to answer
        except Exception:
            log.exception("metrics: answering a scrape failed")
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
