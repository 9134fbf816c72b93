"""The transactional producer against a real broker on loopback. What the broker does with half
messages is the broker's own tests' business: here the broker's END_TRANSACTION processor is
replaced by a recorder, and check-backs are sent from the broker's side of the producer's
connection, so what the client sends is checked field by field."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from clientconf import Cluster, eventually

from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import SendStatus
from rocketlite.client.sync import SyncTransactionProducer
from rocketlite.client.transaction import (
    COMMIT_OR_ROLLBACK,
    LocalTransactionState,
    TransactionProducer,
)
from rocketlite.formats.message_id import decode_message_id, encode_message_id
from rocketlite.formats.properties import decode_properties
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketlite.remoting.connection import Connection

pytestmark = pytest.mark.integration
GROUP = "TxnGroup"
COMMIT, ROLLBACK, UNKNOW = (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE,
                            LocalTransactionState.UNKNOW)


@dataclass
class Recorder:
    """Stands in for the broker's END_TRANSACTION processor; also records send sysFlags."""

    ends: list[RemotingCommand] = field(default_factory=list)
    send_flags: list[int] = field(default_factory=list)
    send_queues: list[int] = field(default_factory=list)
    reply_code: int | None = None
    """When set, a send is not stored but answered with this code (and made-up offsets)."""

    def headers(self) -> list[EndTransactionRequestHeader]:
        return [EndTransactionRequestHeader.from_ext(c.ext_fields) for c in self.ends]


@dataclass
class Listener:
    execute: Callable[[Message, Any], Any] = lambda m, a: COMMIT
    check: Callable[[MessageExt], Any] = lambda m: COMMIT
    executed: list[tuple[Message, Any]] = field(default_factory=list)
    checked: list[MessageExt] = field(default_factory=list)

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        self.executed.append((msg, arg))
        return self.execute(msg, arg)

    def check_local_transaction(self, msg: MessageExt) -> Any:
        self.checked.append(msg)
        return self.check(msg)


@pytest.fixture
async def recorder(cluster: Cluster) -> AsyncIterator[Recorder]:
    r = Recorder()
    server = cluster.brokers["broker-a"].server
    send = server.processors[RequestCode.SEND_MESSAGE_V2]

    def record_send(conn: Connection, cmd: RemotingCommand) -> Any:
        r.send_flags.append(int(cmd.ext_fields.get("f", "0")))
        r.send_queues.append(int(cmd.ext_fields.get("e", "-1")))
        if r.reply_code is None:
            return send(conn, cmd)
        return cmd.response(r.reply_code, "answered by the test", {
            "msgId": encode_message_id(bytes([127, 0, 0, 1]), 10911, 4242),
            "queueId": cmd.ext_fields["e"], "queueOffset": "7"})

    def record_end(conn: Connection, cmd: RemotingCommand) -> None:
        r.ends.append(cmd)

    server.register(RequestCode.SEND_MESSAGE_V2, record_send)
    server.register(RequestCode.END_TRANSACTION, record_end)
    yield r


async def started(cluster: Cluster, listener: Any, **kw: Any) -> TransactionProducer:
    p = TransactionProducer(GROUP, listener, namesrv_addr=cluster.ns_addr, **kw)
    await p.start()
    return p


def test_states_map_to_java_commit_or_rollback_codes() -> None:
    assert COMMIT_OR_ROLLBACK == {COMMIT: 8, ROLLBACK: 12, UNKNOW: 0}


@pytest.mark.parametrize("state", [COMMIT, ROLLBACK, UNKNOW])
async def test_half_message_then_end_transaction(cluster: Cluster, recorder: Recorder,
                                                 state: LocalTransactionState) -> None:
    listener = Listener(execute=lambda m, a: state)
    p = await started(cluster, listener)
    try:
        r = await p.send_message_in_transaction(Message("TxnTopic", b"order-1", keys="o1"), arg=42)
        await eventually(lambda: recorder.ends)
    finally:
        await p.shutdown()
    assert r.local_transaction_state is state
    assert [(m.body, a) for m, a in listener.executed] == [(b"order-1", 42)]
    assert recorder.send_flags == [0x4]  # TRANSACTION_PREPARED
    assert recorder.send_queues == [r.queue.queueId]  # the queue asked for, not the half queue
    (h,) = recorder.headers()
    assert h.commitOrRollback == COMMIT_OR_ROLLBACK[state]
    assert h.producerGroup == GROUP
    assert h.tranStateTableOffset == r.queue_offset
    assert h.commitLogOffset == decode_message_id(r.offset_msg_id)[2]
    assert h.msgId == r.msg_id and h.transactionId == r.msg_id
    assert not h.fromTransactionCheck
    assert recorder.ends[0].is_oneway
    stored = cluster.brokers["broker-a"].store.look_message(h.commitLogOffset)
    assert stored is not None
    properties = decode_properties(stored.properties_text)
    assert properties["TRAN_MSG"] == "true" and properties["PGROUP"] == GROUP
    assert properties["UNIQ_KEY"] == r.msg_id


async def test_a_raising_or_silent_listener_is_unknow_with_a_remark(cluster: Cluster,
                                                                    recorder: Recorder) -> None:
    def boom(m: Message, a: Any) -> Any:
        raise RuntimeError("database down")

    p = await started(cluster, Listener(execute=boom))
    try:
        r = await p.send_message_in_transaction(Message("TxnTopic", b"x"))
        p.listener = Listener(execute=lambda m, a: None)
        r2 = await p.send_message_in_transaction(Message("TxnTopic", b"y"))
        p.listener = Listener(execute=lambda m, a: "COMMIT_MESSAGE")  # a str, not the enum
        r3 = await p.send_message_in_transaction(Message("TxnTopic", b"z"))
        await eventually(lambda: len(recorder.ends) == 3)
    finally:
        await p.shutdown()
    assert [x.local_transaction_state for x in (r, r2, r3)] == [UNKNOW] * 3
    assert [h.commitOrRollback for h in recorder.headers()] == [0, 0, 0]
    assert "executeLocalTransactionBranch exception" in (recorder.ends[0].remark or "")
    assert "database down" in (recorder.ends[0].remark or "")
    assert recorder.ends[1].remark is None
    assert "not a LocalTransactionState" in (recorder.ends[2].remark or "")


async def test_async_listener_is_awaited(cluster: Cluster, recorder: Recorder) -> None:
    async def execute(m: Message, a: Any) -> LocalTransactionState:
        await asyncio.sleep(0.01)
        return ROLLBACK

    class AsyncListener:
        async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return await execute(msg, arg)

        async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return COMMIT

    p = await started(cluster, AsyncListener())
    try:
        r = await p.send_message_in_transaction(Message("TxnTopic", b"z"))
        await eventually(lambda: recorder.ends)
    finally:
        await p.shutdown()
    assert r.local_transaction_state is ROLLBACK
    assert recorder.headers()[0].commitOrRollback == 12


async def check_back(cluster: Cluster, p: TransactionProducer, recorder: Recorder,
                     listener: Listener) -> tuple[EndTransactionRequestHeader, RemotingCommand, Any]:
    """Prepare a message left UNKNOW, then have the broker ask the producer about it."""
    listener.execute = lambda m, a: UNKNOW
    r = await p.send_message_in_transaction(Message("TxnTopic", b"ask-me", tags="T"))
    await eventually(lambda: recorder.ends)
    conn, cmd = await check_request(cluster, r)
    conn.send_oneway(cmd)
    await eventually(lambda: len(recorder.ends) == 2)
    return recorder.headers()[1], recorder.ends[1], r


async def check_request(cluster: Cluster, r: Any) -> tuple[Connection, RemotingCommand]:
    """The broker's connection to the producer group, and a CHECK_TRANSACTION_STATE for the half
    message of send result ``r`` (its stored record as the body, as the broker sends it)."""
    broker = cluster.brokers["broker-a"]
    offset = decode_message_id(r.offset_msg_id)[2]
    rec = broker.store.look_message(offset)
    assert rec is not None
    body = broker.store.read_raw(offset, rec.total_size)
    assert body is not None
    header = CheckTransactionStateRequestHeader(
        tranStateTableOffset=r.queue_offset, commitLogOffset=offset, msgId=r.msg_id,
        transactionId="tx-from-broker", offsetMsgId=r.offset_msg_id)
    # the producer heartbeats a broker as soon as a route names it
    await eventually(lambda: broker.producers.channels(GROUP))
    conn = broker.producers.channels(GROUP)[0]
    assert isinstance(conn, Connection)
    return conn, RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), body)


@pytest.mark.parametrize("state", [COMMIT, ROLLBACK])
async def test_check_back_is_answered_from_the_listener(cluster: Cluster, recorder: Recorder,
                                                        state: LocalTransactionState) -> None:
    listener = Listener(check=lambda m: state)
    p = await started(cluster, listener)
    try:
        h, cmd, r = await check_back(cluster, p, recorder, listener)
    finally:
        await p.shutdown()
    (checked,) = listener.checked
    assert checked.body == b"ask-me" and checked.tags == "T" and checked.msg_id == r.msg_id
    assert checked.properties["UNIQ_KEY"] == r.msg_id
    assert checked.properties["__transactionId__"] == "tx-from-broker"
    assert h.fromTransactionCheck
    assert h.commitOrRollback == COMMIT_OR_ROLLBACK[state]
    assert h.commitLogOffset == decode_message_id(r.offset_msg_id)[2]
    assert h.tranStateTableOffset == r.queue_offset
    assert h.msgId == r.msg_id and h.transactionId == "tx-from-broker"
    assert h.producerGroup == GROUP
    assert cmd.is_oneway and cmd.remark is None


async def test_a_raising_check_answers_unknow(cluster: Cluster, recorder: Recorder) -> None:
    def boom(m: MessageExt) -> Any:
        raise ValueError("no idea")

    listener = Listener(check=boom)
    p = await started(cluster, listener)
    try:
        h, cmd, _ = await check_back(cluster, p, recorder, listener)
    finally:
        await p.shutdown()
    assert h.commitOrRollback == 0 and h.fromTransactionCheck
    assert "no idea" in (cmd.remark or "")


async def test_delay_is_cleared_and_timers_and_bad_setups_are_refused(cluster: Cluster,
                                                                      recorder: Recorder) -> None:
    with pytest.raises(MQClientError, match="TransactionListener"):
        await TransactionProducer(GROUP, None, namesrv_addr=cluster.ns_addr).start()
    with pytest.raises(MQClientError, match="at least 1"):
        TransactionProducer(GROUP, Listener(), check_backlog=0)
    p = await started(cluster, Listener())
    try:
        with pytest.raises(MQClientError, match="delivery time"):
            await p.send_message_in_transaction(Message("TxnTopic", b"t", deliver_time_ms=1))
        r = await p.send_message_in_transaction(Message("TxnTopic", b"d", delay_level=3))
        await eventually(lambda: recorder.ends)
        plain = await p.send(Message("TxnTopic", b"plain"))  # still a Producer
    finally:
        await p.shutdown()
    h = recorder.headers()[0]
    stored = cluster.brokers["broker-a"].store.look_message(h.commitLogOffset)
    assert stored is not None and "DELAY" not in decode_properties(stored.properties_text)
    assert r.local_transaction_state is COMMIT
    assert recorder.send_flags == [0x4, 0]
    assert plain.msg_id != r.msg_id


async def test_the_listener_sees_the_transaction_id_on_a_copy(cluster: Cluster, recorder: Recorder) -> None:
    listener = Listener()
    p = await started(cluster, listener)
    msg = Message("TxnTopic", b"same", properties={"order": "7"})
    try:
        r1 = await p.send_message_in_transaction(msg)
        r2 = await p.send_message_in_transaction(msg)  # the caller's message is sendable again
        await eventually(lambda: len(recorder.ends) == 2)
    finally:
        await p.shutdown()
    assert msg.properties == {"order": "7"}
    seen = [m.properties for m, _ in listener.executed]
    assert [(s["UNIQ_KEY"], s["__transactionId__"], s["order"]) for s in seen] == [
        (r1.msg_id, r1.msg_id, "7"), (r2.msg_id, r2.msg_id, "7")]
    assert r1.msg_id != r2.msg_id
    assert [h.msgId for h in recorder.headers()] == [r1.msg_id, r2.msg_id]


async def test_batches_and_bad_input_are_refused(cluster: Cluster, recorder: Recorder) -> None:
    p = TransactionProducer(GROUP, Listener(), namesrv_addr=cluster.ns_addr)
    with pytest.raises(MQClientError, match="not started"):
        await p.send_message_in_transaction(Message("TxnTopic", b"early"))
    with pytest.raises(MQClientError, match="at least 1"):
        TransactionProducer(GROUP, Listener(), check_concurrency=0)
    await p.start()
    try:
        batch: Any = [Message("TxnTopic", b"a"), Message("TxnTopic", b"b")]
        with pytest.raises(MQClientError, match="batches cannot be sent in a transaction"):
            await p.send_message_in_transaction(batch)
        with pytest.raises(MQClientError, match="empty"):
            await p.send_message_in_transaction(Message("TxnTopic", b""))
        with pytest.raises(MQClientError, match="reserved"):
            await p.send_message_in_transaction(Message("TxnTopic", b"x", properties={"PGROUP": "other"}))
        plain = await p.send_batch([Message("TxnTopic", b"a"), Message("TxnTopic", b"b")])
    finally:
        await p.shutdown()
    assert plain.status is SendStatus.SEND_OK  # a plain batch, as SEND_BATCH_MESSAGE
    assert recorder.ends == [] and recorder.send_flags == []


async def test_a_send_not_ok_rolls_back_without_running_the_listener(cluster: Cluster,
                                                                     recorder: Recorder) -> None:
    listener = Listener()
    p = await started(cluster, listener)
    recorder.reply_code = ResponseCode.FLUSH_DISK_TIMEOUT
    try:
        r = await p.send_message_in_transaction(Message("TxnTopic", b"slow disk"))
        await eventually(lambda: recorder.ends)
    finally:
        await p.shutdown()
    assert r.status is SendStatus.FLUSH_DISK_TIMEOUT
    assert r.local_transaction_state is ROLLBACK and listener.executed == []
    (h,) = recorder.headers()
    assert h.commitOrRollback == 12 and not h.fromTransactionCheck
    assert (h.tranStateTableOffset, h.commitLogOffset, h.msgId) == (7, 4242, r.msg_id)


async def test_a_failed_half_send_raises_and_ends_nothing(cluster: Cluster, recorder: Recorder) -> None:
    listener = Listener()
    p = await started(cluster, listener)
    recorder.reply_code = ResponseCode.MESSAGE_ILLEGAL  # not retried on another broker
    try:
        with pytest.raises(MQBrokerError) as info:
            await p.send_message_in_transaction(Message("TxnTopic", b"refused"))
        await asyncio.sleep(0.2)
    finally:
        await p.shutdown()
    assert info.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert listener.executed == [] and recorder.ends == []


async def test_an_unsendable_end_is_only_logged(cluster: Cluster, recorder: Recorder,
                                                caplog: pytest.LogCaptureFixture,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    p = await started(cluster, Listener())

    async def broken(*args: Any) -> None:
        raise MQClientError("connection reset")

    monkeypatch.setattr(p, "_send_end", broken)
    try:
        with caplog.at_level(logging.WARNING, "rocketlite.client.transaction"):
            r = await p.send_message_in_transaction(Message("TxnTopic", b"lost end"))
    finally:
        await p.shutdown()
    assert r.local_transaction_state is COMMIT  # the broker's check-back settles it
    assert "END_TRANSACTION could not be sent" in caplog.text and "connection reset" in caplog.text


async def test_checks_beyond_the_backlog_are_dropped(cluster: Cluster, recorder: Recorder,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    release = asyncio.Event()

    class Slow:
        def __init__(self) -> None:
            self.checked: list[MessageExt] = []

        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return UNKNOW

        async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            self.checked.append(msg)
            await release.wait()
            return ROLLBACK

    listener = Slow()
    p = await started(cluster, listener, check_concurrency=1, check_backlog=1)
    try:
        r = await p.send_message_in_transaction(Message("TxnTopic", b"busy"))
        await eventually(lambda: recorder.ends)
        conn, cmd = await check_request(cluster, r)
        conn.send_oneway(cmd)
        await eventually(lambda: len(listener.checked) == 1)  # the only worker is busy
        with caplog.at_level(logging.WARNING, "rocketlite.client.transaction"):
            conn.send_oneway(cmd)  # waits in the backlog
            conn.send_oneway(cmd)  # the backlog is full: dropped
            await eventually(lambda: "dropped" in caplog.text)
        release.set()
        await eventually(lambda: len(recorder.ends) == 3)
        await asyncio.sleep(0.2)
    finally:
        await p.shutdown()
    assert len(listener.checked) == 2 and len(recorder.ends) == 3
    assert [h.commitOrRollback for h in recorder.headers()[1:]] == [12, 12]


async def test_shutdown_stops_checks_and_sends(cluster: Cluster, recorder: Recorder,
                                               caplog: pytest.LogCaptureFixture) -> None:
    never = asyncio.Event()
    checking = asyncio.Event()

    class Stuck:
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return UNKNOW

        async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            checking.set()
            await never.wait()
            return COMMIT

    p = await started(cluster, Stuck())
    r = await p.send_message_in_transaction(Message("TxnTopic", b"stuck"))
    conn, cmd = await check_request(cluster, r)
    conn.send_oneway(cmd)
    async with asyncio.timeout(5):
        await checking.wait()
        await p.shutdown()  # does not wait for the stuck check
        await p.shutdown()  # twice is fine
    with pytest.raises(MQClientError, match="not started"):
        await p.send_message_in_transaction(Message("TxnTopic", b"late"))
    with pytest.raises(MQClientError, match="not started"):
        await p.send(Message("TxnTopic", b"late"))
    with caplog.at_level(logging.WARNING, "rocketlite.client.transaction"):
        p.on_check_transaction("127.0.0.1:1", cmd)
    assert "after shutdown" in caplog.text
    await asyncio.sleep(0.1)
    assert len(recorder.ends) == 1  # only the UNKNOW end of the send itself


async def test_sync_transaction_producer(cluster: Cluster, recorder: Recorder) -> None:
    listener = Listener(execute=lambda m, a: ROLLBACK if a == "no" else COMMIT)

    def scenario() -> list[LocalTransactionState]:
        with SyncTransactionProducer(GROUP, listener, namesrv_addr=cluster.ns_addr) as producer:
            states = [producer.send_message_in_transaction(Message("TxnTopic", b"s"), arg, timeout=10.0)
                      .local_transaction_state for arg in ("yes", "no")]
            assert producer.send(Message("TxnTopic", b"plain")).status is SendStatus.SEND_OK
        with pytest.raises(MQClientError, match="shut down"):
            producer.send_message_in_transaction(Message("TxnTopic", b"late"))
        return states

    assert await asyncio.to_thread(scenario) == [COMMIT, ROLLBACK]
    await eventually(lambda: len(recorder.ends) == 2)
    assert [h.commitOrRollback for h in recorder.headers()] == [8, 12]
    assert recorder.send_flags == [0x4, 0x4, 0]
