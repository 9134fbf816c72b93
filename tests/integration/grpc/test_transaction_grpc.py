"""Transactional messages through the generated stub: SendMessage of a TRANSACTION message,
EndTransaction commit and rollback (also after a broker restart), the orphaned transaction check
reaching the producer's Telemetry stream and its answer resolving it, and the refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path

from grpchelp import GrpcEnv, client_metadata, grpc_world
from sendhelp import Stream, message, producer_settings, records, send, wait_records

from rocketlite.formats.message_id import encode_message_id
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb

C = pb.Code
TX = pb.MessageType.TRANSACTION


def topic(g: GrpcEnv, name: str = "X1") -> None:
    g.broker.topics.update(TopicConfig(topicName=name, readQueueNums=2, writeQueueNums=2,
                                       attributes={"message.type": "TRANSACTION"}))


async def end(g: GrpcEnv, topic: str, message_id: str, transaction_id: str,
              resolution: int = pb.TransactionResolution.COMMIT,
              source: int = pb.TransactionSource.SOURCE_CLIENT) -> spb.EndTransactionResponse:
    return await g.stub.EndTransaction(spb.EndTransactionRequest(
        topic=pb.Resource(name=topic), message_id=message_id, transaction_id=transaction_id,
        resolution=resolution, source=source), timeout=5, metadata=client_metadata())  # type: ignore[arg-type]


async def test_commit_makes_the_message_readable(g: GrpcEnv) -> None:
    topic(g)
    r = await send(g, message("X1", b"tx-body", kind=TX, props={"p": "1"}))
    e = r.entries[0]
    assert e.status.code == C.OK and e.transaction_id
    await asyncio.sleep(0.05)
    assert records(g, "X1") == []
    done = await end(g, "X1", e.message_id, e.transaction_id)
    assert done.status.code == C.OK, done.status
    recs = await wait_records(g, "X1", 1)
    assert [rec.body for rec in recs] == [b"tx-body"]
    props = recs[0].properties
    assert props["UNIQ_KEY"] == e.message_id and props["p"] == "1"
    assert "TRAN_MSG" not in props
    again = await end(g, "X1", e.message_id, e.transaction_id)  # a retry changes nothing
    assert again.status.code == C.OK
    await asyncio.sleep(0.05)
    assert len(records(g, "X1")) == 1


async def test_rollback_discards_the_message(g: GrpcEnv) -> None:
    topic(g)
    e = (await send(g, message("X1", kind=TX))).entries[0]
    done = await end(g, "X1", e.message_id, e.transaction_id, pb.TransactionResolution.ROLLBACK)
    assert done.status.code == C.OK
    assert g.broker.transactions.end.rollbacks == 1
    await asyncio.sleep(0.1)
    assert records(g, "X1") == []


async def test_commit_after_a_restart(tmp_path: Path) -> None:
    async with grpc_world(tmp_path / "s") as g:
        topic(g)
        e = (await send(g, message("X1", b"survives", kind=TX))).entries[0]
    async with grpc_world(tmp_path / "s") as g:
        done = await end(g, "X1", e.message_id, e.transaction_id)
        assert done.status.code == C.OK, done.status
        recs = await wait_records(g, "X1", 1)
        assert [rec.body for rec in recs] == [b"survives"]


async def test_end_transaction_refusals(g: GrpcEnv) -> None:
    topic(g)
    e = (await send(g, message("X1", kind=TX))).entries[0]
    r = await end(g, "X1", e.message_id, "not-an-id")
    assert r.status.code == C.INVALID_TRANSACTION_ID and "not-an-id" in r.status.message
    cl = g.broker.store.commitlog
    far = encode_message_id(cl.store_host, cl.store_port, 10 << 20)
    r = await end(g, "X1", e.message_id, far)
    assert r.status.code == C.INVALID_TRANSACTION_ID and "no message" in r.status.message
    r = await end(g, "X1", "01FFFF", e.transaction_id)
    assert r.status.code == C.INVALID_TRANSACTION_ID and "message id" in r.status.message
    topic(g, "X2")
    r = await end(g, "X2", e.message_id, e.transaction_id)
    assert r.status.code == C.INVALID_TRANSACTION_ID and "producer group" in r.status.message
    g.broker.topics.update(TopicConfig(topicName="N1", readQueueNums=1, writeQueueNums=1))
    assert (await send(g, message("N1"))).status.code == C.OK
    normal = (await wait_records(g, "N1", 1))[0]  # a normal message is no half message
    r = await end(g, "N1", e.message_id, g.broker.store.message_id(normal.commit_log_offset))
    assert r.status.code == C.INVALID_TRANSACTION_ID and "not a half" in r.status.message
    r = await end(g, "X1", "", e.transaction_id)
    assert r.status.code == C.ILLEGAL_MESSAGE_ID
    r = await end(g, "X1", e.message_id, e.transaction_id,
                  pb.TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED)
    assert r.status.code == C.OK  # unknown yet: nothing happens, the check asks later
    assert g.broker.transactions.end.commits == 0


async def test_orphaned_transaction_is_checked_over_telemetry(tmp_path: Path) -> None:
    props = {"transactionCheckInterval": "100", "transactionTimeOut": "200"}
    async with grpc_world(tmp_path / "s", props) as g:
        topic(g)
        s = Stream(g)
        try:
            await s.send(spb.TelemetryCommand(settings=producer_settings("X1")))
            assert (await s.recv()).status.code == C.OK
            e = (await send(g, message("X1", b"orphan", kind=TX, tag="T"))).entries[0]
            cmd = await s.recv()
            check = cmd.recover_orphaned_transaction_command
            assert cmd.WhichOneof("command") == "recover_orphaned_transaction_command"
            assert check.message.system_properties.message_id == e.message_id
            assert check.message.body == b"orphan" and check.message.topic.name == "X1"
            assert check.message.system_properties.tag == "T"
            assert check.message.system_properties.message_type == TX
            assert "REAL_TOPIC" not in check.message.user_properties
            assert check.transaction_id
            done = await end(g, "X1", check.message.system_properties.message_id,
                             check.transaction_id, source=pb.TransactionSource.SOURCE_SERVER_CHECK)
            assert done.status.code == C.OK, done.status
            recs = await wait_records(g, "X1", 1)
            assert [rec.body for rec in recs] == [b"orphan"]
        finally:
            await s.close()
