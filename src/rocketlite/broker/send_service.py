"""The topic checks of a send, shared by every transport (the Remoting send processors and the
gRPC front): is the broker writable, may clients write the topic, does it exist (or may a send
create it), is it writable. Each refusal is a typed error whose message is the remark Java's
``AbstractSendMessageProcessor.msgCheck`` gives, so each transport maps it to its own code:

================================  ===========================  ==============================
error                             Remoting                     gRPC (apache.rocketmq.v2)
================================  ===========================  ==============================
``SendForbiddenError``            NO_PERMISSION (16)           FORBIDDEN
``TopicNotExistError``            TOPIC_NOT_EXIST (17)         TOPIC_NOT_FOUND
``TopicError`` (a bad name)       MESSAGE_ILLEGAL (13)         ILLEGAL_TOPIC
================================  ===========================  ==============================

Auto-creation (``createTopicInSendMessageMethod``): an unknown topic is created from
``default_topic`` (a Remoting client names ``TBW102``; the gRPC front always does) when that topic
exists and may be inherited, TBW102 only with ``autoCreateTopicEnable``. A group's retry topic
(``%RETRY%<group>``) is created with one queue even when auto-creation is off (a consumer's
re-send for retry), as Java does. Past ``autoCreateTopicsPerMinute`` an unknown topic is
``TopicNotExistError`` with a remark naming that limit (``broker/create_rate.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketlite.broker.config import PERM_WRITE
from rocketlite.broker.topics import (
    AUTO_CREATE_TOPIC,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    TopicError,
    TopicNotExistError,
)
from rocketlite.common.errors import NoPermissionError
from rocketlite.protocol.bodies import TopicConfig

if TYPE_CHECKING:
    from rocketlite.broker.broker import Broker

__all__ = ["SendForbiddenError", "TopicError", "TopicNotExistError", "topic_for_send"]


class SendForbiddenError(NoPermissionError):
    """The broker or the topic takes no writes from clients."""


def topic_for_send(broker: Broker, topic: str, default_topic: str = AUTO_CREATE_TOPIC,
                   default_queue_nums: int = 4) -> TopicConfig:
    """The config of ``topic`` for a client's send, created when allowed (module docstring).
    Raises ``SendForbiddenError``, ``TopicNotExistError`` or ``TopicError``."""
    if not broker.config.broker_permission & PERM_WRITE:
        raise SendForbiddenError(f"the broker[{broker.config.broker_name}] sending message is "
                                 "forbidden")
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise SendForbiddenError(f"Sending message to topic[{topic}] is forbidden.")
    topics = broker.topics
    tc = topics.get(topic)
    if tc is None:
        tc = topics.create_in_send(topic, default_topic, default_queue_nums)
        if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            tc = topics.create_plain(topic, 1)
        if tc is None:
            raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!")
    if not tc.perm & PERM_WRITE:
        raise SendForbiddenError(f"the topic[{topic}] sending message is forbidden")
    return tc
