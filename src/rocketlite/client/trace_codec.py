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


def _s(v: str | None) -> str:
    return "null" if v is None else v


def _b(v: bool) -> str:
    return "true" if v else "false"


def encode_record(r: TraceRecord) -> str:
    """One record as Java encodes it, ``FIELD_SEPARATOR`` included (the layouts of the module
    doc, one f-string each: this runs once per traced message)."""
    t = r.type
    if t is TraceType.Pub:
        return (f"Pub\x01{r.timestamp}\x01{_s(r.region_id)}\x01{_s(r.group)}\x01{_s(r.topic)}\x01"
                f"{_s(r.msg_id)}\x01{_s(r.tags)}\x01{_s(r.keys)}\x01{_s(r.store_host)}\x01"
                f"{r.body_length}\x01{r.cost_time}\x01{int(r.msg_type)}\x01{_s(r.offset_msg_id)}\x01"
                f"{_b(r.success)}\x02")
    if t is TraceType.SubBefore:
        return (f"SubBefore\x01{r.timestamp}\x01{_s(r.region_id)}\x01{_s(r.group)}\x01"
                f"{_s(r.request_id)}\x01{_s(r.msg_id)}\x01{r.retry_times}\x01{_s(r.keys)}\x02")
    if t is TraceType.SubAfter:
        return (f"SubAfter\x01{_s(r.request_id)}\x01{_s(r.msg_id)}\x01{r.cost_time}\x01"
                f"{_b(r.success)}\x01{_s(r.keys)}\x01{int(r.context_code)}\x01{r.timestamp}\x02")
    return (f"EndTransaction\x01{r.timestamp}\x01{_s(r.region_id)}\x01{_s(r.group)}\x01"
            f"{_s(r.topic)}\x01{_s(r.msg_id)}\x01{_s(r.tags)}\x01{_s(r.keys)}\x01"
            f"{_s(r.store_host)}\x01{int(r.msg_type)}\x01{_s(r.transaction_id)}\x01"
            f"{_s(r.transaction_state)}\x01{_b(r.from_transaction_check)}\x02")


def record_keys(r: TraceRecord) -> list[str]:
    """The index keys of a record (Java's ``TraceTransferBean.transKey``): its msgId and its
    message's KEYS string, so QUERY_MESSAGE by either finds the trace."""
    out = [_s(r.msg_id)]
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
