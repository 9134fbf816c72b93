"""SYNC_MASTER through the gRPC front (issue 20): SendMessage answers OK once a slave acked the
append, SLAVE_PERSISTENCE_TIMEOUT when none did within syncFlushTimeout and HA_NOT_AVAILABLE when
no slave is connected (the Java proxy's codes for FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE),
the message stored in every case. Each server implementation; all on loopback in this process."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from synchelp import TOPIC, FakeSlave, eventually, world

from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.pb import service_pb2_grpc
from rocketlite.proxy.server import GrpcFront

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

C = pb.Code
METADATA = (("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2"),
            ("x-mq-client-version", "5.1.2"), ("x-mq-client-id", "sync-test@1#0"),
            ("x-mq-namespace", ""), ("x-mq-request-id", "r-1"))


def message(body: bytes, n: int) -> pb.Message:
    sp = pb.SystemProperties(
        message_id=f"01AABBCCDDEEFF00010000{n:012X}", body_encoding=pb.Encoding.IDENTITY,
        born_timestamp=Timestamp(seconds=int(time.time())), born_host="test-host",
        message_type=pb.MessageType.NORMAL)
    return pb.Message(topic=pb.Resource(name=TOPIC), system_properties=sp, body=body)


@pytest.mark.parametrize("impl", ["native", "grpcio"])
async def test_grpc_send_answers_by_the_slaves_outcome(tmp_path: Path, impl: str) -> None:
    async with world(tmp_path) as w:
        master = await w.start_master(syncFlushTimeout="1000")
        front = GrpcFront(master, 0, host="127.0.0.1", impl=impl)
        await front.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{front.port}")
        stub = service_pb2_grpc.MessagingServiceStub(channel)

        async def send(*bodies: bytes) -> spb.SendMessageResponse:
            msgs = [message(b, i) for i, b in enumerate(bodies)]
            return await stub.SendMessage(spb.SendMessageRequest(messages=msgs), timeout=10,
                                          metadata=METADATA)

        try:
            top = master.store.commitlog.max_offset
            r = await send(b"alone")
            assert r.status.code == C.HA_NOT_AVAILABLE, r.status.message
            assert [e.status.code for e in r.entries] == [C.HA_NOT_AVAILABLE]
            assert master.store.commitlog.max_offset > top  # stored all the same

            slave = await FakeSlave.connect(w.ha_address, master.store.commitlog.max_offset)
            try:
                await eventually(lambda: master.ha_server is not None
                                 and master.ha_server.max_acked >= 0)
                t0 = time.monotonic()
                r = await send(b"late-1", b"late-2")
                took = time.monotonic() - t0
                assert r.status.code == C.SLAVE_PERSISTENCE_TIMEOUT, r.status.message
                assert [e.status.code for e in r.entries] == [C.SLAVE_PERSISTENCE_TIMEOUT] * 2
                assert 0.9 <= took <= 4.0, took
                assert w.transfer.timeouts == 1  # one append, one waiter
            finally:
                await slave.close()

            await w.start_slave()
            await w.synced()
            r = await send(b"acked")
            assert r.status.code == C.OK, r.status.message
            assert [e.status.code for e in r.entries] == [C.OK]
            assert w.slave is not None
            assert w.slave.store.commitlog.max_offset == master.store.commitlog.max_offset
            await eventually(lambda: master.store.dispatcher.dispatch_from
                             >= master.store.commitlog.max_offset)
            bodies = []
            for qid in range(4):
                cq = master.store.find_queue(TOPIC, qid)
                if cq is not None:
                    for phys, _size, _tag in cq.get_units(cq.min_offset, 100):
                        rec = master.store.look_message(phys)
                        assert rec is not None
                        bodies.append(rec.body)
            assert sorted(bodies) == [b"acked", b"alone", b"late-1", b"late-2"]
        finally:
            await channel.close()
            await front.close()
