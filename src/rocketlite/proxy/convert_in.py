"""A SendMessage request's v2 ``Message``s as ``MessageToStore``s (the Java proxy's
``SendMessageActivity.buildMessage``/``buildMessageProperty``/``buildSysFlag``), each checked
first; a check that fails raises ``FrontError`` with its code (``validate``'s table, and):

=========================================  =======================================================
rule                                       code
=========================================  =======================================================
a message of another topic than the first  MESSAGE_CORRUPTED
empty body / body above ``maxMessageSize`` MESSAGE_BODY_EMPTY / MESSAGE_BODY_TOO_LARGE
blank ``message_id``                       ILLEGAL_MESSAGE_ID
more than ``MAX_USER_PROPERTIES`` user     MESSAGE_PROPERTIES_TOO_LARGE
properties, or with tag and keys above
``MAX_USER_PROPERTY_BYTES``
the type the message declares differs      MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
from what its fields make it, or the
topic does not accept that type
FIFO without ``message_group``             ILLEGAL_MESSAGE_GROUP
``delivery_timestamp`` before 1970 or      ILLEGAL_DELIVERY_TIME
further than ``timerMaxDelaySec`` ahead
=========================================  =======================================================

The type a message's fields make it (``TopicMessageType.parseFromMessageProperty``): TRANSACTION
when it says so, else FIFO with a message group, else DELAY with a delivery timestamp, else NORMAL.

What is stored: the body as sent; properties (in this order) the user properties, ``TAGS``,
``KEYS`` (space-joined), ``UNIQ_KEY`` = ``message_id``, ``__SHARDINGKEY`` = ``message_group``,
``TIMER_DELIVER_MS`` = ``delivery_timestamp`` (the broker's timer diverter delays it; see
``delivery_ms`` for the Python client's milliseconds in the seconds field),
``TRACE_CONTEXT``, and for a transaction ``TRAN_MSG`` = true, ``PGROUP`` = the topic (a 5.x
producer has no group: the proxy's rule, which the transaction check follows to the producers
registered under the topic) and ``CHECK_IMMUNITY_TIME_IN_SECONDS`` from
``orphaned_transaction_recovery_duration``. sysFlag: COMPRESSED for a GZIP body (stored as sent,
as the Java proxy does), TRANSACTION_PREPARED for a transaction (the transactional diverter moves
it to the half topic). Born timestamp from the message (now without one), born host the peer's.
"""

from __future__ import annotations

import functools
import ipaddress
import time
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from rocketlite.client.message import SHARDING_KEY, TIMER_DELIVER_MS
from rocketlite.formats.message_record import SYSFLAG_COMPRESSED, SYSFLAG_TRANSACTION_PREPARED
from rocketlite.formats.properties import KEYS, PGROUP, TAGS, TRAN_MSG, UNIQ_KEY
from rocketlite.proxy import validate
from rocketlite.proxy.convert_out import TRACE_CONTEXT
from rocketlite.proxy.pb import definition_pb2 as pb
from rocketlite.proxy.status import Code, FrontError
from rocketlite.store.message import MessageToStore

MAX_USER_PROPERTIES = 128  # ProxyConfig.userPropertyMaxNum
MAX_USER_PROPERTY_BYTES = 16 * 1024  # ProxyConfig.maxUserPropertySize
CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
MS_IN_SECONDS = 100_000_000_000
MT = pb.MessageType
# The enum values as plain ints (an attribute of a protobuf enum wrapper costs a Python call).
NORMAL, FIFO, DELAY, TRANSACTION = int(MT.NORMAL), int(MT.FIFO), int(MT.DELAY), int(MT.TRANSACTION)
GZIP = int(pb.Encoding.GZIP)
TYPE_NAMES: dict[int, str] = {NORMAL: "NORMAL", FIFO: "FIFO", DELAY: "DELAY",
                              TRANSACTION: "TRANSACTION"}


@functools.lru_cache(maxsize=4096)
def host_bytes(host: str) -> bytes:
    """The peer's address as a record's born host (4 or 16 bytes; loopback if unparsable)."""
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return b"\x7f\x00\x00\x01"


@dataclass(slots=True)
class Inbound:
    """What ``convert`` needs from outside the message: the same for every message of a request."""

    topic: str
    accepted: list[int]  # the topic's accepted message types
    max_body: int  # maxMessageSize
    max_delay_ms: int  # timerMaxDelaySec in ms
    born_host: bytes
    born_port: int
    now_ms: int


def message_type(sp: pb.SystemProperties) -> int:
    """The type the message's fields make it (module docstring)."""
    if sp.message_type == TRANSACTION:
        return TRANSACTION
    if sp.HasField("message_group"):
        return FIFO
    if sp.HasField("delivery_timestamp"):
        return DELAY
    return NORMAL


def delivery_ms(ts: Timestamp) -> int:
    """A delivery timestamp in epoch ms. A ``seconds`` field beyond ``MS_IN_SECONDS`` (year
    5138) is read as milliseconds: rocketmq-python-client 5.1.2 writes its ``delivery_timestamp``
    (ms, as its docstring says) into ``Timestamp.seconds``."""
    if ts.seconds > MS_IN_SECONDS:
        return ts.seconds
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def _check_body_and_type(m: pb.Message, into: Inbound) -> int:
    """The message's type, once its topic, body and type pass the checks."""
    if m.topic.name != into.topic:
        raise FrontError(Code.MESSAGE_CORRUPTED, f"a message for topic {m.topic.name!r} in a "
                         f"request for {into.topic!r}: one request sends to one topic")
    body = m.body
    if not body:
        raise FrontError(Code.MESSAGE_BODY_EMPTY, "the message body is empty")
    if len(body) > into.max_body:
        raise FrontError(Code.MESSAGE_BODY_TOO_LARGE, f"the message body is {len(body)} bytes, "
                         f"more than the max {into.max_body}")
    sp = m.system_properties
    kind = message_type(sp)
    declared = sp.message_type
    if declared == FIFO and not sp.HasField("message_group"):
        raise FrontError(Code.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
    if declared in TYPE_NAMES and declared != kind:
        raise FrontError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                         f"the message says it is {TYPE_NAMES[declared]} but its fields make it "
                         f"{TYPE_NAMES[kind]} (FIFO: a message group; DELAY: a delivery time)")
    if kind not in into.accepted:
        raise FrontError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                         f"topic {into.topic} takes {'/'.join(TYPE_NAMES[t] for t in into.accepted)}"
                         f" messages, not {TYPE_NAMES[kind]}")
    if not sp.message_id.strip():
        raise FrontError(Code.ILLEGAL_MESSAGE_ID, "the message id is empty")
    return kind


def _user_properties(m: pb.Message) -> dict[str, str]:
    """User properties, tag and keys, checked."""
    sp = m.system_properties
    user = m.user_properties
    if len(user) > MAX_USER_PROPERTIES:
        raise FrontError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"{len(user)} user properties, more "
                         f"than the max {MAX_USER_PROPERTIES}")
    props: dict[str, str] = {}
    size = 0
    for k, v in user.items():
        validate.prop(k, v)
        props[k] = v
        size += len(k) + len(v)
    if sp.HasField("tag") and sp.tag:
        validate.tag(sp.tag)
        props[TAGS] = sp.tag
        size += len(sp.tag)
    if sp.keys:
        for k in sp.keys:
            validate.key(k)
            size += len(k)
        props[KEYS] = " ".join(sp.keys)
    if size > MAX_USER_PROPERTY_BYTES:
        raise FrontError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"the user properties, tag and keys "
                         f"take {size} characters, more than the max {MAX_USER_PROPERTY_BYTES}")
    return props


def _system_properties(sp: pb.SystemProperties, kind: int, into: Inbound,
                       props: dict[str, str]) -> int:
    """Add the system properties to ``props``; the sysFlag."""
    props[UNIQ_KEY] = sp.message_id
    if sp.HasField("message_group"):
        validate.message_group(sp.message_group)
        props[SHARDING_KEY] = sp.message_group
    if sp.HasField("delivery_timestamp"):
        deliver_ms = delivery_ms(sp.delivery_timestamp)
        if deliver_ms < 0 or deliver_ms - into.now_ms > into.max_delay_ms:
            raise FrontError(Code.ILLEGAL_DELIVERY_TIME,
                             f"the delivery time {deliver_ms} ms is not within 0 .. now + "
                             f"{into.max_delay_ms} ms (timerMaxDelaySec)")
        props[TIMER_DELIVER_MS] = str(deliver_ms)
    if sp.HasField("trace_context") and sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    sys_flag = SYSFLAG_COMPRESSED if sp.body_encoding == GZIP else 0
    if kind == TRANSACTION:
        sys_flag |= SYSFLAG_TRANSACTION_PREPARED
        props[TRAN_MSG] = "true"
        props[PGROUP] = into.topic
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props[CHECK_IMMUNITY] = str(max(0, sp.orphaned_transaction_recovery_duration.seconds))
    return sys_flag


def convert(m: pb.Message, into: Inbound, queue_id: int) -> tuple[MessageToStore, int]:
    """One message as stored and its type; ``FrontError`` if a check fails (module docstring)."""
    kind = _check_body_and_type(m, into)
    sp = m.system_properties
    props = _user_properties(m)
    sys_flag = _system_properties(sp, kind, into, props)
    born = sp.born_timestamp
    born_ms = born.seconds * 1000 + born.nanos // 1_000_000 if sp.HasField("born_timestamp") else 0
    return MessageToStore(
        into.topic, m.body, queue_id, 0,
        "".join(f"{k}\x01{v}\x02" for k, v in props.items()),
        sys_flag, born_ms if born_ms > 0 else into.now_ms, into.born_host, into.born_port,
    ), kind


def now_ms() -> int:
    return time.time_ns() // 1_000_000
