"""Field checks of the 5.x requests (the Java proxy's ``GrpcValidator`` and
``SendMessageActivity`` checks), each raising ``FrontError`` with the v2 code and what was wrong;
the producer and the consumer RPCs use the same name checks:

=====================  ===============================  ===========================================
check                  code                             rule
=====================  ===============================  ===========================================
``topic_name``         ILLEGAL_TOPIC                    not blank, ``[%|a-zA-Z0-9_-]``, <= 127,
                                                        not a system topic (``SYSTEM_TOPICS``,
                                                        ``rmq_sys_*``, the broker's cluster and
                                                        broker names: clients may not use them)
``group_name``         ILLEGAL_CONSUMER_GROUP           not blank, not ``CID_RMQ_SYS_*``,
                                                        ``[%|a-zA-Z0-9_-]``, <= 255
``tag``                ILLEGAL_MESSAGE_TAG              empty, or not blank, no ``|``, no control
``key``                ILLEGAL_MESSAGE_KEY              empty, or not blank, no control character
``message_group``      ILLEGAL_MESSAGE_GROUP            not blank, < ``MAX_MESSAGE_GROUP`` bytes,
                                                        no control character
``property``           ILLEGAL_MESSAGE_PROPERTY_KEY     not a system name (``RESERVED_KEYS``), no
                                                        control character (key or value), no
                                                        ``\\x01``/``\\x02``
=====================  ===============================  ===========================================

A control character is Java's ``Character.isISOControl``: U+0000..U+001F and U+007F..U+009F.
"""

from __future__ import annotations

import re

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.topics import (
    AUTO_CREATE_TOPIC,
    NOT_ALLOWED_SEND_TOPICS,
    OFFSET_MOVED_EVENT,
    SYSTEM_TOPIC_PREFIX,
    TopicError,
    is_system_topic,
    validate_topic,
)
from rocketlite.client.message import RESERVED_PROPERTIES
from rocketlite.proxy.convert_out import SYSTEM_PROPERTIES
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.status import Code, FrontError

GROUP_MAX_LENGTH = 255
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"  # MixAll.CID_RMQ_SYS_PREFIX
MAX_MESSAGE_GROUP = 64  # ProxyConfig.maxMessageGroupSize (bytes)
# TopicValidator.SYSTEM_TOPIC_SET (the broker-only topics, TBW102, OFFSET_MOVED_EVENT)
SYSTEM_TOPICS = NOT_ALLOWED_SEND_TOPICS | {AUTO_CREATE_TOPIC, OFFSET_MOVED_EVENT}
# Not a user property's name: Java's MessageConst.STRING_HASH_SET and the two v2 system fields
# (what a receive does not hand back as user properties), and what the Remoting client reserves.
RESERVED_KEYS = SYSTEM_PROPERTIES | RESERVED_PROPERTIES
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_GROUP_CHARS = re.compile(r"[%|a-zA-Z0-9_-]+", re.ASCII)


def has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


def topic_name(topic: pb.Resource | str, config: BrokerConfig | None = None) -> str:
    """The topic's name, checked as ``GrpcValidator.validateTopic`` does; with the broker's
    ``config`` its cluster and broker names (topics of their own) are system topics too."""
    name = topic if isinstance(topic, str) else topic.name
    try:
        validate_topic(name)
    except TopicError as e:
        raise FrontError(Code.ILLEGAL_TOPIC, f"illegal topic: {e}") from None
    if name in SYSTEM_TOPICS or name.startswith(SYSTEM_TOPIC_PREFIX) or (
            config is not None and is_system_topic(name, config)):
        raise FrontError(Code.ILLEGAL_TOPIC, f"cannot access system topic {name}")
    return name


def group_name(group: pb.Resource | str) -> str:
    """The consumer (or producer) group's name, checked as
    ``GrpcValidator.validateConsumerGroup`` does."""
    name = group if isinstance(group, str) else group.name
    if not name or not name.strip():
        raise FrontError(Code.ILLEGAL_CONSUMER_GROUP, "the consumer group name is blank")
    if name.startswith(SYS_GROUP_PREFIX):
        raise FrontError(Code.ILLEGAL_CONSUMER_GROUP, f"cannot use system consumer group {name}")
    if not _GROUP_CHARS.fullmatch(name):
        raise FrontError(Code.ILLEGAL_CONSUMER_GROUP,
                         f"the consumer group name {name[:80]!r} contains characters other "
                         "than letters, digits, '%', '|', '_' and '-'")
    if len(name) > GROUP_MAX_LENGTH:
        raise FrontError(Code.ILLEGAL_CONSUMER_GROUP,
                         f"the consumer group name is {len(name)} characters long, longer than "
                         f"{GROUP_MAX_LENGTH}")
    return name


def tag(value: str) -> None:
    if not value:
        return
    if not value.strip():
        raise FrontError(Code.ILLEGAL_MESSAGE_TAG, "the tag is whitespace only")
    if "|" in value:
        raise FrontError(Code.ILLEGAL_MESSAGE_TAG, f"the tag {value[:80]!r} contains '|'")
    if has_control(value):
        raise FrontError(Code.ILLEGAL_MESSAGE_TAG, "the tag contains a control character")


def key(value: str) -> None:
    if not value:
        return
    if not value.strip():
        raise FrontError(Code.ILLEGAL_MESSAGE_KEY, "a key is whitespace only")
    if has_control(value):
        raise FrontError(Code.ILLEGAL_MESSAGE_KEY, "a key contains a control character")


def message_group(value: str) -> None:
    if not value.strip():
        raise FrontError(Code.ILLEGAL_MESSAGE_GROUP, "the message group is blank")
    if len(value.encode()) >= MAX_MESSAGE_GROUP:
        raise FrontError(Code.ILLEGAL_MESSAGE_GROUP,
                         f"the message group is longer than {MAX_MESSAGE_GROUP - 1} bytes")
    if has_control(value):
        raise FrontError(Code.ILLEGAL_MESSAGE_GROUP,
                         "the message group contains a control character")


def prop(k: str, v: str) -> None:
    if not k:
        raise FrontError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "a user property has an empty key")
    if k in RESERVED_KEYS:
        raise FrontError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                         f"the property key {k!r} is used by the system")
    if has_control(k) or has_control(v):
        raise FrontError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                         f"the user property {k[:80]!r} contains a control character")
