"""A real crash of the whole server: ``rocketlite start --flush SYNC_FLUSH`` takes concurrent sends
over Remoting and is killed with SIGKILL mid-burst. After a restart every acknowledged message is
pullable at the queue offset its reply named, with the body that was sent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, broker_addr, pull_queue, send_request, start_args
from rocketlite.common.errors import RemotingError
from rocketlite.formats.message_id import decode_message_id
from rocketlite.formats.message_record import MessageRecord
from rocketlite.protocol.codes import ResponseCode
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.crash

TOPIC = "CrashTopic"
QUEUES = 4
WORKERS = 8

Ack = tuple[bytes, int, int, int]  # body, queue id, queue offset, CommitLog offset


async def send_until_killed(addr: str, acks_before_kill: int, kill: Callable[[], None]
                            ) -> list[Ack]:
    acked: list[Ack] = []
    client = RemotingClient()

    async def worker(w: int) -> None:
        i = 0
        while True:
            body = b"w%d-%06d " % (w, i) * (1 + (w + i) % 30)
            try:
                r = await client.invoke(addr, send_request(TOPIC, body), 10.0)
            except RemotingError:
                return  # the server is gone
            assert r.code == ResponseCode.SUCCESS, r.remark
            _, _, offset = decode_message_id(r.ext_fields["msgId"])
            acked.append((body, int(r.ext_fields["queueId"]), int(r.ext_fields["queueOffset"]),
                          offset))
            if len(acked) >= acks_before_kill:
                kill()
            i += 1

    try:
        async with asyncio.timeout(60):
            await asyncio.gather(*(worker(w) for w in range(WORKERS)))
    finally:
        with contextlib.suppress(RemotingError):
            await client.close()
    return acked


async def pull_everything(addr: str) -> dict[int, list[MessageRecord]]:
    client = RemotingClient()
    try:
        return {q: await pull_queue(client, addr, TOPIC, q) for q in range(QUEUES)}
    finally:
        await client.close()


@pytest.mark.parametrize("acks", [200, 1000])
def test_every_acknowledged_send_survives_sigkill(tmp_path: Path, acks: int) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "mappedFileSizeCommitLog=262144\n"  # a few segments: recovery crosses them
        "mappedFileSizeConsumeQueue=2000\n"
        "maxHashSlotNum=1000\n"
        "maxIndexNum=10000\n"
        f"defaultTopicQueueNums={QUEUES}\n",
        encoding="utf-8",
    )
    args = start_args(store, conf, "SYNC_FLUSH")
    with ServerProcess(args, tmp_path / "first.log") as first:
        first.wait_ready()
        acked = asyncio.run(send_until_killed(broker_addr(args), acks, first.proc.kill))
        first.wait(30)
    assert len(acked) >= acks, first.log()
    assert (store / "abort").exists(), "SIGKILL should leave the abort marker"

    args = start_args(store, conf, "SYNC_FLUSH")
    with ServerProcess(args, tmp_path / "second.log") as second:
        second.wait_ready()
        pulled = asyncio.run(pull_everything(broker_addr(args)))
        assert second.stop() == 0, second.log()
    for q, msgs in pulled.items():
        assert [m.queue_offset for m in msgs] == list(range(len(msgs))), f"queue {q} has gaps"
    for body, q, queue_offset, offset in acked:
        msgs = pulled[q]
        assert queue_offset < len(msgs), f"acked message at {q}:{queue_offset} is missing"
        m = msgs[queue_offset]
        assert (m.body, m.commit_log_offset, m.topic) == (body, offset, TOPIC)
