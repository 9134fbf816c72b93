"""Frame fuzzing (issue 22's chaos suite): generated frames (``framegen``) at a running NameServer
and broker, each its own ``rocketlite`` process on loopback.

The broker first stores a few messages with write permission, is stopped, and runs the fuzz
read-only (``brokerPermission=4``, ``autoCreateTopicEnable=false``): nothing a frame does may add
a message or a topic (but a retry topic a valid heartbeat names), so the store must be the same
afterwards. Frames go in batches on one connection per target; each batch ends with a probe (the
broker: GET_MAX_OFFSET of the stored queue; the NameServer: the route of the stored topic) or a
stream-breaking ``Tail``. For each batch:

* every frame the codec reads as a request is answered (by its opaque; one whose header does not
  decode but names an opaque gets SYSTEM_ERROR), responses and oneway requests are not, and a
  frame without a readable opaque closes the connection (nothing after it in the batch is sent);
* the probe is answered within ``PROBE_TIMEOUT_S``, and correctly (no hang, the store intact);
* a stream-breaking tail gets the connection closed within ``PROBE_TIMEOUT_S``;

and every ``chunk`` batches both processes are alive and their RSS is sampled: it must stay
under the first sample plus ``RSS_SLACK``. At the end the broker is stopped cleanly and its store
is opened: the CommitLog's max offset and the topics are as before, and the stored messages read
back whole.

Not a test module: ``tests/chaos/test_fuzz_frames.py`` runs 20,000 frames, ``scripts/chaos_fuzz.py
frames`` a million.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from brokerhelp import (
    ServerProcess,
    broker_process,
    create_topic,
    decode_records,
    free_port,
    send_request,
)
from framegen import FrameSource, Tail, describe, expectation
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.protocol.headers import GetMaxOffsetRequestHeader, GetRouteInfoRequestHeader
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.config import StoreConfig
from rocketlite.store.message_store import MessageStore

TOPIC = "FuzzStored"
STORED = 20  # messages stored before the fuzz, in queue 0
BATCH = 48
PROBE_TIMEOUT_S = 10.0
RSS_SLACK = 256 << 20
PROBE_OPAQUE = 0x7FFF0000


class FrameFuzzFinding(AssertionError):
    """A crash, a hang, unbounded memory, an unanswered frame or a changed store."""


@dataclass(slots=True)
class Report:
    frames: int = 0
    batches: int = 0
    closes_expected: int = 0
    tails: Counter[str] = field(default_factory=Counter)
    replies: int = 0
    error_replies: int = 0
    per_target: Counter[str] = field(default_factory=Counter)
    rss: dict[str, list[int]] = field(default_factory=dict)
    seconds: float = 0.0

    def line(self) -> str:
        rss = {k: f"{min(v) >> 20}-{max(v) >> 20} MiB" for k, v in self.rss.items() if v}
        return (f"{self.frames} frames in {self.batches} batches ({dict(self.per_target)}), "
                f"{self.replies} replies ({self.error_replies} errors), "
                f"{self.closes_expected} closes for frames without an opaque, "
                f"tails {dict(self.tails)}, RSS {rss}, {self.seconds:.1f} s")


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise FrameFuzzFinding(f"process {pid} has no RSS: gone")


class Target:
    """One server: its process, address and probe."""

    def __init__(self, name: str, proc: ServerProcess, port: int, probe: RemotingCommand,
                 check: Callable[[RemotingCommand], str | None]) -> None:
        self.name, self.proc, self.port = name, proc, port
        probe.opaque = PROBE_OPAQUE
        self.probe = probe.encode()
        self.check = check
        self.sock: socket.socket | None = None
        self.decoder = FrameDecoder()

    def connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), 5)
            self.sock.settimeout(PROBE_TIMEOUT_S)
            self.decoder = FrameDecoder()
        return self.sock

    def drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def alive(self) -> None:
        if self.proc.proc.poll() is not None:
            raise FrameFuzzFinding(f"the {self.name} died (exit {self.proc.proc.returncode}); "
                                   f"log:\n{self.proc.log()}")


def _read_until(t: Target, want: Counter[int], polls: set[int], *, close: bool,
                report: Report, context: Callable[[], str]) -> None:
    """Read replies until the probe's (and every wanted opaque's) came, or, with ``close``, the
    server closed; a finding otherwise."""
    sock = t.sock
    assert sock is not None
    probe_seen = False
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while True:
        if not close and probe_seen and not +want:
            return
        if time.monotonic() > deadline:
            what = "to close the connection" if close else (
                "the probe" if not probe_seen else f"replies to opaques {sorted((+want).elements())[:10]}")
            raise FrameFuzzFinding(f"the {t.name} did not answer {what} within "
                                   f"{PROBE_TIMEOUT_S} s\n{context()}")
        try:
            data = sock.recv(1 << 16)
        except TimeoutError:
            continue
        except ConnectionResetError:
            data = b""
        if not data:
            if close:
                t.drop()
                return
            raise FrameFuzzFinding(f"the {t.name} closed a connection that sent nothing that "
                                   f"breaks the stream\n{context()}")
        for item in t.decoder.feed(data):
            if not isinstance(item, RemotingCommand) or not item.flag & 1:
                continue  # a request from the server (a client-facing notification)
            if item.opaque == PROBE_OPAQUE and not close:
                why = t.check(item)
                if why is not None:
                    raise FrameFuzzFinding(f"the {t.name}'s probe: {why}\n{context()}")
                probe_seen = True
                continue
            report.replies += 1
            report.error_replies += item.code != ResponseCode.SUCCESS
            if want[item.opaque] > 0:
                want[item.opaque] -= 1
            elif item.opaque not in polls:
                raise FrameFuzzFinding(f"the {t.name} answered opaque {item.opaque}, which no "
                                       f"frame of the batch asked for\n{context()}")


def run_batch(t: Target, src: FrameSource, report: Report, with_tail: bool) -> None:
    """One batch at ``t`` (see the module docstring)."""
    frames: list[bytes] = []
    want: Counter[int] = Counter()
    polls: set[int] = set()
    closing = False
    ender: bytes | None = None  # the batch's one frame without a readable opaque, sent last
    while len(frames) < BATCH:
        data = src.next_frame()
        kind, opaque = expectation(data)
        if kind == "close":
            ender = ender or data
            continue
        frames.append(data)
        if kind == "reply":
            want[opaque] += 1
        elif kind == "poll":
            polls.add(opaque)
    if ender is not None and not with_tail and src.rng.random() < 0.5:
        frames.append(ender)
        closing = True
    tail: Tail | None = None if closing or not with_tail else src.tail()
    sock = t.connect()
    payload = b"".join(frames) + (tail.data if tail else b"" if closing else t.probe)
    report.frames += len(frames) + (tail is not None)
    report.batches += 1
    report.per_target[t.name] += len(frames) + (tail is not None)

    def context() -> str:
        return "batch:\n" + "\n".join(describe(f) for f in frames[-8:]) + (
            f"\ntail {tail.kind}: {tail.data[:64].hex()}" if tail else "")

    try:
        sock.sendall(payload)
        if tail is not None and tail.shut_write:
            sock.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        if not (closing or tail):
            raise FrameFuzzFinding(f"the {t.name} closed the connection mid-batch\n{context()}") from None
    if closing:
        report.closes_expected += 1
    if tail is not None:
        report.tails[tail.kind] += 1
    _read_until(t, want, polls, close=closing or tail is not None, report=report, context=context)


# -- the servers and the store check ----------------------------------------------------------------

def _max_offset_check(expected: int) -> Callable[[RemotingCommand], str | None]:
    def check(r: RemotingCommand) -> str | None:
        if r.code != ResponseCode.SUCCESS:
            return f"code {r.code} {r.remark}"
        got = int(r.ext_fields.get("offset", "-1"))
        return None if got == expected else f"max offset {got}, {expected} stored"
    return check


def _route_check(r: RemotingCommand) -> str | None:
    if r.code != ResponseCode.SUCCESS:
        return f"code {r.code} {r.remark}"
    return None if b"brokerDatas" in r.body else f"no broker in the route: {r.body[:200]!r}"


async def _store_messages(addr: str) -> None:
    client = RemotingClient()
    try:
        await create_topic(client, addr, TOPIC, 1)
        for i in range(STORED):
            r = await client.invoke(addr, send_request(TOPIC, f"stored {i}".encode(), 0), 10.0)
            assert r.code == 0, r.remark
    finally:
        await client.close()


def _store_state(store_root: Path) -> tuple[int, set[str], list[bytes]]:
    """CommitLog max offset, topics, and the stored queue's bodies, read from the files."""
    cfg = StoreConfig.from_properties({"storePathRootDir": str(store_root),
                                       "mappedFileSizeCommitLog": "1048576"})
    with MessageStore(cfg) as store:
        r = store.get_message(TOPIC, 0, 0, STORED + 10)
        bodies = [m.body for m in decode_records(r.body)]
        max_offset = store.commitlog.max_offset
    topics_file = store_root / "config" / "topics.json"
    topics = set(json.loads(topics_file.read_text()).get("topicConfigTable", {})) \
        if topics_file.exists() else set()
    return max_offset, topics, bodies


def run(tmp: Path, frames: int, seed: int, chunk: int = 40,
        progress: Callable[[Report], None] | None = None) -> Report:
    """Fuzz ``frames`` frames (half at each server); raise ``FrameFuzzFinding`` on a finding."""
    t0 = time.monotonic()
    rng = random.Random(seed)
    src = FrameSource(rng)
    report = Report()
    ns_port = free_port()
    ns = ServerProcess(["namesrv", "--port", str(ns_port)], tmp / "namesrv.log")
    procs = [ns]
    try:
        ns.wait_ready()
        ns_addr = f"127.0.0.1:{ns_port}"
        writable, addr = broker_process(tmp, ns_addr, "FuzzBroker")
        procs.append(writable)
        writable.wait_ready()
        asyncio.run(_store_messages(addr))
        if writable.stop() != 0:
            raise FrameFuzzFinding(f"the broker did not stop cleanly:\n{writable.log()}")
        conf = Path(writable.proc.args[-1])  # type: ignore[index]
        store_root = conf.parent / "store"
        before = _store_state(store_root)
        assert before[2] == [f"stored {i}".encode() for i in range(STORED)], before[2]
        with conf.open("a") as f:
            f.write("brokerPermission=4\nautoCreateTopicEnable=false\n")
        broker = ServerProcess(["broker", "-c", str(conf)], conf.parent / "broker-fuzz.log")
        procs.append(broker)
        broker.wait_ready()
        port = int(addr.rsplit(":", 1)[1])
        probe_b = RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                          GetMaxOffsetRequestHeader(topic=TOPIC, queueId=0).to_ext())
        probe_n = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                          GetRouteInfoRequestHeader(topic=TOPIC).to_ext())
        targets = [Target("broker", broker, port, probe_b, _max_offset_check(STORED)),
                   Target("NameServer", ns, ns_port, probe_n, _route_check)]
        for t in targets:
            report.rss[t.name] = [_rss(t.proc.proc.pid)]
        i = 0
        while report.frames < frames:
            t = targets[i % 2]
            run_batch(t, src, report, with_tail=rng.random() < 0.08)
            i += 1
            if i % chunk == 0:
                for t in targets:
                    t.alive()
                    rss = _rss(t.proc.proc.pid)
                    report.rss[t.name].append(rss)
                    if rss > report.rss[t.name][0] + RSS_SLACK:
                        raise FrameFuzzFinding(f"the {t.name}'s RSS grew from "
                                               f"{report.rss[t.name][0] >> 20} to {rss >> 20} MiB")
                report.seconds = time.monotonic() - t0
                if progress is not None and i % (chunk * 25) == 0:
                    progress(report)
        for t in targets:
            t.alive()
            t.drop()
        if broker.stop() != 0:
            raise FrameFuzzFinding(f"the broker did not stop cleanly:\n{broker.log()}")
        after = _store_state(store_root)
        if after[0] != before[0] or after[2] != before[2]:
            raise FrameFuzzFinding(f"the store changed: CommitLog max offset {before[0]} -> "
                                   f"{after[0]}, stored bodies {len(before[2])} -> {len(after[2])}")
        added = {t for t in after[1] - before[1] if not t.startswith("%RETRY%")}
        if added or before[1] - after[1]:
            raise FrameFuzzFinding(f"topics changed: added {sorted(added)}, removed "
                                   f"{sorted(before[1] - after[1])}")
    finally:
        for p in procs:
            p.kill()
    report.seconds = time.monotonic() - t0
    return report
