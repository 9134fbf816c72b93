"""QueryRoute and QueryAssignment through the generated stub: queues, permissions and accepted
message types of a topic on this broker at this front's endpoint, auto-creation, and the errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from grpchelp import GrpcEnv, client_metadata, grpc_world

from rocketlite.broker.subscriptions import SubscriptionGroupConfig
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb

MT = pb.MessageType


def endpoints(g: GrpcEnv) -> pb.Endpoints:
    return pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                        addresses=[pb.Address(host="127.0.0.1", port=g.front.port)])


async def route(g: GrpcEnv, topic: str, with_endpoints: bool = True) -> spb.QueryRouteResponse:
    req = spb.QueryRouteRequest(topic=pb.Resource(name=topic))
    if with_endpoints:
        req.endpoints.CopyFrom(endpoints(g))
    return await g.stub.QueryRoute(req, timeout=5, metadata=client_metadata())


async def test_route_of_an_existing_topic_names_each_queue_on_this_front(g: GrpcEnv) -> None:
    g.broker.topics.update(TopicConfig(topicName="T1", readQueueNums=4, writeQueueNums=2))
    r = await route(g, "T1")
    assert r.status.code == pb.Code.OK
    assert [q.id for q in r.message_queues] == [0, 1, 2, 3]
    assert [q.permission for q in r.message_queues] == [
        pb.Permission.READ_WRITE, pb.Permission.READ_WRITE, pb.Permission.READ, pb.Permission.READ]
    q = r.message_queues[0]
    assert q.topic.name == "T1"
    assert q.broker.name == "broker-g" and q.broker.id == 0
    assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [("127.0.0.1", g.front.port)]
    assert list(q.accept_message_types) == [MT.NORMAL, MT.FIFO, MT.DELAY, MT.TRANSACTION]


async def test_route_carries_the_topic_message_type_and_the_broker_permission(g: GrpcEnv) -> None:
    g.broker.topics.update(TopicConfig(topicName="F1", readQueueNums=2, writeQueueNums=2,
                                       attributes={"message.type": "FIFO"}))
    r = await route(g, "F1")
    assert all(list(q.accept_message_types) == [MT.FIFO] for q in r.message_queues)
    g.broker.config = dataclasses.replace(g.broker.config, broker_permission=4)  # read only
    r = await route(g, "F1")
    assert {q.permission for q in r.message_queues} == {pb.Permission.READ}


async def test_an_unknown_topic_is_created_when_auto_creation_is_on(g: GrpcEnv) -> None:
    assert g.broker.topics.get("NEW1") is None
    r = await route(g, "NEW1")
    assert r.status.code == pb.Code.OK
    assert len(r.message_queues) == g.broker.config.default_topic_queue_nums
    assert g.broker.topics.get("NEW1") is not None


async def test_an_unknown_topic_is_not_found_without_auto_creation(tmp_path: Path) -> None:
    async with grpc_world(tmp_path / "s", {"autoCreateTopicEnable": "false"}) as g:
        r = await route(g, "NOPE")
        assert r.status.code == pb.Code.TOPIC_NOT_FOUND
        assert "NOPE" in r.status.message
        assert g.broker.topics.get("NOPE") is None


async def test_route_errors(g: GrpcEnv) -> None:
    r = await route(g, "T1", with_endpoints=False)
    assert r.status.code == pb.Code.ILLEGAL_ACCESS_POINT
    r = await route(g, "bad topic!")
    assert r.status.code == pb.Code.ILLEGAL_TOPIC and "bad topic" in r.status.message
    r = await route(g, "")
    assert r.status.code == pb.Code.ILLEGAL_TOPIC
    r = await route(g, "TBW102")
    assert r.status.code == pb.Code.ILLEGAL_TOPIC and "system topic" in r.status.message


async def assignment(g: GrpcEnv, topic: str, group: str) -> spb.QueryAssignmentResponse:
    return await g.stub.QueryAssignment(spb.QueryAssignmentRequest(
        topic=pb.Resource(name=topic), group=pb.Resource(name=group), endpoints=endpoints(g)),
        timeout=5, metadata=client_metadata())


async def test_assignment_is_one_any_queue_or_every_queue_for_an_orderly_group(g: GrpcEnv) -> None:
    g.broker.topics.update(TopicConfig(topicName="A1", readQueueNums=3, writeQueueNums=3))
    r = await assignment(g, "A1", "G1")
    assert r.status.code == pb.Code.OK
    assert [a.message_queue.id for a in r.assignments] == [-1]
    assert r.assignments[0].message_queue.permission == pb.Permission.READ_WRITE
    assert r.assignments[0].message_queue.broker.endpoints.addresses[0].port == g.front.port
    g.broker.subscriptions.update(SubscriptionGroupConfig(groupName="GF",
                                                          consumeMessageOrderly=True))
    r = await assignment(g, "A1", "GF")
    assert [a.message_queue.id for a in r.assignments] == [0, 1, 2]


async def test_assignment_errors(tmp_path: Path) -> None:
    async with grpc_world(tmp_path / "s", {"autoCreateSubscriptionGroup": "false"}) as g:
        g.broker.topics.update(TopicConfig(topicName="A1", readQueueNums=1, writeQueueNums=1))
        r = await assignment(g, "NOPE", "G1")
        assert r.status.code == pb.Code.TOPIC_NOT_FOUND
        r = await assignment(g, "A1", "UNKNOWN_G")
        assert r.status.code == pb.Code.CONSUMER_GROUP_NOT_FOUND
        assert "UNKNOWN_G" in r.status.message
        r = await assignment(g, "A1", "")
        assert r.status.code == pb.Code.ILLEGAL_CONSUMER_GROUP
        g.broker.subscriptions.update(SubscriptionGroupConfig(groupName="G1"))
        g.broker.topics.update(TopicConfig(topicName="W1", readQueueNums=1, writeQueueNums=1,
                                           perm=2))
        r = await assignment(g, "W1", "G1")
        assert r.status.code == pb.Code.FORBIDDEN
