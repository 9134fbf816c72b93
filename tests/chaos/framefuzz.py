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
from framegen import SENDS, FrameSource, Tail, describe, expectation
from rocketlite.common.errors import ProtocolError
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import FrameDecoder, RemotingCommand, decode_frame
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
    # writable run: every send frame sent (each stored body must come from one), and the bodies
    # of the single sends acknowledged (each must be stored)
    sent_sends: list[bytes] = field(default_factory=list)
    acked_bodies: list[bytes] = field(default_factory=list)
    sends_ok: int = 0
    stored: int = 0  # records the writable run appended
    rss: dict[str, list[int]] = field(default_factory=dict)
    seconds: float = 0.0

    def line(self) -> str:
        rss = {k: f"{min(v) >> 20}-{max(v) >> 20} MiB" for k, v in self.rss.items() if v}
        return (f"{self.frames} frames in {self.batches} batches ({dict(self.per_target)}), "
                f"{self.replies} replies ({self.error_replies} errors), "
                f"{self.closes_expected} closes for frames without an opaque, "
                f"tails {dict(self.tails)}, RSS {rss}, "
                + (f"{self.sends_ok} sends acknowledged, {self.stored} records stored, "
                   if self.sends_ok else "")
                + f"{self.seconds:.1f} s")


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
        self.writable = False  # a broker that takes sends (their frames are kept)
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


def _read_until(t: Target, want: Counter[int], polls: set[int], sends: dict[int, bytes], *,
                close: bool, report: Report, context: Callable[[], str]) -> None:
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
            missing = sorted((+want).elements())[:10]
            what = "to close the connection" if close else (
                "the probe" if not probe_seen else f"replies to opaques {missing}")
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
            _count_reply(item, sends, report)
            if want[item.opaque] > 0:
                want[item.opaque] -= 1
            elif item.opaque not in polls:
                raise FrameFuzzFinding(f"the {t.name} answered opaque {item.opaque}, which no "
                                       f"frame of the batch asked for\n{context()}")


def _count_reply(reply: RemotingCommand, sends: dict[int, bytes], report: Report) -> None:
    """Count a reply; an acknowledged single send's body is one the store must hold."""
    report.replies += 1
    report.error_replies += reply.code != ResponseCode.SUCCESS
    if reply.code == ResponseCode.SUCCESS and reply.opaque in sends:
        report.sends_ok += 1
        cmd = decode_frame(sends[reply.opaque][4:])
        if cmd.code != RequestCode.SEND_BATCH_MESSAGE and \
                cmd.ext_fields.get("m", cmd.ext_fields.get("batch")) != "true":
            report.acked_bodies.append(cmd.body)


def run_batch(t: Target, src: FrameSource, report: Report, with_tail: bool) -> None:
    """One batch at ``t`` (see the module docstring)."""
    frames: list[bytes] = []
    want: Counter[int] = Counter()
    polls: set[int] = set()
    sends: dict[int, bytes] = {}  # opaque -> frame, of the requests that may store messages
    closing = False
    ender: bytes | None = None  # the batch's one frame without a readable opaque, sent last
    while len(frames) < BATCH:
        data = src.next_frame()
        kind, opaque = expectation(data)
        if kind == "close":
            ender = ender or data
            continue
        frames.append(data)
        if t.writable and _is_send(data):
            report.sent_sends.append(data)
            if kind == "reply":
                sends[opaque] = data
        if kind == "reply":
            want[opaque] += 1
        elif kind == "poll":
            polls.add(opaque)
    # a reply names its request by opaque alone: an opaque two frames of the batch carry (the
    # generator draws them at random) cannot say which was acknowledged, so no send counts by it
    for opaque in [o for o in sends if want[o] > 1 or o in polls]:
        del sends[opaque]
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
    _read_until(t, want, polls, sends, close=closing or tail is not None, report=report,
                context=context)


def _is_send(data: bytes) -> bool:
    try:
        return decode_frame(data[4:]).code in SENDS
    except ProtocolError:
        return False


# -- the servers and the store check ----------------------------------------------------------------

def _max_offset_check(expected: int, writable: bool) -> Callable[[RemotingCommand], str | None]:
    def check(r: RemotingCommand) -> str | None:
        if r.code != ResponseCode.SUCCESS:
            return f"code {r.code} {r.remark}"
        got = int(r.ext_fields.get("offset", "-1"))
        ok = got >= expected if writable else got == expected
        return None if ok else f"max offset {got}, {expected} stored"
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


def _store_state(store_root: Path, appended_from: int | None = None
                 ) -> tuple[int, set[str], list[bytes], list[bytes]]:
    """CommitLog max offset, topics, the first stored bodies of queue 0, read from the files;
    and the bodies of every record from CommitLog offset ``appended_from`` on."""
    cfg = StoreConfig.from_properties({"storePathRootDir": str(store_root),
                                       "mappedFileSizeCommitLog": "1048576"})
    appended: list[bytes] = []
    with MessageStore(cfg) as store:
        r = store.get_message(TOPIC, 0, 0, STORED)
        bodies = [m.body for m in decode_records(r.body)]
        cl = store.commitlog
        max_offset = cl.max_offset
        offset = max_offset if appended_from is None else appended_from
        while offset < max_offset:
            m = cl.read_record(offset)  # raises on a damaged record
            if m is None:  # the BLANK closing a segment
                offset = cl.rollback_next_file_offset(offset)
                continue
            appended.append(m.body)
            offset += m.total_size
    topics_file = store_root / "config" / "topics.json"
    topics = set(json.loads(topics_file.read_text()).get("topicConfigTable", {})) \
        if topics_file.exists() else set()
    return max_offset, topics, bodies, appended


def run(tmp: Path, frames: int, seed: int, chunk: int = 40,
        progress: Callable[[Report], None] | None = None, *, writable: bool = False) -> Report:
    """Fuzz ``frames`` frames (half at each server); raise ``FrameFuzzFinding`` on a finding.
    ``writable``: the broker takes sends (most aimed at the stored topic), and every record it
    stores must carry the body of a send it acknowledged (or a oneway send)."""
    t0 = time.monotonic()
    rng = random.Random(seed)
    src = FrameSource(rng, send_topic=TOPIC if writable else None)
    report = Report()
    ns_port = free_port()
    ns = ServerProcess(["namesrv", "--port", str(ns_port)], tmp / "namesrv.log")
    procs = [ns]
    try:
        ns.wait_ready()
        ns_addr = f"127.0.0.1:{ns_port}"
        seeder, addr = broker_process(tmp, ns_addr, "FuzzBroker")
        procs.append(seeder)
        seeder.wait_ready()
        asyncio.run(_store_messages(addr))
        if seeder.stop() != 0:
            raise FrameFuzzFinding(f"the broker did not stop cleanly:\n{seeder.log()}")
        conf = Path(seeder.proc.args[-1])  # type: ignore[index]
        store_root = conf.parent / "store"
        before = _store_state(store_root)
        assert before[2] == [f"stored {i}".encode() for i in range(STORED)], before[2]
        with conf.open("a") as f:
            f.write("autoCreateTopicEnable=false\n" + ("" if writable else "brokerPermission=4\n"))
        broker = ServerProcess(["broker", "-c", str(conf)], conf.parent / "broker-fuzz.log")
        procs.append(broker)
        broker.wait_ready()
        port = int(addr.rsplit(":", 1)[1])
        probe_b = RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                          GetMaxOffsetRequestHeader(topic=TOPIC, queueId=0).to_ext())
        probe_n = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                          GetRouteInfoRequestHeader(topic=TOPIC).to_ext())
        targets = [Target("broker", broker, port, probe_b, _max_offset_check(STORED, writable)),
                   Target("NameServer", ns, ns_port, probe_n, _route_check)]
        targets[0].writable = writable
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
        after = _store_state(store_root, before[0])
        if after[2] != before[2] or (after[0] != before[0] and not writable):
            raise FrameFuzzFinding(f"the store changed: CommitLog max offset {before[0]} -> "
                                   f"{after[0]}, stored bodies {len(before[2])} -> {len(after[2])}")
        report.stored = len(after[3])
        blob = b"\0".join(report.sent_sends)
        unasked = [body for body in after[3] if body not in blob]
        if unasked:
            raise FrameFuzzFinding(f"{len(unasked)} of {len(after[3])} records stored during "
                                   f"the run carry a body no send frame had: {unasked[0][:100]!r}")
        stored = Counter(after[3])
        lost = [b for b in report.acked_bodies if stored[b] == 0]
        if lost:
            raise FrameFuzzFinding(f"{len(lost)} acknowledged sends are not in the store: "
                                   f"{lost[0][:100]!r}")
        added = {t for t in after[1] - before[1] if not t.startswith("%RETRY%")}
        if added or before[1] - after[1]:
            raise FrameFuzzFinding(f"topics changed: added {sorted(added)}, removed "
                                   f"{sorted(before[1] - after[1])}")
    finally:
        for p in procs:
            p.kill()
    report.seconds = time.monotonic() - t0
    return report
