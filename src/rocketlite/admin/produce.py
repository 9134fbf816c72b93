"""``sendMessage``: one message sent by the first-party Producer (so a topic the broker creates on
first send, autoCreateTopicEnable, behaves as for any client), to a queue the producer picks or to
the one asked."""

from __future__ import annotations

import dataclasses

from rocketlite.admin.errors import AdminError
from rocketlite.admin.session import AdminSession
from rocketlite.client.errors import MQBrokerError, MQClientError
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer
from rocketlite.common.errors import RemotingError
from rocketlite.protocol.bodies import MessageQueue
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.headers import GetRouteInfoRequestHeader

TOOLS_PRODUCER_GROUP = "TOOLS_PRODUCER"


@dataclasses.dataclass(slots=True)
class SendView:
    """Where the message went: ``msg_id`` is its UNIQ_KEY, ``offset_msg_id`` the broker's id."""

    status: str
    msg_id: str
    offset_msg_id: str
    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int


async def send_message(session: AdminSession, topic: str, body: bytes, *,
                       tags: str | None = None, keys: list[str] | None = None,
                       properties: dict[str, str] | None = None,
                       broker_name: str | None = None, queue_id: int | None = None,
                       group: str = TOOLS_PRODUCER_GROUP) -> SendView:
    """Send one message; to queue ``queue_id`` of ``broker_name`` when both are given."""
    if (broker_name is None) != (queue_id is None):
        raise AdminError("give both a broker name and a queue id, or neither")
    # a NameServer that cannot be reached fails here at once, not after the producer's retries
    await session.namesrv_call(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                               GetRouteInfoRequestHeader(topic=topic),
                               accept=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
    try:
        msg = Message(topic, body, tags=tags, keys=keys or None, properties=properties or {})
        queue = MessageQueue(topic, broker_name, queue_id) if broker_name is not None \
            and queue_id is not None else None
        async with Producer(group, namesrv_addr=session.namesrv,
                            credentials=session.credentials) as p:
            r = await p.send(msg, queue)
    except (MQClientError, MQBrokerError, RemotingError) as e:
        raise AdminError(f"cannot send to {topic!r}: {e}") from e
    return SendView(r.status.value, r.msg_id, r.offset_msg_id, r.queue.topic, r.queue.brokerName,
                    r.queue.queueId, r.queue_offset)
