"""Heartbeat, NotifyClientTermination and the Telemetry settings exchange through the generated
stub: the broker's ConsumerManager / ProducerManager see the 5.x client, the settings round trip
carries the server's values, and bad commands get a status instead of a broken stream."""

from __future__ import annotations

import asyncio

from grpchelp import CLIENT_ID, GrpcEnv, client_metadata
from sendhelp import Stream, consumer_settings, producer_settings

from rocketlite.broker.subscriptions import SubscriptionGroupConfig
from rocketlite.protocol.bodies import ConsumeType
from rocketlite.proxy.channels import TelemetryChannel
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb

NO_ID = tuple(kv for kv in client_metadata() if kv[0] != "x-mq-client-id")


async def test_heartbeat_and_termination_are_seen_by_the_consumer_manager(g: GrpcEnv) -> None:
    r = await g.stub.Heartbeat(spb.HeartbeatRequest(
        group=pb.Resource(name="G1"), client_type=pb.ClientType.SIMPLE_CONSUMER),
        timeout=5, metadata=client_metadata())
    assert r.status.code == pb.Code.OK
    info = g.broker.consumers.get("G1")
    assert info is not None and info.client_ids() == [CLIENT_ID]
    assert info.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert isinstance(next(iter(info.channels)), TelemetryChannel)
    assert g.broker.topics.get("%RETRY%G1") is not None
    r2 = await g.stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(
        group=pb.Resource(name="G1")), timeout=5, metadata=client_metadata())
    assert r2.status.code == pb.Code.OK
    assert g.broker.consumers.get("G1") is None
    assert g.front.ctx.sessions.get(CLIENT_ID) is None


async def test_heartbeat_errors(g: GrpcEnv) -> None:
    r = await g.stub.Heartbeat(spb.HeartbeatRequest(
        group=pb.Resource(name="G1"), client_type=pb.ClientType.SIMPLE_CONSUMER),
        timeout=5, metadata=NO_ID)
    assert r.status.code == pb.Code.CLIENT_ID_REQUIRED
    r = await g.stub.Heartbeat(spb.HeartbeatRequest(
        group=pb.Resource(name="G1"), client_type=pb.ClientType.CLIENT_TYPE_UNSPECIFIED),
        timeout=5, metadata=client_metadata())
    assert r.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE
    r = await g.stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.ClientType.PUSH_CONSUMER),
                               timeout=5, metadata=client_metadata())
    assert r.status.code == pb.Code.ILLEGAL_CONSUMER_GROUP
    r3 = await g.stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(),
                                              timeout=5, metadata=client_metadata("stranger"))
    assert r3.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE


async def test_producer_settings_round_trip_and_registration(g: GrpcEnv) -> None:
    s = Stream(g)
    try:
        await s.send(spb.TelemetryCommand(settings=producer_settings("T1", "T2")))
        r = await s.recv()
        assert r.status.code == pb.Code.OK
        assert r.settings.publishing.max_body_size == g.broker.store_config.max_message_size
        assert r.settings.publishing.validate_message_type
        assert r.settings.backoff_policy.max_attempts == 3
        assert [t.name for t in r.settings.publishing.topics] == ["T1", "T2"]
        chans = g.broker.producers.channels("T1")
        assert len(chans) == 1 and getattr(chans[0], "is_open", False)
        assert g.broker.producers.channels("T2") == chans
        # Settings sent again replace the first: T2 is no longer published to.
        await s.send(spb.TelemetryCommand(settings=producer_settings("T1")))
        assert (await s.recv()).status.code == pb.Code.OK
        assert g.broker.producers.channels("T2") == []
        assert g.broker.producers.channels("T1") == chans
    finally:
        await s.close()
    for _ in range(100):  # the stream's end closes the channel and leaves the groups
        if not g.broker.producers.channels("T1"):
            break
        await asyncio.sleep(0.02)
    assert g.broker.producers.channels("T1") == []


async def test_consumer_settings_carry_the_group_settings(g: GrpcEnv) -> None:
    g.broker.subscriptions.update(SubscriptionGroupConfig(
        groupName="GF", consumeMessageOrderly=True, retryMaxTimes=5))
    s = Stream(g)
    try:
        await s.send(spb.TelemetryCommand(settings=consumer_settings(
            "GF", pb.ClientType.PUSH_CONSUMER)))
        r = await s.recv()
        assert r.status.code == pb.Code.OK
        sub = r.settings.subscription
        assert sub.fifo and sub.receive_batch_size == 32
        assert sub.long_polling_timeout.seconds == 20
        assert r.settings.backoff_policy.max_attempts == 6
        assert r.settings.backoff_policy.customized_backoff.next[0].seconds == 1
        info = g.broker.consumers.get("GF")
        assert info is not None and info.consume_type is ConsumeType.CONSUME_PASSIVELY
        assert info.subscriptions["T1"].tagsSet == {"a", "b"}
    finally:
        await s.close()


async def test_bogus_commands_get_a_status_and_the_stream_goes_on(g: GrpcEnv) -> None:
    s = Stream(g)
    try:
        await s.send(spb.TelemetryCommand(thread_stack_trace=spb.ThreadStackTrace(
            nonce="n-1", thread_stack_trace="...")))
        r = await s.recv()
        assert r.status.code == pb.Code.BAD_REQUEST and "n-1" in r.status.message
        await s.send(spb.TelemetryCommand(settings=pb.Settings(
            client_type=pb.ClientType.PRODUCER)))
        r = await s.recv()
        assert r.status.code == pb.Code.BAD_REQUEST and "publishing" in r.status.message
        await s.send(spb.TelemetryCommand(settings=producer_settings("bad topic!")))
        assert (await s.recv()).status.code == pb.Code.ILLEGAL_TOPIC
        await s.send(spb.TelemetryCommand(settings=consumer_settings(
            "G1", pb.ClientType.PRODUCER)))
        assert (await s.recv()).status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE
        await s.send(spb.TelemetryCommand(settings=producer_settings("T1")))
        assert (await s.recv()).status.code == pb.Code.OK
    finally:
        await s.close()


async def test_telemetry_without_client_id_is_answered_and_ended(g: GrpcEnv) -> None:
    s = Stream(g, NO_ID)
    try:
        await s.send(spb.TelemetryCommand(settings=producer_settings("T1")))
        r = await s.recv()
        assert r.status.code == pb.Code.CLIENT_ID_REQUIRED
    finally:
        await s.close()


async def test_an_idle_session_is_swept_and_leaves_its_group(g: GrpcEnv) -> None:
    r = await g.stub.Heartbeat(spb.HeartbeatRequest(
        group=pb.Resource(name="G2"), client_type=pb.ClientType.PUSH_CONSUMER),
        timeout=5, metadata=client_metadata())
    assert r.status.code == pb.Code.OK
    assert g.front.sweep() == 0  # not idle yet
    g.front.session_idle_s = 0.0
    await asyncio.sleep(0.01)
    assert g.front.sweep() == 1
    assert g.broker.consumers.get("G2") is None
    assert g.front.ctx.sessions.get(CLIENT_ID) is None
