"""Stored records -> v2 ``Message``s, what ReceiveMessage and PullMessage stream to a 5.x client
(the Java proxy's ``GrpcConverter.buildMessage``).

A batch is converted in one call (``pulled_fields``, ``popped_fields``): what is the same for
every message of a batch (the topic resource, the invisible duration, the host strings of each
store/born address) is made once per batch, so per message there is one property parse, one MD5
and one protobuf construction: each message is a nested dict the RPC hands to its response's
constructor (protobuf builds nested fields from dicts faster than from Timestamp, Digest and
SystemProperties objects, and a Message object given to a response would be copied again).

System properties, from the record and its properties (``MessageConst`` names):

=====================  ==========================================================================
field                  from
=====================  ==========================================================================
tag                    TAGS
keys                   KEYS split on spaces
message_id             UNIQ_KEY, else the offset message id (store host, port, CommitLog offset)
body_digest            MD5 of the body as delivered, uppercase hex (the client verifies it)
body_encoding          IDENTITY: a compressed record (sysFlag 0x1) is inflated here, so every
                       5.x client gets the body it sent (Java's proxy labels it GZIP while its
                       body is zlib or already inflated); a body that does not inflate is sent as
                       stored, its digest over the stored bytes
message_type           TRANSACTION (TRAN_MSG=true), DELAY (DELAY, TIMER_DELIVER_MS,
                       TIMER_DELAY_SEC), FIFO (__SHARDINGKEY), else NORMAL
born_timestamp         the record's; born_host: __BORNHOST, else the born IP
store_timestamp        the record's; store_host: ``ip:port``
delivery_timestamp     TIMER_DELAY_SEC (now + delay, as Java) or TIMER_DELIVER_MS
message_group          __SHARDINGKEY
receipt_handle         the POP's handle (popped messages only)
queue_id/queue_offset  where it was read (a retry: the retry topic's queue, as the broker pops)
delivery_attempt       the POP's count, or reconsumeTimes + 1 for a pull
invisible_duration     the POP's invisible time (popped messages only)
trace_context          TRACE_CONTEXT
dead_letter_queue      DLQ_ORIGIN_TOPIC + DLQ_ORIGIN_MESSAGE_ID (a message read from a %DLQ%)
=====================  ==========================================================================

User properties are the record's properties minus ``SYSTEM_PROPERTIES`` (Java's
``MessageConst.STRING_HASH_SET``, plus the two that v2 carries as system fields:
__SHARDINGKEY and TRACE_CONTEXT).
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
from collections.abc import Sequence
from typing import Any, Protocol

from google.protobuf.timestamp_pb2 import Timestamp

from rocketlite.broker.timer_divert import parse_int
from rocketlite.client.message import SHARDING_KEY, TIMER_DELAY_SEC, TIMER_DELIVER_MS, decompress
from rocketlite.common.errors import RocketliteError
from rocketlite.formats.message_id import encode_message_id
from rocketlite.formats.message_record import SYSFLAG_COMPRESSED, MessageRecord
from rocketlite.formats.properties import DELAY, KEYS, TAGS, TRAN_MSG, UNIQ_KEY, decode_properties
from rocketlite.proxy.pb import definition_pb2 as pb

# MessageConst names the converter reads that no lower layer names (the others are imported).
TRACE_CONTEXT = "TRACE_CONTEXT"
BORN_HOST = "__BORNHOST"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

SYSTEM_PROPERTIES: frozenset[str] = frozenset({
    # MessageConst.STRING_HASH_SET (apache/rocketmq 5.x)
    "TRACE_ON", "MSG_REGION", KEYS, TAGS, "WAIT", DELAY, "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
    TRAN_MSG, "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID",
    "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", UNIQ_KEY,
    "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME",
    "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID",
    "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", TIMER_DELAY_SEC, TIMER_DELIVER_MS,
    "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS",
    "TIMER_DEL_UNIQKEY", "TIMER_DEL_MS", "TIMER_DELAY_LEVEL", BORN_HOST, "BORN_TIMESTAMP",
    DLQ_ORIGIN_TOPIC, DLQ_ORIGIN_MESSAGE_ID, "__CRC32#",
    # carried by v2 as system fields
    SHARDING_KEY, TRACE_CONTEXT,
})

MAX_INFLATED_BODY = 130 << 20  # the front's largest message; a bigger inflation is sent as stored

_MD5 = pb.DigestType.MD5
_IDENTITY = pb.Encoding.IDENTITY
_NORMAL, _FIFO, _DELAY, _TRANSACTION = (pb.MessageType.NORMAL, pb.MessageType.FIFO,
                                        pb.MessageType.DELAY, pb.MessageType.TRANSACTION)


class Popped(Protocol):
    """What ``popped_messages`` reads of a POP's message (``broker.pop.service.PoppedMessage``)."""

    @property
    def record(self) -> MessageRecord: ...
    @property
    def topic(self) -> str: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def receipt_handle(self) -> str: ...
    @property
    def delivery_attempt(self) -> int: ...


def timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _ts(ms: int) -> dict[str, int]:
    """A Timestamp or Duration as the dict protobuf builds it from (cheaper than the object)."""
    return {"seconds": ms // 1000, "nanos": (ms % 1000) * 1_000_000}


def ip_text(ip: bytes) -> str:
    """An IPv4 or IPv6 address as text (Java's ``getHostAddress``)."""
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ip.hex()


class _Batch:
    """What one batch shares: topic resources and host strings, made once each."""

    __slots__ = ("hosts", "namespace", "now_ms", "topics")

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.topics: dict[str, dict[str, str]] = {}
        self.hosts: dict[tuple[bytes, int], str] = {}
        self.now_ms = int(time.time() * 1000)

    def resource(self, topic: str) -> dict[str, str]:
        r = self.topics.get(topic)
        if r is None:
            r = self.topics[topic] = {"name": topic, "resource_namespace": self.namespace}
        return r

    def host(self, ip: bytes, port: int) -> str:
        """``ip:port``; port -1 means the IP alone."""
        key = (ip, port)
        s = self.hosts.get(key)
        if s is None:
            s = self.hosts[key] = ip_text(ip) if port < 0 else f"{ip_text(ip)}:{port}"
        return s


def _inflate(r: MessageRecord) -> bytes:
    if r.sys_flag & SYSFLAG_COMPRESSED:
        try:
            return decompress(r.body, r.sys_flag, MAX_INFLATED_BODY)
        except RocketliteError:
            return r.body  # sent as stored: its digest is over what is sent
    return r.body


def _from_properties(b: _Batch, sp: dict[str, Any], props: dict[str, str]) -> None:
    """The system properties read from the record's properties."""
    tag = props.get(TAGS)
    if tag is not None:
        sp["tag"] = tag
    keys = props.get(KEYS)
    if keys:
        sp["keys"] = [k for k in keys.split(" ") if k]
    group = props.get(SHARDING_KEY)
    if props.get(TRAN_MSG) == "true":
        sp["message_type"] = _TRANSACTION
    elif DELAY in props or TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props:
        sp["message_type"] = _DELAY
    elif group is not None:
        sp["message_type"] = _FIFO
    if group is not None:
        sp["message_group"] = group
    delay_s = parse_int(props.get(TIMER_DELAY_SEC))
    deliver_ms = b.now_ms + delay_s * 1000 if delay_s is not None \
        else parse_int(props.get(TIMER_DELIVER_MS))
    if deliver_ms is not None:
        sp["delivery_timestamp"] = _ts(deliver_ms)
    trace = props.get(TRACE_CONTEXT)
    if trace is not None:
        sp["trace_context"] = trace
    dlq_topic, dlq_id = props.get(DLQ_ORIGIN_TOPIC), props.get(DLQ_ORIGIN_MESSAGE_ID)
    if dlq_topic is not None and dlq_id is not None:
        sp["dead_letter_queue"] = {"topic": dlq_topic, "message_id": dlq_id}


def _fields(b: _Batch, r: MessageRecord, topic: str, queue_id: int, queue_offset: int,
            attempt: int, handle: str | None, invisible: dict[str, int] | None
            ) -> dict[str, Any]:
    """One v2 Message as the nested dict protobuf builds it from in one call."""
    props = decode_properties(r.properties_text) if r.properties_text else {}
    body = _inflate(r)
    sp: dict[str, Any] = {
        "message_id": props.get(UNIQ_KEY) or encode_message_id(r.store_host, r.store_port,
                                                               r.commit_log_offset),
        "body_digest": {"type": _MD5, "checksum": hashlib.md5(body).hexdigest().upper()},
        "body_encoding": _IDENTITY,
        "message_type": _NORMAL,
        "born_timestamp": _ts(r.born_timestamp),
        "born_host": props.get(BORN_HOST) or b.host(r.born_host, -1),
        "store_timestamp": _ts(r.store_timestamp),
        "store_host": b.host(r.store_host, r.store_port),
        "queue_id": queue_id,
        "queue_offset": queue_offset,
        "delivery_attempt": attempt,
    }
    m: dict[str, Any] = {"topic": b.resource(topic), "system_properties": sp, "body": body}
    if props:
        m["user_properties"] = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTIES}
        _from_properties(b, sp, props)
    if handle is not None:
        sp["receipt_handle"] = handle
    if invisible is not None:
        sp["invisible_duration"] = invisible
    return m


def pulled_fields(records: Sequence[MessageRecord], topic: str, namespace: str = ""
                  ) -> list[dict[str, Any]]:
    """Records read from ``topic``'s queues (PullMessage), as Message fields: each at its own
    queue and offset, delivery attempt ``reconsumeTimes + 1``."""
    b = _Batch(namespace)
    return [_fields(b, r, topic, r.queue_id, r.queue_offset, r.reconsume_times + 1, None, None)
            for r in records]


def popped_fields(popped: Sequence[Popped], invisible_ms: int, namespace: str = ""
                  ) -> list[dict[str, Any]]:
    """A POP's messages (ReceiveMessage) as Message fields, with their receipt handles and
    delivery attempts; a retry is named by its original topic."""
    b = _Batch(namespace)
    invisible = _ts(invisible_ms)
    return [_fields(b, p.record, p.topic, p.queue_id, p.queue_offset, p.delivery_attempt,
                    p.receipt_handle, invisible) for p in popped]


def pulled_messages(records: Sequence[MessageRecord], topic: str, namespace: str = ""
                    ) -> list[pb.Message]:
    """``pulled_fields`` as Message objects (the RPCs build their responses from the fields,
    which spares a copy of each message)."""
    return [pb.Message(**f) for f in pulled_fields(records, topic, namespace)]


def popped_messages(popped: Sequence[Popped], invisible_ms: int, namespace: str = ""
                    ) -> list[pb.Message]:
    """``popped_fields`` as Message objects."""
    return [pb.Message(**f) for f in popped_fields(popped, invisible_ms, namespace)]
