"""QueryRoute, QueryAssignment: the routes a 5.x client sees. This front serves one broker, so
every queue names this broker (id 0, the master) at this front's endpoint: sends and receives come
back here.

QueryRoute (the Java proxy's ``RouteActivity.queryRoute``): one ``MessageQueue`` per queue id
below ``max(readQueueNums, writeQueueNums)``, with the permission of the topic's perm masked with
the broker's (READ_WRITE, READ, WRITE or NONE per id: an id below both counts is READ_WRITE) and
``accept_message_types`` from the topic's ``message.type`` attribute (RocketMQ 5's
``TopicMessageType``: NORMAL, FIFO, DELAY, TRANSACTION; a topic without it is MIXED and accepts all
four). An unknown topic is TOPIC_NOT_FOUND, unless ``autoCreateTopicEnable`` is on: then it is
created as a Remoting send to it would create it (from ``TBW102`` with ``defaultTopicQueueNums``
queues, ``TopicConfigManager.create_in_send``), so a 5.x producer of a new topic works as a 4.x one
does. A request without endpoints is ILLEGAL_ACCESS_POINT; a bad topic name ILLEGAL_TOPIC.

QueryAssignment (``RouteActivity.queryAssignment``, for a PushConsumer over POP): when the topic
is readable, one assignment with queue id -1 (any queue: the broker's POP picks) or, for a group
that consumes orderly (``consumeMessageOrderly``), one per read queue; none readable is FORBIDDEN.
An unknown topic is TOPIC_NOT_FOUND (no creation: a consumer never creates a topic), an unknown
group with ``autoCreateSubscriptionGroup`` off CONSUMER_GROUP_NOT_FOUND.
"""

from __future__ import annotations

import ipaddress

from rocketlite.broker.config import PERM_READ, PERM_WRITE
from rocketlite.broker.topics import AUTO_CREATE_TOPIC, TopicError, TopicNotExistError
from rocketlite.protocol.bodies import TopicConfig
from rocketlite.proxy import validate
from rocketlite.proxy.context import FrontContext, ServicerContext
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.pb import service_pb2 as spb
from rocketlite.proxy.status import Code, FrontError, error_status, ok, status

MESSAGE_TYPE_ATTRIBUTE = "message.type"
MT = pb.MessageType
ACCEPTED: dict[str, list[int]] = {
    "NORMAL": [MT.NORMAL], "FIFO": [MT.FIFO], "DELAY": [MT.DELAY],
    "TRANSACTION": [MT.TRANSACTION],
    "MIXED": [MT.NORMAL, MT.FIFO, MT.DELAY, MT.TRANSACTION],
}


def topic_message_type(tc: TopicConfig) -> str:
    """The topic's ``TopicMessageType`` name (MIXED without the attribute)."""
    value = (tc.attributes.get(MESSAGE_TYPE_ATTRIBUTE) or "MIXED").upper()
    return value if value in ACCEPTED else "MIXED"


def accepted_types(tc: TopicConfig) -> list[int]:
    return ACCEPTED[topic_message_type(tc)]


def permission(perm: int) -> int:
    r, w = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if r and w:
        return pb.Permission.READ_WRITE
    if r:
        return pb.Permission.READ
    if w:
        return pb.Permission.WRITE
    return pb.Permission.NONE


def broker_of(ctx: FrontContext) -> pb.Broker:
    """This broker as routes name it: id 0, this front's endpoint."""
    try:
        ip = ipaddress.ip_address(ctx.host)
        scheme = pb.AddressScheme.IPv4 if ip.version == 4 else pb.AddressScheme.IPv6
    except ValueError:
        scheme = pb.AddressScheme.DOMAIN_NAME
    return pb.Broker(name=ctx.broker.config.broker_name, id=0, endpoints=pb.Endpoints(
        scheme=scheme, addresses=[pb.Address(host=ctx.host, port=ctx.port)]))


def _endpoints(endpoints: pb.Endpoints) -> None:
    if not endpoints.addresses:
        raise FrontError(Code.ILLEGAL_ACCESS_POINT,
                         "the request names no endpoints (the access point the client uses)")


def route_topic(ctx: FrontContext, name: str, create: bool) -> TopicConfig:
    """The topic's config; created when ``create`` and ``autoCreateTopicEnable`` allow it
    (module docstring), else ``FrontError(TOPIC_NOT_FOUND)``."""
    broker = ctx.broker
    tc = broker.topics.get(name)
    if tc is None and create and broker.config.auto_create_topic_enable:
        try:
            tc = broker.topics.create_in_send(name, AUTO_CREATE_TOPIC,
                                              broker.config.default_topic_queue_nums)
        except TopicError as e:
            raise FrontError(Code.ILLEGAL_TOPIC, str(e)) from None
        except TopicNotExistError as e:  # past autoCreateTopicsPerMinute
            raise FrontError(Code.TOPIC_NOT_FOUND, str(e)) from None
    if tc is None:
        raise FrontError(Code.TOPIC_NOT_FOUND, f"topic {name} not found on broker "
                         f"{broker.config.broker_name}")
    return tc


def message_queues(ctx: FrontContext, topic: pb.Resource, tc: TopicConfig) -> list[pb.MessageQueue]:
    perm = tc.perm & ctx.broker.config.broker_permission
    r = tc.readQueueNums if perm & PERM_READ else 0
    w = tc.writeQueueNums if perm & PERM_WRITE else 0
    broker = broker_of(ctx)
    types = accepted_types(tc)
    return [pb.MessageQueue(
        topic=topic, id=i, broker=broker, accept_message_types=types,  # type: ignore[arg-type]
        permission=permission((PERM_READ if i < r else 0) | (PERM_WRITE if i < w else 0)),  # type: ignore[arg-type]
    ) for i in range(max(tc.readQueueNums, tc.writeQueueNums))]


async def query_route(
    ctx: FrontContext, request: spb.QueryRouteRequest, context: ServicerContext,
) -> spb.QueryRouteResponse:
    try:
        name = validate.topic_name(request.topic, ctx.broker.config)
        _endpoints(request.endpoints)
        tc = route_topic(ctx, name, create=True)
        return spb.QueryRouteResponse(status=ok(),
                                      message_queues=message_queues(ctx, request.topic, tc))
    except Exception as e:  # noqa: BLE001 - every failure is answered with its status
        return spb.QueryRouteResponse(status=error_status(e))


async def query_assignment(
    ctx: FrontContext, request: spb.QueryAssignmentRequest, context: ServicerContext,
) -> spb.QueryAssignmentResponse:
    try:
        name = validate.topic_name(request.topic, ctx.broker.config)
        group = validate.group_name(request.group)
        _endpoints(request.endpoints)
        tc = route_topic(ctx, name, create=False)
        broker = ctx.broker
        sgc = broker.subscriptions.get(group)
        if sgc is None and not broker.config.auto_create_subscription_group:
            raise FrontError(Code.CONSUMER_GROUP_NOT_FOUND,
                             f"consumer group {group} not found on broker "
                             f"{broker.config.broker_name}")
        perm = tc.perm & broker.config.broker_permission
        if not perm & PERM_READ or tc.readQueueNums <= 0:
            return spb.QueryAssignmentResponse(status=status(
                Code.FORBIDDEN, f"no readable queue: topic {name} is not readable"))
        mq_broker = broker_of(ctx)
        ids = range(tc.readQueueNums) if sgc is not None and sgc.consumeMessageOrderly else [-1]
        return spb.QueryAssignmentResponse(status=ok(), assignments=[
            pb.Assignment(message_queue=pb.MessageQueue(
                topic=request.topic, id=i, permission=permission(perm),  # type: ignore[arg-type]
                broker=mq_broker, accept_message_types=accepted_types(tc)))  # type: ignore[arg-type]
            for i in ids])
    except Exception as e:  # noqa: BLE001 - every failure is answered with its status
        return spb.QueryAssignmentResponse(status=error_status(e))
