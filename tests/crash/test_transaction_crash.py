"""Transactional messages across a SIGKILL of ``rocketlite start`` (S20): half messages prepared
before the kill can still be committed after the restart (directly, or by the producer answering
a check-back); the decisions taken before the kill, kept only as op records in
RMQ_SYS_TRANS_OP_HALF_TOPIC, hold: the committed ones are not stored or checked again, the rolled
back ones never appear, and nothing ends in TRANS_CHECK_MAX_TIME_TOPIC."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from brokerhelp import ServerProcess, free_port, pull_queue
from rocketlite.formats.message_id import decode_message_id
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.bodies import HeartbeatData, ProducerData
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
)
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection

pytestmark = pytest.mark.crash

TOPIC = "TxCrash"
QUEUES = 4
GROUP = "PG-crash"
COMMIT, ROLLBACK = 8, 12
N = 90  # a third committed, a third rolled back, a third left pending before the kill

Half = tuple[str, int, int]  # uniq key, half queue offset, CommitLog offset


def start_args(store: Path, conf: Path, ns_port: int, broker_port: int) -> list[str]:
    return ["start", "--grpc-port", "0", "--store", str(store), "-c", str(conf),
            "--namesrv-port", str(ns_port),
            "--broker-port", str(broker_port)]


def end_request(half: Half, decision: int, from_check: bool = False) -> RemotingCommand:
    uniq, queue_offset, phys = half
    return RemotingCommand.request(RequestCode.END_TRANSACTION, EndTransactionRequestHeader(
        producerGroup=GROUP, tranStateTableOffset=queue_offset, commitLogOffset=phys,
        commitOrRollback=decision, msgId=uniq, transactionId=uniq,
        fromTransactionCheck=from_check,
    ).to_ext())


async def prepare_and_decide(addr: str) -> tuple[list[Half], list[Half], list[Half]]:
    """Prepare ``N`` half messages; commit the first third, roll back the second."""
    client = RemotingClient()
    try:
        halves: list[Half] = []
        for i in range(N):
            uniq = f"UTX{i:05d}"
            h = SendMessageRequestHeader(
                producerGroup=GROUP, topic=TOPIC, defaultTopic="TBW102",
                defaultTopicQueueNums=QUEUES, queueId=i % QUEUES, sysFlag=0x4,
                bornTimestamp=int(time.time() * 1000), flag=0,
                properties=encode_properties({"UNIQ_KEY": uniq, "TRAN_MSG": "true",
                                              "PGROUP": GROUP}),
            )
            r = await client.invoke(addr, RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), uniq.encode()), 10.0)
            assert r.code == 0, r.remark
            halves.append((uniq, int(r.ext_fields["queueOffset"]),
                           decode_message_id(r.ext_fields["msgId"])[2]))
        third = N // 3
        committed, rolled, pending = halves[:third], halves[third:2 * third], halves[2 * third:]
        for half in committed:
            assert (await client.invoke(addr, end_request(half, COMMIT), 10.0)).code == 0
        for half in rolled:
            assert (await client.invoke(addr, end_request(half, ROLLBACK), 10.0)).code == 0
        return committed, rolled, pending
    finally:
        await client.close()


async def pull_topic(client: RemotingClient, addr: str, topic: str, queues: int) -> list[bytes]:
    out: list[bytes] = []
    for q in range(queues):
        out += [m.body for m in await pull_queue(client, addr, topic, q)]
    return out


async def resolve_after_restart(addr: str, pending: list[Half]) -> tuple[list[bytes], list[str],
                                                                        list[bytes]]:
    """Register a producer that commits whatever it is asked about, commit half of ``pending``
    directly, and wait for the rest to be committed through check-backs. Returns the real
    topic's bodies, the msgIds the broker asked about and TRANS_CHECK_MAX_TIME_TOPIC's bodies."""
    asked: list[str] = []

    def on_request(conn: Connection, cmd: RemotingCommand) -> None:
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        h = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
        asked.append(h.msgId or "")
        conn.send_oneway(end_request((h.msgId or "", h.tranStateTableOffset, h.commitLogOffset),
                                     COMMIT, from_check=True))

    producer = RemotingClient(handler=on_request)
    client = RemotingClient()
    try:
        hb = HeartbeatData(clientID="crash-producer@1", consumerDataSet=[],
                           producerDataSet=[ProducerData(groupName=GROUP)])
        r = await producer.invoke(addr, RemotingCommand.request(
            RequestCode.HEART_BEAT, {}, hb.to_json()), 10.0)
        assert r.code == 0, r.remark
        for half in pending[: len(pending) // 2]:
            r = await client.invoke(addr, end_request(half, COMMIT), 10.0)
            assert r.code == 0, r.remark
        want = N // 3 + len(pending)  # committed before the kill + every pending one
        deadline = time.monotonic() + 30
        bodies: list[bytes] = []
        while time.monotonic() < deadline:
            bodies = await pull_topic(client, addr, TOPIC, QUEUES)
            if len(bodies) >= want:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)  # several more check rounds: nothing further may appear
        bodies = await pull_topic(client, addr, TOPIC, QUEUES)
        discarded = await pull_topic(client, addr, "TRANS_CHECK_MAX_TIME_TOPIC", 1)
        return bodies, asked, discarded
    finally:
        await producer.close()
        await client.close()


def test_transactions_survive_sigkill(tmp_path: Path) -> None:
    store = tmp_path / "store"
    base = ("mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=20000\n"
            f"maxHashSlotNum=1000\nmaxIndexNum=10000\ndefaultTopicQueueNums={QUEUES}\n")
    quiet, checking = tmp_path / "quiet.conf", tmp_path / "checking.conf"
    quiet.write_text(base + "transactionCheckInterval=3600000\n", encoding="utf-8")
    checking.write_text(base + "transactionTimeOut=200\ntransactionCheckInterval=200\n"
                        "transactionCheckMax=50\n", encoding="utf-8")
    ns_port, broker_port = free_port(), free_port()
    addr = f"127.0.0.1:{broker_port}"

    with ServerProcess(start_args(store, quiet, ns_port, broker_port),
                       tmp_path / "first.log") as first:
        first.wait_ready()
        committed, rolled, pending = asyncio.run(prepare_and_decide(addr))
        first.kill()  # SIGKILL: no shutdown, offsets and configs as last persisted
    assert (store / "abort").exists(), "SIGKILL should leave the abort marker"

    with ServerProcess(start_args(store, checking, ns_port, broker_port),
                       tmp_path / "second.log") as second:
        second.wait_ready()
        bodies, asked, discarded = asyncio.run(resolve_after_restart(addr, pending))
        assert second.stop() == 0, second.log()

    expected = sorted(u.encode() for u, _, _ in committed + pending)
    assert sorted(bodies) == expected, "each committed message exactly once, no rolled back one"
    assert not {u.encode() for u, _, _ in rolled} & set(bodies)
    decided_before = {u for u, _, _ in committed + rolled}
    assert not decided_before & set(asked), "a message decided before the kill was checked"
    assert set(asked) <= {u for u, _, _ in pending}
    assert {u for u, _, _ in pending[len(pending) // 2:]} <= set(asked)
    assert discarded == []
