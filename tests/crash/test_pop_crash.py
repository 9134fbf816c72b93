"""POP across a real crash: ``rocketlite start`` pops four messages to a Remoting consumer, two are
acked, then the process is killed with SIGKILL. After a restart the two unacked messages come back
(through the group's POP retry topic, once their invisible time is over) with delivery attempt 2,
and the acked ones do not come back. An orderly pop's batch stays hidden across the crash and
comes back in order with its delivery count."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, broker_addr, decode_records, send_request, start_args
from rocketlite.formats.message_record import MessageRecord
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    AckMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketlite.protocol.pop_info import ReceiptHandle
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.crash

TOPIC, GROUP, BROKER = "PopCrashT", "PopCrashG", "broker-pc"
INVISIBLE_MS = 1500


def pop_request(poll_ms: int, order: bool = False, topic: str = TOPIC) -> RemotingCommand:
    h = PopMessageRequestHeader(consumerGroup=GROUP, topic=topic, queueId=-1, maxMsgNums=32,
                                invisibleTime=INVISIBLE_MS, pollTime=poll_ms,
                                bornTime=int(time.time() * 1000), initMode=1, expType="TAG",
                                exp="*", order=order)
    return RemotingCommand.request(RequestCode.POP_MESSAGE, h.to_ext())


def handle(reply: RemotingCommand, m: MessageRecord) -> str:
    h = PopMessageResponseHeader.from_ext(reply.ext_fields)
    assert h.startOffsetInfo is not None
    retry = 1 if m.topic.startswith("%RETRY%") else 0
    starts = {(int(r), int(q)): int(o) for r, q, o in
              (e.split(" ") for e in h.startOffsetInfo.split(";"))}
    return ReceiptHandle(starts[(retry, m.queue_id)], h.popTime, h.invisibleTime, h.reviveQid,
                         retry, BROKER, m.queue_id, m.queue_offset).encode()


async def first_run(addr: str) -> None:
    client = RemotingClient()
    try:
        for i in range(4):
            r = await client.invoke(addr, send_request(TOPIC, b"c%d" % i), 10.0)
            assert r.code == ResponseCode.SUCCESS, r.remark
        got: list[tuple[RemotingCommand, MessageRecord]] = []
        while len(got) < 4:
            r = await client.invoke(addr, pop_request(1000), 10.0)
            assert r.code in (ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT), r.remark
            got += [(r, m) for m in decode_records(r.body)]
        assert sorted(m.body for _, m in got) == [b"c0", b"c1", b"c2", b"c3"]
        for r, m in got:
            if m.body in (b"c0", b"c1"):
                ack = AckMessageRequestHeader(consumerGroup=GROUP, topic=TOPIC,
                                              queueId=m.queue_id, extraInfo=handle(r, m),
                                              offset=m.queue_offset)
                a = await client.invoke(addr, RemotingCommand.request(
                    RequestCode.ACK_MESSAGE, ack.to_ext()), 10.0)
                assert a.code == ResponseCode.SUCCESS, a.remark
    finally:
        await client.close()


def wait_offsets_persisted(path: Path) -> None:
    """The pops moved the group's offsets: wait until the periodic persist has written them."""
    deadline = time.monotonic() + 10
    while f"{TOPIC}@{GROUP}" not in (path.read_text() if path.exists() else ""):
        assert time.monotonic() < deadline, "consumer offsets never persisted"
        time.sleep(0.05)


async def second_run(addr: str) -> list[MessageRecord]:
    client = RemotingClient()
    back: list[MessageRecord] = []
    try:
        deadline = time.monotonic() + 20
        while len(back) < 2 and time.monotonic() < deadline:
            r = await client.invoke(addr, pop_request(1000), 10.0)
            back += decode_records(r.body)
        r = await client.invoke(addr, pop_request(1500), 10.0)  # nothing more comes back
        back += decode_records(r.body)
    finally:
        await client.close()
    return back


def test_unacked_pops_come_back_after_sigkill_and_acked_ones_do_not(tmp_path: Path) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName={BROKER}\ndefaultTopicQueueNums=2\nreviveInterval=100\n"
                    "flushConsumerOffsetInterval=100\nmappedFileSizeCommitLog=1048576\n"
                    "mappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=1000\nmaxIndexNum=10000\n",
                    encoding="utf-8")
    args = start_args(store, conf)
    with ServerProcess(args, tmp_path / "first.log") as first:
        first.wait_ready()
        asyncio.run(first_run(broker_addr(args)))
        wait_offsets_persisted(store / "config" / "consumerOffset.json")
        first.proc.kill()
        first.wait(30)
    assert (store / "abort").exists(), "SIGKILL should leave the abort marker"

    args = start_args(store, conf)
    with ServerProcess(args, tmp_path / "second.log") as second:
        second.wait_ready()
        back = asyncio.run(second_run(broker_addr(args)))
        assert second.stop() == 0, second.log()
    assert sorted(m.body for m in back) == [b"c2", b"c3"], second.log()
    assert all(m.reconsume_times == 1 for m in back)  # delivery attempt 2
    assert all(m.topic == f"%RETRY%{GROUP}_{TOPIC}" for m in back)
    assert all(m.properties["RETRY_TOPIC"] == TOPIC for m in back)


FIFO_TOPIC = "PopCrashFifo"


async def fifo_first_run(addr: str) -> int:
    """Two messages to one queue, one orderly pop that takes both; the pop time."""
    client = RemotingClient()
    try:
        for i in range(2):
            r = await client.invoke(addr, send_request(FIFO_TOPIC, b"f%d" % i, 0), 10.0)
            assert r.code == ResponseCode.SUCCESS, r.remark
        r = await client.invoke(addr, pop_request(0, True, FIFO_TOPIC), 10.0)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in decode_records(r.body)] == [b"f0", b"f1"]
        return PopMessageResponseHeader.from_ext(r.ext_fields).popTime
    finally:
        await client.close()


async def fifo_second_run(addr: str) -> tuple[float, RemotingCommand]:
    client = RemotingClient()
    try:
        while True:
            r = await client.invoke(addr, pop_request(1000, True, FIFO_TOPIC), 10.0)
            if r.code == ResponseCode.SUCCESS:
                return time.time(), r
            assert r.code == ResponseCode.POLLING_TIMEOUT, r.remark
    finally:
        await client.close()


def test_orderly_batch_stays_hidden_across_sigkill(tmp_path: Path) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName={BROKER}\ndefaultTopicQueueNums=1\nreviveInterval=100\n"
                    "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=2000\n"
                    "maxHashSlotNum=1000\nmaxIndexNum=10000\n", encoding="utf-8")
    args = start_args(store, conf)
    with ServerProcess(args, tmp_path / "first.log") as first:
        first.wait_ready()
        pop_time = asyncio.run(fifo_first_run(broker_addr(args)))
        state = store / "config" / "popOrderInfo.json"
        deadline = time.monotonic() + 10
        while FIFO_TOPIC not in (state.read_text() if state.exists() else ""):
            assert time.monotonic() < deadline, "FIFO order state never persisted"
            time.sleep(0.05)
        first.proc.kill()
        first.wait(30)
    args = start_args(store, conf)
    with ServerProcess(args, tmp_path / "second.log") as second:
        second.wait_ready()
        at, r = asyncio.run(fifo_second_run(broker_addr(args)))
        assert second.stop() == 0, second.log()
    assert at * 1000 >= pop_time + INVISIBLE_MS  # hidden until its invisible time
    assert [m.body for m in decode_records(r.body)] == [b"f0", b"f1"]
    h = PopMessageResponseHeader.from_ext(r.ext_fields)
    assert h.orderCountInfo == "0 qo0%0 1;0 qo0%1 1"  # delivered once before: attempt 2
