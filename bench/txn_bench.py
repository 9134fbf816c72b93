"""Transactional message benchmark: what a two-phase send costs a broker over loopback.

    python bench/txn_bench.py                       # start a broker, run every scenario
    python bench/txn_bench.py --inflight 128 --seconds 10
    python bench/txn_bench.py --broker 127.0.0.1:10911 --scenario txn

Scenarios (``--inflight`` transactions outstanding, each slot starting its next one when the
last finishes):
  plain    baseline: single SEND_MESSAGE_V2 of a plain message with its own UNIQ_KEY, as
           clients send it (one round trip, one record, one index entry)
  txn      the prepared send (sysFlag 0x4, TRAN_MSG, PGROUP: stored in the half topic), then
           END_TRANSACTION commit as request/reply: two round trips and three records (half,
           committed message, op record); latency is the whole transaction
  oneway   the same with END_TRANSACTION oneway, as the clients send it: the slot moves on once
           the prepared send is answered; the run waits until every commit is stored

Without ``--broker`` each scenario starts its own ``rocketlite start`` (ASYNC_FLUSH) in a temporary
folder, so the broker's CPU time (user + system) is measured too. The client is the lean one of
bench/broker_bench.py: frames are templates with their opaque (and here the UNIQ_KEY, offsets)
patched in, replies matched by opaque in callbacks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from broker_bench import (  # noqa: E402
    CpuMeter,
    LoadConnection,
    Template,
    broker_process,
    connect,
    fmt,
    percentiles,
)
from rocketlite.formats.message_id import decode_message_id  # noqa: E402
from rocketlite.formats.properties import encode_properties  # noqa: E402
from rocketlite.protocol.codes import RequestCode  # noqa: E402
from rocketlite.protocol.command import RemotingCommand  # noqa: E402
from rocketlite.protocol.headers import (  # noqa: E402
    EndTransactionRequestHeader,
    GetMaxOffsetRequestHeader,
    SendMessageRequestHeader,
)

TOPIC = "TxBench"
QUEUES = 8
GROUP = "txn_bench_producer"
UNIQ_MARK = b"F" * 32  # patched with each transaction's UNIQ_KEY (same length: same frame size)
OFFSET_MARK = 987654321987654321  # patched with the half queue offset
PHYS_MARK = 876543219876543219  # patched with the half message's CommitLog offset


class SendTemplate:
    """A SEND_MESSAGE_V2 frame of one queue, prepared (sysFlag 0x4, TRAN_MSG, PGROUP) or plain:
    ``frame(opaque, uniq)``."""

    def __init__(self, queue_id: int, body: bytes, prepared: bool) -> None:
        props = {"TAGS": "TagA", "UNIQ_KEY": UNIQ_MARK.decode(), "WAIT": "true"}
        if prepared:
            props.update({"TRAN_MSG": "true", "PGROUP": GROUP})
        h = SendMessageRequestHeader(
            producerGroup=GROUP, topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=QUEUES,
            queueId=queue_id, sysFlag=0x4 if prepared else 0,
            bornTimestamp=int(time.time() * 1000), flag=0, properties=encode_properties(props),
        )
        self.t = Template(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), body))
        i = self.t.left.index(UNIQ_MARK)
        self.a, self.b = self.t.left[:i], self.t.left[i + len(UNIQ_MARK):]

    def frame(self, opaque: int, uniq: bytes) -> bytes:
        t = self.t
        t.left = self.a + uniq + self.b
        return t.frame(opaque)


class EndTemplate:
    """An END_TRANSACTION commit frame: ``frame(opaque, uniq, queue_offset, phys)``."""

    def __init__(self, oneway: bool) -> None:
        h = EndTransactionRequestHeader(
            producerGroup=GROUP, tranStateTableOffset=OFFSET_MARK, commitLogOffset=PHYS_MARK,
            commitOrRollback=8, msgId=UNIQ_MARK.decode(), transactionId=UNIQ_MARK.decode(),
            fromTransactionCheck=False,
        )
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, h.to_ext())
        if oneway:
            cmd.flag |= 2  # RPC_ONEWAY
        self.t = Template(cmd)
        self.left = self.t.left

    def frame(self, opaque: int, uniq: bytes, queue_offset: int, phys: int) -> bytes:
        t = self.t
        t.left = (self.left.replace(UNIQ_MARK, uniq)
                  .replace(b"%d" % OFFSET_MARK, b"%d" % queue_offset)
                  .replace(b"%d" % PHYS_MARK, b"%d" % phys))
        t.fixed = len(t.left) + len(t.right)
        return t.frame(opaque)


class Build:
    """A frame built once its opaque is known, for ``LoadConnection.request``."""

    __slots__ = ("build",)

    def __init__(self, build: Callable[[int], bytes]) -> None:
        self.build = build

    def frame(self, opaque: int) -> bytes:
        return self.build(opaque)


async def stored(conn: LoadConnection) -> int:
    """Messages in the benchmark topic (GET_MAX_OFFSET over its queues)."""
    total = 0
    for q in range(QUEUES):
        cmd = RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                      GetMaxOffsetRequestHeader(topic=TOPIC, queueId=q).to_ext())
        code, ext, _ = await conn.call(Template(cmd))
        total += int(ext.get("offset", 0)) if code == 0 else 0
    return total


async def run_txns(addr: str, body: bytes, inflight: int, seconds: float, mode: str
                   ) -> dict[str, object]:
    """Keep ``inflight`` transactions (``mode`` ``txn`` or ``oneway``) or plain sends
    (``plain``) outstanding for ``seconds``."""
    oneway, plain = mode == "oneway", mode == "plain"
    prepares = [SendTemplate(q, body, not plain) for q in range(QUEUES)]
    end_t = EndTemplate(oneway)
    conn = await connect(addr)
    before = await stored(conn)
    counter = itertools.count()
    lat: list[int] = []
    errors: dict[str, int] = {}
    done_txns = 0
    live = inflight
    finished = asyncio.get_running_loop().create_future()
    perf = time.perf_counter_ns
    stop_ns = perf() + int(seconds * 1e9)

    def finish(t0: int, what: str, code: int) -> None:
        """One transaction (or send) ended with ``code``; the slot starts the next one."""
        nonlocal done_txns, live
        if code:
            errors[f"{what}:{code}"] = errors.get(f"{what}:{code}", 0) + 1
        else:
            done_txns += 1
        now = perf()
        lat.append(now - t0)
        if now < stop_ns and code >= 0:
            begin()
            return
        live -= 1
        if live == 0 and not finished.done():
            finished.set_result(None)

    def begin() -> None:
        n = next(counter)
        uniq = b"%032X" % n
        t0 = perf()

        def committed(code: int, ext: dict[str, str], _body: bytes) -> None:
            finish(t0, "end", code)

        def prepared(code: int, ext: dict[str, str], _body: bytes) -> None:
            if code or plain:
                finish(t0, "send", code)
                return
            queue_offset, phys = int(ext["queueOffset"]), decode_message_id(ext["msgId"])[2]
            if oneway:  # no reply: written with the other frames this read produces
                conn.out.append(end_t.frame(0, uniq, queue_offset, phys))
                conn._schedule_flush()
                finish(t0, "end", 0)
            else:
                conn.request(Build(lambda o: end_t.frame(o, uniq, queue_offset, phys)), committed)

        prepare = prepares[n % QUEUES]
        conn.request(Build(lambda o: prepare.frame(o, uniq)), prepared)

    t0 = time.perf_counter()
    for _ in range(inflight):
        begin()
    await finished
    if oneway:  # the commits were not answered: wait until they are all stored
        deadline = time.monotonic() + 30
        while await stored(conn) - before < done_txns and time.monotonic() < deadline:  # noqa: ASYNC110 - polls the broker
            await asyncio.sleep(0.01)
    dt = time.perf_counter() - t0
    committed_msgs = await stored(conn) - before
    conn.close()
    return {"msgs_per_s": done_txns / dt, "messages": done_txns, "stored": committed_msgs,
            "errors": errors, **percentiles(lat)}


async def scenario(args: argparse.Namespace, name: str, addr: str, pid: int | None
                   ) -> dict[str, object]:
    body = os.urandom(args.size)
    await run_txns(addr, body, 8, 0.3, "plain")  # creates the topic
    await run_txns(addr, body, 8, 0.5, name)  # warms up
    cpu = CpuMeter(pid)
    r = await run_txns(addr, body, args.inflight, args.seconds, name)
    if r["stored"] != r["messages"]:
        print(f"  !! {r['messages']} sent or committed, {r['stored']} messages stored")
    r.update(cpu.result(int(r["messages"])))  # type: ignore[call-overload]
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--broker", help="host:port of a running broker (default: start one)")
    ap.add_argument("--scenario", action="append", choices=["plain", "txn", "oneway"],
                    help="repeatable; default: all")
    ap.add_argument("--size", type=int, default=128, help="message body bytes")
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    print(f"{args.size} B bodies, {args.inflight} in flight on one connection; client and broker "
          "on this machine (per msg = per transaction)")
    for name in args.scenario or ["plain", "txn", "oneway"]:
        label = {"plain": "plain send (baseline)",
                 "txn": "prepare + END_TRANSACTION commit (reply)",
                 "oneway": "prepare + END_TRANSACTION commit (oneway)"}[name]
        with contextlib.ExitStack() as stack:
            addr, pid, _ = ((args.broker, None, "") if args.broker
                            else stack.enter_context(broker_process("ASYNC_FLUSH")))
            coro = scenario(args, name, addr, pid)
            r = uvloop.run(coro) if uvloop else asyncio.run(coro)
        print(fmt(label, r), flush=True)


if __name__ == "__main__":
    main()
