"""Ports for the servers tests start (not a test module).

A port the kernel hands out for ``bind(0)`` comes from its ephemeral range, the same range it
draws from for every outgoing connection's local port: between the test picking it and the
server binding it moments later, any process's outgoing connection (the broker's own
registration with its NameServer, a client of an earlier test) may take it, and the server fails
with "address already in use". So the ports come from below that range instead, where only a
listener can hold them, and a port is given at most once per test session, so two servers of one
test (or of two tests) never get the same one.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 15000  # above the defaults the servers and ``cluster up`` use (9876.., 10911, 8081, ..)
_given: set[int] = set()


def _ephemeral() -> tuple[int, int]:
    try:
        low, high = (int(x) for x in
                     Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _span(count: int) -> tuple[int, int]:
    """The first and last base port to draw from for ``count`` consecutive ports."""
    low, high = _ephemeral()
    if low - LOWEST >= 2000 + count:
        return LOWEST, low - count
    return max(high + 1, LOWEST), 65535 - count  # a system whose ephemeral range starts low


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))  # a wildcard bind also meets 127.0.0.1 ones
        except OSError:
            return False
    return True


def free_base(count: int) -> int:
    """A base port with ``count`` consecutive ports free now, none given before this session."""
    first, last = _span(count)
    for _ in range(500):
        base = random.randint(first, last)
        ports = range(base, base + count)
        if _given.isdisjoint(ports) and all(_bindable(p) for p in ports):
            _given.update(ports)
            return base
    raise AssertionError(f"no {count} consecutive free ports in {first}..{last + count - 1}")


def free_port() -> int:
    """A port nothing listens on now, outside the kernel's ephemeral range, not given before."""
    return free_base(1)


def side_ports() -> dict[str, str]:
    """broker.conf keys for a test broker's side servers: ``/metrics`` on a port of its own (so
    the broker still counts), no dashboard. Their defaults (5557, 8082) are one per machine: a
    second broker of the test, or any other process there, would hold them, and the broker serve
    without them (only a warning), so a test that reads them would read another's."""
    return {"metricsPort": str(free_port()), "dashboardPort": "0"}
