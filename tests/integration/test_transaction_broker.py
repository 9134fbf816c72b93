"""Transactional messages on a real broker over loopback (S20), in raw Remoting: a prepared send is
invisible; END_TRANSACTION commits (visible, same UNIQ_KEY) or rolls back (never visible); an
undecided message is checked back with a producer connection registered by HEARTBEAT, which
answers with END_TRANSACTION; a producer that never answers sees its message moved to
TRANS_CHECK_MAX_TIME_TOPIC after transactionCheckMax checks; decisions survive a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from brokerhelp import decode_records as records
from integration.client.clientconf import Cluster
from integration.test_broker import Env, eventually, running
from rocketlite.broker.broker import Broker
from rocketlite.broker.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC
from rocketlite.broker.transaction.half import TRANSACTION_CHECK_TIMES
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.transaction import LocalTransactionState, TransactionProducer
from rocketlite.common.errors import DiskFullError
from rocketlite.formats.message_id import decode_message_id
from rocketlite.formats.message_record import SYSFLAG_TRANSACTION_COMMIT, decode_record
from rocketlite.formats.properties import encode_properties
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
)
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection

pytestmark = pytest.mark.integration

RC = ResponseCode
COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0
FAST = {"transactionTimeOut": "1", "transactionCheckInterval": "150", "transactionCheckMax": "2"}
SLOW = {"transactionCheckInterval": "3600000"}  # no check rounds unless a test runs one


class Half:
    """What a prepared send's reply says, as a producer keeps it for END_TRANSACTION."""

    def __init__(self, reply: RemotingCommand, uniq: str) -> None:
        assert reply.code == RC.SUCCESS, reply.remark
        self.offset_msg_id = reply.ext_fields["msgId"]
        self.commit_log_offset = decode_message_id(self.offset_msg_id)[2]
        self.queue_offset = int(reply.ext_fields["queueOffset"])
        self.uniq = uniq


async def prepare(env: Env, topic: str, body: bytes, uniq: str, group: str = "PG",
                  extra: dict[str, str] | None = None) -> Half:
    props = {"TAGS": "TagA", "UNIQ_KEY": uniq, "TRAN_MSG": "true", "PGROUP": group,
             **(extra or {})}
    h = SendMessageRequestHeader(
        producerGroup=group, topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4,
        queueId=0, sysFlag=0x4, bornTimestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties(props),
    )
    return Half(await env.call(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), body), uniq)


def end_header(half: Half, decision: int, group: str = "PG",
               from_check: bool = False) -> EndTransactionRequestHeader:
    return EndTransactionRequestHeader(
        producerGroup=group, tranStateTableOffset=half.queue_offset,
        commitLogOffset=half.commit_log_offset, commitOrRollback=decision, msgId=half.uniq,
        transactionId=half.uniq, fromTransactionCheck=from_check,
    )


async def end(env: Env, half: Half, decision: int, group: str = "PG") -> RemotingCommand:
    return await env.call(RequestCode.END_TRANSACTION, end_header(half, decision, group).to_ext())


async def visible(env: Env, topic: str, queue_id: int = 0) -> list[tuple[bytes, str]]:
    await env.wait_dispatched()
    r = await env.pull(topic, 0, queue_id=queue_id)
    if r.code != RC.SUCCESS:
        return []
    return [(m.body, m.properties.get("UNIQ_KEY", "")) for m in records(r.body)]


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with running(tmp_path / "store", SLOW) as e:
        yield e


async def test_prepared_is_invisible_until_commit(env: Env) -> None:
    half = await prepare(env, "TxT", b"order-1", "U1")
    assert await visible(env, "TxT") == []
    assert env.broker.store.max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 1
    r = await end(env, half, COMMIT)
    assert r.code == RC.SUCCESS, r.remark
    assert await visible(env, "TxT") == [(b"order-1", "U1")]
    pulled = records((await env.pull("TxT", 0)).body)[0]
    assert pulled.sys_flag & 0xC == SYSFLAG_TRANSACTION_COMMIT
    assert not {"REAL_TOPIC", "REAL_QID", "TRAN_MSG"} & set(pulled.properties)
    assert pulled.properties["PGROUP"] == "PG"
    assert pulled.prepared_transaction_offset == half.commit_log_offset
    # A second commit (a retry) stores nothing more.
    assert (await end(env, half, COMMIT)).code == RC.SUCCESS
    assert len(await visible(env, "TxT")) == 1


async def test_rollback_is_never_visible_and_unknown_changes_nothing(env: Env) -> None:
    a = await prepare(env, "TxR", b"a", "UA")
    b = await prepare(env, "TxR", b"b", "UB")
    assert (await end(env, a, ROLLBACK)).code == RC.SUCCESS
    await env.client.invoke_oneway(env.addr, RemotingCommand.request(
        RequestCode.END_TRANSACTION, end_header(b, UNKNOWN).to_ext()))
    await asyncio.sleep(0.1)
    assert await visible(env, "TxR") == []
    assert (await end(env, b, COMMIT)).code == RC.SUCCESS
    assert await visible(env, "TxR") == [(b"b", "UB")]
    # Rolled back after all: the commit of a resolved message is a no-op.
    assert (await end(env, a, COMMIT)).code == RC.SUCCESS
    assert await visible(env, "TxR") == [(b"b", "UB")]


async def test_end_transaction_that_does_not_match_is_refused(env: Env) -> None:
    half = await prepare(env, "TxE", b"x", "UE")
    r = await end(env, half, COMMIT, group="OTHER")
    assert r.code == RC.SYSTEM_ERROR and "producer group wrong" in (r.remark or "")
    bad = end_header(half, COMMIT)
    r = await env.call(RequestCode.END_TRANSACTION, {**bad.to_ext(), "tranStateTableOffset": "7"})
    assert r.code == RC.SYSTEM_ERROR and "state table offset" in (r.remark or "")
    plain = await env.send("TxE", b"plain")
    r = await env.call(RequestCode.END_TRANSACTION, {
        **bad.to_ext(), "commitLogOffset": str(decode_message_id(plain.ext_fields["msgId"])[2])})
    assert r.code == RC.SYSTEM_ERROR and "not a half" in (r.remark or "")
    r = await env.call(RequestCode.END_TRANSACTION, {**bad.to_ext(), "commitLogOffset": "999999"})
    assert r.code == RC.SYSTEM_ERROR
    assert await visible(env, "TxE") == [(b"plain", "")]


async def test_oneway_commit_is_applied(env: Env) -> None:
    half = await prepare(env, "TxO", b"oneway", "UO")
    await env.client.invoke_oneway(env.addr, RemotingCommand.request(
        RequestCode.END_TRANSACTION, end_header(half, COMMIT).to_ext()))
    await eventually(lambda: env.broker.transactions.end.commits == 1)
    assert await visible(env, "TxO") == [(b"oneway", "UO")]


async def test_a_committed_message_keeps_its_delay_level(env: Env) -> None:
    """The commit goes through the diverters: DELAY=1 (1 s) waits in the schedule topic."""
    half = await prepare(env, "TxD", b"later", "UD", extra={"DELAY": "1"})
    assert env.broker.store.max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 0  # not delayed yet
    committed_at = time.monotonic()
    assert (await end(env, half, COMMIT)).code == RC.SUCCESS
    assert env.broker.store.max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 1
    assert await visible(env, "TxD") == []
    got: list[tuple[bytes, str]] = []

    async def arrived() -> bool:
        got[:] = await visible(env, "TxD")
        return bool(got)

    while not await arrived():
        assert time.monotonic() - committed_at < 10, "the delayed commit never arrived"
        await asyncio.sleep(0.05)
    assert got == [(b"later", "UD")]
    assert time.monotonic() - committed_at >= 0.8


async def test_a_broker_that_rejects_transactions_answers_no_permission(tmp_path: Path) -> None:
    async with running(tmp_path / "store", {"rejectTransactionMessage": "true"}) as env:
        props = encode_properties({"UNIQ_KEY": "UR", "TRAN_MSG": "true", "PGROUP": "PG"})
        h = SendMessageRequestHeader(
            producerGroup="PG", topic="TxX", defaultTopic="TBW102", defaultTopicQueueNums=4,
            queueId=0, sysFlag=0x4, bornTimestamp=int(time.time() * 1000), flag=0,
            properties=props,
        )
        r = await env.call(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), b"x")
        assert r.code == RC.NO_PERMISSION and "transaction message is forbidden" in (r.remark or "")
        assert env.broker.store.max_offset_in_queue(TRANS_HALF_TOPIC, 0) == 0
        assert (await env.send("TxX", b"plain")).code == RC.SUCCESS  # other sends still work


async def test_check_immunity_time_defers_the_check(tmp_path: Path) -> None:
    async with running(tmp_path / "store", FAST) as env:
        producer = CheckingProducer(env, COMMIT)
        try:
            await producer.register()
            await prepare(env, "TxI", b"immune", "UI", extra={"CHECK_IMMUNITY_TIME_IN_SECONDS": "60"})
            rounds = env.broker.transactions.check.stats.rounds
            await eventually(lambda: env.broker.transactions.check.stats.rounds >= rounds + 3)
            assert producer.checks == []
            assert env.broker.transactions.processed_offset() == 0  # waits at the immune one
        finally:
            await producer.client.close()


async def test_a_failed_append_leaves_the_message_undecided(env: Env,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    half = await prepare(env, "TxF", b"retry", "UF")
    real_put = env.broker.store.put_messages

    def full(*args: object, **kwargs: object) -> object:
        raise DiskFullError("disk full (test)")

    monkeypatch.setattr(env.broker.store, "put_messages", full)
    r = await end(env, half, COMMIT)
    assert r.code == RC.SERVICE_NOT_AVAILABLE and "disk full" in (r.remark or "")
    assert not env.broker.transactions.deciding
    monkeypatch.setattr(env.broker.store, "put_messages", real_put)
    assert (await end(env, half, COMMIT)).code == RC.SUCCESS  # a retry is not a no-op
    assert await visible(env, "TxF") == [(b"retry", "UF")]


async def test_commit_and_rollback_under_sync_flush(tmp_path: Path) -> None:
    async with running(tmp_path / "store", SLOW, flushDiskType="SYNC_FLUSH") as env:
        halves = [await prepare(env, "TxY", b"m%d" % i, f"UY{i}") for i in range(6)]
        replies = await asyncio.gather(*(end(env, h, COMMIT if i % 2 == 0 else ROLLBACK)
                                         for i, h in enumerate(halves)))
        assert [r.code for r in replies] == [RC.SUCCESS] * 6
        assert sorted(await visible(env, "TxY")) == [(b"m0", "UY0"), (b"m2", "UY2"),
                                                     (b"m4", "UY4")]
        assert env.broker.transactions.end.commits == 3
        assert env.broker.transactions.end.rollbacks == 3


class CheckingProducer:
    """A producer connection (registered by HEARTBEAT) that records each CHECK_TRANSACTION_STATE
    and answers with ``decision`` (None: never answers)."""

    def __init__(self, env: Env, decision: int | None, group: str = "PG") -> None:
        self.env = env
        self.decision = decision
        self.group = group
        self.checks: list[tuple[CheckTransactionStateRequestHeader, bytes]] = []
        self.client = RemotingClient(handler=self.handle)

    def handle(self, conn: Connection, cmd: RemotingCommand) -> None:
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return  # NOTIFY_CONSUMER_IDS_CHANGED for the heartbeat's consumer group
        h = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
        self.checks.append((h, cmd.body))
        if self.decision is None:
            return
        msg = decode_record(cmd.body, 0)
        assert msg is not None
        conn.send_oneway(RemotingCommand.request(RequestCode.END_TRANSACTION, EndTransactionRequestHeader(
            producerGroup=msg.properties["PGROUP"], tranStateTableOffset=h.tranStateTableOffset,
            commitLogOffset=h.commitLogOffset, commitOrRollback=self.decision,
            msgId=h.msgId or "", transactionId=h.transactionId, fromTransactionCheck=True,
        ).to_ext()))

    async def register(self) -> None:
        r = await self.env.heartbeat(self.client, "producer@1", group="CG-unused")
        assert r.code == RC.SUCCESS


async def test_undecided_message_is_checked_and_committed(tmp_path: Path) -> None:
    async with running(tmp_path / "store", FAST) as env:
        producer = CheckingProducer(env, COMMIT)
        try:
            await producer.register()
            await prepare(env, "TxC", b"checked", "UC")
            await eventually(lambda: producer.checks)
            h, body = producer.checks[0]
            assert h.msgId == h.transactionId == "UC"
            msg = decode_record(body, 0)
            assert msg is not None and msg.topic == "TxC" and msg.body == b"checked"
            assert msg.properties[TRANSACTION_CHECK_TIMES] == "1"
            assert h.offsetMsgId == env.broker.store.message_id(h.commitLogOffset)
            got: list[tuple[bytes, str]] = []

            async def poll() -> bool:
                got[:] = await visible(env, "TxC")
                return bool(got)

            for _ in range(200):
                if await poll():
                    break
                await asyncio.sleep(0.02)
            assert got == [(b"checked", "UC")]
            await asyncio.sleep(0.5)  # more rounds: resolved, so neither checked nor stored again
            assert len(producer.checks) == 1
            assert await visible(env, "TxC") == [(b"checked", "UC")]
        finally:
            await producer.client.close()


async def test_never_answered_goes_to_check_max_topic(tmp_path: Path) -> None:
    async with running(tmp_path / "store", FAST) as env:
        producer = CheckingProducer(env, None)
        try:
            await producer.register()
            await prepare(env, "TxM", b"orphan", "UM")
            await eventually(lambda: env.broker.transactions.check.stats.check_max == 1)
            assert len(producer.checks) == 2  # transactionCheckMax
            got = await visible(env, TRANS_CHECK_MAX_TIME_TOPIC)
            assert got == [(b"orphan", "UM")]
            rec = records((await env.pull(TRANS_CHECK_MAX_TIME_TOPIC, 0)).body)[0]
            assert rec.properties["REAL_TOPIC"] == "TxM"
            assert await visible(env, "TxM") == []
            await asyncio.sleep(0.5)
            assert len(producer.checks) == 2
        finally:
            await producer.client.close()


async def test_no_producer_online_counts_the_check(tmp_path: Path) -> None:
    async with running(tmp_path / "store", FAST) as env:
        await prepare(env, "TxN", b"nobody", "UN")
        stats = env.broker.transactions.check.stats
        await eventually(lambda: stats.check_max == 1)
        assert stats.no_producer == 2 and stats.checks_sent == 0


async def test_decisions_survive_a_restart(tmp_path: Path) -> None:
    root = tmp_path / "store"
    async with running(root, SLOW) as env:
        committed = await prepare(env, "TxS", b"early", "US1")
        assert (await end(env, committed, COMMIT)).code == RC.SUCCESS
        pending = await prepare(env, "TxS", b"late", "US2")
        rolled = await prepare(env, "TxS", b"never", "US3")
        assert (await end(env, rolled, ROLLBACK)).code == RC.SUCCESS
    async with running(root, FAST) as env:
        producer = CheckingProducer(env, None)
        try:
            # Decisions taken before the restart make a repeated END a no-op after it too.
            assert (await end(env, committed, COMMIT)).code == RC.SUCCESS
            assert (await end(env, rolled, COMMIT)).code == RC.SUCCESS
            assert (await end(env, pending, COMMIT)).code == RC.SUCCESS
            await producer.register()
            assert sorted(await visible(env, "TxS")) == [(b"early", "US1"), (b"late", "US2")]
            assert env.broker.transactions.end.commits == 1
            await eventually(lambda: env.broker.transactions.check.stats.rounds >= 3)
            assert producer.checks == []  # every half message was resolved, none is asked about
            assert env.broker.transactions.check.stats.re_put == 0
            assert env.broker.transactions.processed_offset() == 3
        finally:
            await producer.client.close()


# -- end to end with the first-party TransactionProducer ----------------------------------------


class Listener:
    """Decides with ``execute`` at once and answers checks with ``check``."""

    def __init__(self, execute: LocalTransactionState, check: LocalTransactionState) -> None:
        self.execute = execute
        self.check = check
        self.checked: list[str] = []

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return self.execute

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg.body.decode())
        return self.check


def stored_in(broker: Broker, topic: str) -> int:
    tc = broker.topics.get(topic)
    if tc is None:
        return 0
    return sum(broker.store.max_offset_in_queue(topic, q) for q in range(tc.writeQueueNums))


async def test_transaction_producer_end_to_end(tmp_path: Path) -> None:
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    cluster = Cluster(tmp_path, ns)
    S = LocalTransactionState
    try:
        broker = await cluster.start_broker("broker-a", **FAST)
        listener = Listener(S.COMMIT_MESSAGE, S.COMMIT_MESSAGE)
        p = TransactionProducer("TXPG", listener, namesrv_addr=cluster.ns_addr)
        await p.start()
        try:
            r = await p.send_message_in_transaction(Message("TxP", b"committed"))
            assert r.local_transaction_state is S.COMMIT_MESSAGE
            await eventually(lambda: stored_in(broker, "TxP") == 1)
            listener.execute = S.ROLLBACK_MESSAGE
            await p.send_message_in_transaction(Message("TxP", b"rolled-back"))
            listener.execute = S.UNKNOW
            await p.send_message_in_transaction(Message("TxP", b"checked"))
            await eventually(lambda: listener.checked == ["checked"])
            await eventually(lambda: stored_in(broker, "TxP") == 2)
            await asyncio.sleep(0.5)
            assert stored_in(broker, "TxP") == 2 and listener.checked == ["checked"]
            uniq = r.msg_id
            found = broker.store.look_message_by_id(r.offset_msg_id)
            assert found is not None and found.properties["UNIQ_KEY"] == uniq
        finally:
            await p.shutdown()
    finally:
        await cluster.close()
