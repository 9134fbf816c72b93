"""SYNC_MASTER (issue 20): a send is answered once a slave acked the end offset of its append;
FLUSH_SLAVE_TIMEOUT when no slave acked within syncFlushTimeout, SLAVE_NOT_AVAILABLE when none is
connected, the message stored in both cases; the waits are grouped (one waiter per append, all
resolved by one ack). Brokers on loopback; the SIGSTOP test runs the slave as a process."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from synchelp import TOPIC, FakeSlave, eventually, send_request, world

from brokerhelp import decode_records, pull_request
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.protocol.message_batch import encode_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RC = ResponseCode


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_a_send_is_answered_once_the_slave_holds_it(tmp_path: Path, flush: str) -> None:
    async with world(tmp_path) as w:
        master = await w.start_master(flushDiskType=flush)
        slave = await w.start_slave()
        await w.synced()
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
            r = await w.send(send_request(b"one", code=code))
            assert r.code == RC.SUCCESS, r.remark
            # the answer came after the slave's ack: the slave holds the record already
            assert slave.store.commitlog.max_offset == master.store.commitlog.max_offset
        r = await w.send(send_request(encode_batch([b"b0", b"b1", b"b2"]),
                                      code=RequestCode.SEND_BATCH_MESSAGE))
        assert r.code == RC.SUCCESS, r.remark
        assert len(r.ext_fields["msgId"].split(",")) == 3
        assert slave.store.commitlog.max_offset == master.store.commitlog.max_offset
        assert w.transfer.waiting == 0 and w.transfer.timeouts == 0
        assert w.transfer.requests >= 1


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_no_slave_answers_slave_not_available_and_keeps_the_message(
        tmp_path: Path, flush: str) -> None:
    async with world(tmp_path) as w:
        master = await w.start_master(flushDiskType=flush)
        r = await w.send(send_request(b"alone", queue_id=1))
        assert r.code == RC.SLAVE_NOT_AVAILABLE
        assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == "0"
        assert r.ext_fields["msgId"]  # the ids of the stored message, as Java's reply
        r = await w.send(send_request(encode_batch([b"b0", b"b1"]), queue_id=1,
                                      code=RequestCode.SEND_BATCH_MESSAGE))
        assert r.code == RC.SLAVE_NOT_AVAILABLE
        assert r.ext_fields["queueOffset"] == "1"
        assert w.transfer.waiting == 0 and w.transfer.requests == 0
        await eventually(lambda: master.store.dispatcher.dispatch_from
                         >= master.store.commitlog.max_offset)
        r = await w.client.invoke(f"127.0.0.1:{master.port}", pull_request(TOPIC, 1, 0), 5.0)
        assert r.code == RC.SUCCESS, r.remark
        assert [m.body for m in decode_records(r.body)] == [b"alone", b"b0", b"b1"]


async def pipelined(port: int, cmds: list[RemotingCommand]
                    ) -> tuple[asyncio.StreamWriter, asyncio.Task[list[RemotingCommand]]]:
    """Write every request in one write (as a producer with that many in flight does) and read
    their answers in a task."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for i, c in enumerate(cmds):
        c.opaque = i + 1
    writer.write(b"".join(c.encode() for c in cmds))

    async def answers() -> list[RemotingCommand]:
        decoder = FrameDecoder()
        out: list[RemotingCommand] = []
        while len(out) < len(cmds):
            data = await reader.read(1 << 16)
            assert data, "connection closed"
            for item in decoder.feed(data):
                assert isinstance(item, RemotingCommand)
                out.append(item)
        return out

    return writer, asyncio.ensure_future(answers())


async def test_many_sends_in_flight_share_few_waiters_resolved_by_one_ack(tmp_path: Path) -> None:
    n = 2000
    async with world(tmp_path) as w:
        master = await w.start_master(syncFlushTimeout="60000")
        slave = await FakeSlave.connect(w.ha_address, master.store.commitlog.max_offset)
        try:
            await eventually(lambda: master.ha_server is not None
                             and master.ha_server.max_acked >= 0)
            t = w.transfer
            before = master.stats.put_messages
            writer, answers = await pipelined(
                master.port, [send_request(b"m%d" % i, queue_id=i % 4) for i in range(n)])
            try:
                await eventually(lambda: master.stats.put_messages - before == n)
                await asyncio.sleep(0.2)  # any answer would have come by now
                assert not answers.done()
                # one waiter per append, not per message: the sends of a read share one append
                assert 1 <= t.waiting <= n // 16, t.waiting
                assert t.requests == t.waiting
                await slave.report(master.store.commitlog.max_offset)  # one ack answers all
                got = await asyncio.wait_for(answers, 30)
                assert sorted(r.opaque for r in got) == list(range(1, n + 1))
                assert {r.code for r in got} == {RC.SUCCESS}
                assert t.waiting == 0 and t.timeouts == 0
            finally:
                answers.cancel()
                writer.close()
        finally:
            await slave.close()


async def test_a_stopped_slave_gives_flush_slave_timeout_then_sends_succeed_again(
        tmp_path: Path) -> None:
    timeout_s = 1.5
    async with world(tmp_path) as w:
        master = await w.start_master(syncFlushTimeout=str(int(timeout_s * 1000)))
        proc = w.start_slave_process()
        await w.synced()
        r = await w.send(send_request(b"before"))
        assert r.code == RC.SUCCESS, r.remark
        os.kill(proc.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            r = await w.send(send_request(b"stopped", queue_id=2))
            took = time.monotonic() - t0
            assert r.code == RC.FLUSH_SLAVE_TIMEOUT, r.remark
            assert r.ext_fields["queueId"] == "2" and r.ext_fields["msgId"]
            assert timeout_s * 0.9 <= took <= timeout_s + 3.0, took
            assert w.transfer.timeouts == 1 and w.transfer.waiting == 0
        finally:
            os.kill(proc.proc.pid, signal.SIGCONT)
        # the slave catches up; sends are acked again
        await w.synced()
        r = await w.send(send_request(b"after", queue_id=2))
        assert r.code == RC.SUCCESS, r.remark
        await eventually(lambda: master.store.dispatcher.dispatch_from
                         >= master.store.commitlog.max_offset)
        r = await w.client.invoke(f"127.0.0.1:{master.port}", pull_request(TOPIC, 2, 0), 5.0)
        assert [m.body for m in decode_records(r.body)] == [b"stopped", b"after"]
        assert proc.stop() == 0
