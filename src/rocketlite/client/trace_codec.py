"""Message trace records in RocketMQ's text format (Java's ``TraceDataEncoder``), so traces
written by rocketlite, the Java client or mqadmin's tools read the same.

A trace message's body is a run of records, each ended by ``FIELD_SEPARATOR`` (``\\u0002``), whose
fields are joined by ``CONTENT_SEPARATOR`` (``\\u0001``); the first field names the record type:

===============  ==================================================================================
Pub              type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost, bodyLength,
                 costTime, msgType, offsetMsgId, success (Java also reads 13- and 15-field forms)
SubBefore        type, timestamp, regionId, group, requestId, msgId, retryTimes, keys
SubAfter         type, requestId, msgId, costTime, success, keys, contextCode, timestamp
EndTransaction   type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost, msgType,
                 transactionId, transactionState, fromTransactionCheck
===============  ==================================================================================

A SubAfter names no group: it pairs with the SubBefore of the same ``requestId``. Java appends a
missing value (``null``) as the text ``null``; ``encode`` does the same for ``None`` and ``decode``
reads ``null`` back as ``None``. Records of an unknown type are skipped, as Java does.
"""

from __future__ import annotations

import dataclasses
import enum

CONTENT_SEPARATOR = "\x01"
"""``TraceConstants.CONTENT_SPLITOR``: between the fields of a record."""
FIELD_SEPARATOR = "\x02"
"""``TraceConstants.FIELD_SPLITOR``: after each record."""
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""``TopicValidator.RMQ_SYS_TRACE_TOPIC``: the default trace topic."""
TRACE_PRODUCER_GROUP = "_INNER_TRACE_PRODUCER"
"""``TraceConstants.GROUP_NAME``: the group trace messages are sent as."""
DEFAULT_REGION = "DefaultRegion"


class TraceType(enum.StrEnum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """Java's ``MessageType``; a record carries the ordinal."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """Java's ``ConsumeReturnType``: a SubAfter's ``contextCode``."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclasses.dataclass(slots=True)
class TraceRecord:
    """One record (Java's ``TraceContext`` with one ``TraceBean``); each type uses its own fields
    (module doc), the others keep their defaults."""

    type: TraceType
    timestamp: int = 0
    region_id: str | None = None
    group: str | None = None
    request_id: str | None = None
    topic: str | None = None
    msg_id: str | None = None
    tags: str | None = None
    keys: str | None = None
    store_host: str | None = None
    body_length: int = 0
    cost_time: int = 0
    msg_type: int = 0
    offset_msg_id: str | None = None
    success: bool = True
    retry_times: int = 0
    context_code: int = 0
    transaction_id: str | None = None
    transaction_state: str | None = None
    from_transaction_check: bool = False
    client_host: str | None = None


def _text(v: str | int | bool | None) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _fields(r: TraceRecord) -> list[str | int | bool | None]:
    t = r.type
    if t is TraceType.Pub:
        return [t.value, r.timestamp, r.region_id, r.group, r.topic, r.msg_id, r.tags, r.keys,
                r.store_host, r.body_length, r.cost_time, r.msg_type, r.offset_msg_id, r.success]
    if t is TraceType.SubBefore:
        return [t.value, r.timestamp, r.region_id, r.group, r.request_id, r.msg_id, r.retry_times,
                r.keys]
    if t is TraceType.SubAfter:
        return [t.value, r.request_id, r.msg_id, r.cost_time, r.success, r.keys, r.context_code,
                r.timestamp]
    return [t.value, r.timestamp, r.region_id, r.group, r.topic, r.msg_id, r.tags, r.keys,
            r.store_host, r.msg_type, r.transaction_id, r.transaction_state,
            r.from_transaction_check]


def encode_record(r: TraceRecord) -> str:
    """One record as Java encodes it, ``FIELD_SEPARATOR`` included."""
    return CONTENT_SEPARATOR.join(_text(f) for f in _fields(r)) + FIELD_SEPARATOR


def record_keys(r: TraceRecord) -> list[str]:
    """The index keys of a record (Java's ``TraceTransferBean.transKey``): its msgId and its
    message's KEYS string, so QUERY_MESSAGE by either finds the trace."""
    out = [_text(r.msg_id)]
    if r.keys:
        out.append(r.keys)
    return out


def encode(records: list[TraceRecord]) -> str:
    return "".join(encode_record(r) for r in records)


def _opt(s: str) -> str | None:
    return None if s == "null" else s


def _bool(s: str) -> bool:
    return s.lower() == "true"  # Java's Boolean.parseBoolean


def _decode_line(f: list[str]) -> TraceRecord | None:
    kind = f[0]
    if kind == TraceType.Pub and len(f) >= 12:
        r = TraceRecord(TraceType.Pub, int(f[1]), _opt(f[2]), _opt(f[3]), topic=_opt(f[4]),
                        msg_id=_opt(f[5]), tags=_opt(f[6]), keys=_opt(f[7]),
                        store_host=_opt(f[8]), body_length=int(f[9]), cost_time=int(f[10]),
                        msg_type=int(f[11]))
        if len(f) == 13:
            r.success = _bool(f[12])
        elif len(f) >= 14:
            r.offset_msg_id = _opt(f[12])
            r.success = _bool(f[13])
            if len(f) >= 15:
                r.client_host = _opt(f[14])
        return r
    if kind == TraceType.SubBefore and len(f) >= 8:
        return TraceRecord(TraceType.SubBefore, int(f[1]), _opt(f[2]), _opt(f[3]),
                           request_id=_opt(f[4]), msg_id=_opt(f[5]), retry_times=int(f[6]),
                           keys=_opt(f[7]))
    if kind == TraceType.SubAfter and len(f) >= 6:
        r = TraceRecord(TraceType.SubAfter, request_id=_opt(f[1]), msg_id=_opt(f[2]),
                        cost_time=int(f[3]), success=_bool(f[4]), keys=_opt(f[5]))
        if len(f) >= 7:
            r.context_code = int(f[6])
        if len(f) >= 8:
            r.timestamp = int(f[7])
        return r
    if kind == TraceType.EndTransaction and len(f) >= 13:
        return TraceRecord(TraceType.EndTransaction, int(f[1]), _opt(f[2]), _opt(f[3]),
                           topic=_opt(f[4]), msg_id=_opt(f[5]), tags=_opt(f[6]), keys=_opt(f[7]),
                           store_host=_opt(f[8]), msg_type=int(f[9]),
                           transaction_id=_opt(f[10]), transaction_state=_opt(f[11]),
                           from_transaction_check=_bool(f[12]))
    return None


def decode(data: str) -> list[TraceRecord]:
    """The records of a trace message's body; records of an unknown type, too short or with a
    number that does not parse are skipped."""
    out: list[TraceRecord] = []
    for line in data.split(FIELD_SEPARATOR):
        if not line:
            continue
        try:
            r = _decode_line(line.split(CONTENT_SEPARATOR))
        except ValueError:
            continue
        if r is not None:
            out.append(r)
    return out
