"""What a hostile or broken peer can cost a broker (issue 17, part 3), on a real broker process
(``rocketlite start``) whose memory is read from /proc/PID/status:

* a peer that sends 40,000 PULL_MESSAGE requests and never reads its replies: the broker stops
  reading from it once its replies pass the write-buffer high mark, so its RSS grows by less than
  ``SLOW_READER_RSS_BOUND``; other clients are served meanwhile, and the connection is closed once
  it has been stuck for ``serverChannelMaxIdleTimeSeconds``;
* 3,000 idle connections (from one address, maxConnectionsPerAddress raised to let them in) are
  held, and closed after ``serverChannelMaxIdleTimeSeconds``;
* peers that send half of a 16 MiB frame and stall: the partial frames buffered across all
  connections stay under ``maxBufferedFrameBytes`` (the largest holders are closed), and the
  stalled ones are closed once idle.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import struct
import time
from pathlib import Path

import pytest

from brokerhelp import conf_broker, pull_request, send_request
from rocketlite.protocol.codes import ResponseCode
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
SLOW_READER_RSS_BOUND = 64 * MiB
"""How much the broker's RSS may grow while one peer sends 40,000 pulls of 256 KiB replies and
reads none: the default high mark (4 MiB) plus one coalesced run of replies (16 x 256 KiB) plus
the requests of one read, with room for the allocator."""
REPRODUCTION_CAP = 1536 * MiB
"""Where the slow reader stops sending whatever happens (before the fix RSS grew without end)."""
TCP_ESTABLISHED, TCP_CLOSE, TCP_CLOSE_WAIT = 1, 7, 8  # tcpi_state: open, reset, peer's FIN


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def tcp_state(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


async def preload(addr: str, topic: str, n: int, size: int) -> None:
    client = RemotingClient()
    try:
        for i in range(n):
            r = await client.invoke(addr, send_request(topic, bytes([65 + i % 26]) * size, 0), 10)
            assert r.code == ResponseCode.SUCCESS, r.remark
        for _ in range(500):
            r = await client.invoke(addr, pull_request(topic, 0, 0), 10)
            if r.code == 0 and r.ext_fields["nextBeginOffset"] == str(n):
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the preloaded messages never became readable")
    finally:
        await client.close()


async def pull_once(addr: str, topic: str) -> int:
    client = RemotingClient()
    try:
        r = await client.invoke(addr, pull_request(topic, 0, 0), 5)
        return len(r.body)
    finally:
        await client.close()


def test_a_peer_that_never_reads_its_replies_cannot_take_the_brokers_memory(tmp_path: Path) -> None:
    stuck_s = 6
    with conf_broker(tmp_path, serverChannelMaxIdleTimeSeconds=str(stuck_s)) as (p, addr):
        asyncio.run(preload(addr, "Slow", 32, 8000))  # every pull answers 32 x 8 KB
        assert asyncio.run(pull_once(addr, "Slow")) > 250_000
        base = rss(p.proc.pid)
        one = pull_request("Slow", 0, 0).encode()
        requests = one * 40_000
        host, port = addr.split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        sock.setblocking(False)
        sent, peak, last_progress = 0, base, time.monotonic()
        try:
            while sent < len(requests) and time.monotonic() - last_progress < 2.0:
                try:
                    sent += sock.send(requests[sent : sent + 65536])
                    last_progress = time.monotonic()
                except BlockingIOError:
                    time.sleep(0.02)
                peak = max(peak, rss(p.proc.pid))
                if peak - base > REPRODUCTION_CAP:
                    break
            for _ in range(20):  # replies already produced settle
                peak = max(peak, rss(p.proc.pid))
                time.sleep(0.05)
            print(f"slow reader: sent {sent // len(one)} pulls, "
                  f"broker RSS {base / MiB:.0f} MB -> peak {peak / MiB:.0f} MB")
            assert peak - base < SLOW_READER_RSS_BOUND, f"RSS grew by {(peak - base) / MiB:.0f} MB"
            assert sent < len(requests)  # the broker stopped reading from it
            # everybody else is still served
            assert asyncio.run(pull_once(addr, "Slow")) > 250_000
            # stuck above the high mark for serverChannelMaxIdleTimeSeconds: closed (reset)
            deadline = time.monotonic() + stuck_s + 10
            while tcp_state(sock) != TCP_CLOSE and time.monotonic() < deadline:
                time.sleep(0.2)
            assert tcp_state(sock) == TCP_CLOSE
        finally:
            sock.close()
        time.sleep(0.5)
        after = rss(p.proc.pid)
        print(f"after the close: {after / MiB:.0f} MB")
        assert after - base < SLOW_READER_RSS_BOUND
        assert "write-buffer high mark" in p.log()
        assert p.stop() == 0, p.log()


def raise_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.fail(f"{need} descriptors needed, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def test_three_thousand_idle_connections_are_held_then_closed(tmp_path: Path) -> None:
    n, idle_s = 3000, 4
    raise_fd_limit(2 * n + 1024)  # ours and, inherited, the broker's
    # all from 127.0.0.1: above maxConnectionsPerAddress's default (test_abuse_limits crosses it)
    with conf_broker(tmp_path, serverChannelMaxIdleTimeSeconds=str(idle_s),
                     maxConnectionsPerAddress=str(n + 100)) as (p, addr):
        host, port = addr.split(":")
        base = rss(p.proc.pid)
        socks: list[socket.socket] = []
        try:
            started = time.monotonic()
            for _ in range(n):
                s = socket.create_connection((host, int(port)), 5)
                socks.append(s)
            opened = time.monotonic() - started
            assert asyncio.run(pull_once(addr, "Idle")) >= 0  # served with 3,000 open
            held = rss(p.proc.pid) - base
            print(f"{n} connections opened in {opened:.1f} s, broker RSS +{held / MiB:.0f} MB")
            assert all(tcp_state(s) == TCP_ESTABLISHED for s in socks[:: n // 30])  # still established
            deadline = started + idle_s + 15
            closed = 0
            while time.monotonic() < deadline:
                closed = sum(closed_by_broker(s) for s in socks)
                if closed == n:
                    break
                time.sleep(0.5)
            assert closed == n, f"{closed} of {n} idle connections closed"
            assert time.monotonic() - started >= idle_s
        finally:
            for s in socks:
                s.close()
        assert p.stop() == 0, p.log()


def closed_by_broker(s: socket.socket) -> bool:
    return tcp_state(s) in (TCP_CLOSE, TCP_CLOSE_WAIT)  # reset, or the broker's FIN


def test_peers_that_send_half_a_16_mib_frame_and_stall(tmp_path: Path) -> None:
    budget, idle_s, peers = 40 * MiB, 5, 8
    with conf_broker(tmp_path, serverChannelMaxIdleTimeSeconds=str(idle_s),
                maxBufferedFrameBytes=str(budget)) as (p, addr):
        host, port = addr.split(":")
        base = rss(p.proc.pid)
        half = struct.pack(">ii", 16 * MiB - 4, 100) + b"\0" * (8 * MiB - 8)
        socks = []
        try:
            for _ in range(peers):  # 8 x 8 MiB = 64 MiB asked of a 40 MiB budget
                s = socket.create_connection((host, int(port)), 5)
                s.sendall(half)
                socks.append(s)
            time.sleep(1.0)
            grown = rss(p.proc.pid) - base
            print(f"{peers} half frames of 8 MiB sent, broker RSS +{grown / MiB:.0f} MB")
            assert grown < budget + 24 * MiB
            shed = sum(closed_by_broker(s) for s in socks)
            assert shed >= peers - budget // (8 * MiB)  # the largest holders were closed
            assert shed < peers
            assert asyncio.run(pull_once(addr, "Half")) >= 0  # others are served
            deadline = time.monotonic() + idle_s + 10
            while time.monotonic() < deadline and not all(closed_by_broker(s) for s in socks):
                time.sleep(0.5)
            assert all(closed_by_broker(s) for s in socks)  # the stalled rest: closed once idle
        finally:
            for s in socks:
                s.close()
        assert "partial frame" in p.log()
        assert p.stop() == 0, p.log()
