"""``queryMsgTraceById``: a message's trace, read from the trace topic (mqadmin's
``QueryMsgTraceByIdSubCommand``).

Trace messages are keyed by the msgIds they trace (``client/trace.py``, Java's
``AsyncTraceDispatcher``), so QUERY_MESSAGE by key = msgId on the trace topic's brokers finds
them; their bodies decode with ``trace_codec`` and the records of that msgId are kept: the Pub
records (who sent it, when, to which broker, how long the send took) and, per consumption (a
SubBefore and the SubAfter of the same request id), the group, when, the result and its cost.
"""

from __future__ import annotations

import dataclasses

from rocketlite.admin.errors import AdminError
from rocketlite.admin.messages import query_msg_by_key
from rocketlite.admin.session import AdminSession
from rocketlite.client.trace_codec import (
    TRACE_TOPIC,
    ConsumeReturnType,
    MessageType,
    TraceRecord,
    TraceType,
    decode,
)

TRACE_QUERY_MAX = 64
"""Trace messages asked of each broker (Java's ``queryMsgTraceById`` asks 64)."""


@dataclasses.dataclass(slots=True)
class PubTrace:
    """A send of the message: ``send_time`` when it started (ms), ``store_time`` about when the
    broker stored it (the middle of the send, as Java's trace view estimates), ``cost_ms`` the
    send's round trip."""

    producer_group: str | None
    topic: str | None
    msg_id: str
    offset_msg_id: str | None
    tags: str | None
    keys: str | None
    broker: str | None
    region_id: str | None
    msg_type: str
    body_length: int
    send_time: int
    store_time: int
    cost_ms: int
    success: bool
    client_host: str | None


@dataclasses.dataclass(slots=True)
class SubTrace:
    """A consumption of the message by ``consumer_group``: handed to the handler at
    ``consume_time`` (ms) on its ``retry_times``-th delivery; ``status`` and ``cost_ms`` from the
    handler's return (None while no SubAfter has been written, e.g. still running)."""

    consumer_group: str | None
    request_id: str | None
    consume_time: int
    retry_times: int
    region_id: str | None
    success: bool | None
    status: str | None
    cost_ms: int | None
    end_time: int | None


@dataclasses.dataclass(slots=True)
class TransactionTrace:
    """An EndTransaction record: how the producer ended the half message."""

    producer_group: str | None
    time: int
    transaction_id: str | None
    state: str | None
    from_transaction_check: bool
    broker: str | None


@dataclasses.dataclass(slots=True)
class MessageTrace:
    msg_id: str
    trace_topic: str
    pubs: list[PubTrace]
    subs: list[SubTrace]
    end_transactions: list[TransactionTrace]


def _name(enum_type: type[MessageType] | type[ConsumeReturnType], code: int) -> str:
    try:
        return enum_type(code).name
    except ValueError:
        return str(code)


def _pub(r: TraceRecord) -> PubTrace:
    return PubTrace(r.group, r.topic, r.msg_id or "", r.offset_msg_id, r.tags, r.keys,
                    r.store_host, r.region_id, _name(MessageType, r.msg_type), r.body_length,
                    r.timestamp, r.timestamp + r.cost_time // 2, r.cost_time, r.success,
                    r.client_host)


def group_records(msg_id: str, trace_topic: str, records: list[TraceRecord]) -> MessageTrace:
    """The records of ``msg_id`` grouped per kind; a SubAfter joins the SubBefore of its request
    id (one without a SubBefore, e.g. one from a trace message not found, stands alone)."""
    mine = [r for r in records if r.msg_id == msg_id]
    pubs = [_pub(r) for r in mine if r.type is TraceType.Pub]
    subs: dict[tuple[str | None, str], SubTrace] = {}
    for r in mine:
        if r.type is TraceType.SubBefore:
            subs.setdefault((r.request_id, msg_id), SubTrace(
                r.group, r.request_id, r.timestamp, r.retry_times, r.region_id, None, None, None, None))
    for r in mine:
        if r.type is TraceType.SubAfter:
            s = subs.setdefault((r.request_id, msg_id), SubTrace(
                None, r.request_id, r.timestamp - r.cost_time, 0, None, None, None, None, None))
            s.success = r.success
            s.status = _name(ConsumeReturnType, r.context_code)
            s.cost_ms = r.cost_time
            s.end_time = r.timestamp or None
    ends = [TransactionTrace(r.group, r.timestamp, r.transaction_id, r.transaction_state,
                             r.from_transaction_check, r.store_host)
            for r in mine if r.type is TraceType.EndTransaction]
    return MessageTrace(msg_id, trace_topic, sorted(pubs, key=lambda p: p.send_time),
                        sorted(subs.values(), key=lambda s: (s.consume_time, s.consumer_group or "")),
                        sorted(ends, key=lambda e: e.time))


async def query_msg_trace_by_id(session: AdminSession, msg_id: str,
                                trace_topic: str = TRACE_TOPIC) -> MessageTrace:
    """The trace of the message ``msg_id`` (the id its producer got) in ``trace_topic``;
    AdminError when the trace topic has no record of it."""
    msg_id = msg_id.strip()
    found = await query_msg_by_key(session, trace_topic, msg_id, max_num=TRACE_QUERY_MAX)
    records: list[TraceRecord] = []
    for m in found:
        records += decode(m.body.decode("utf-8", "replace"))
    trace = group_records(msg_id, trace_topic, records)
    if not (trace.pubs or trace.subs or trace.end_transactions):
        raise AdminError(f"no trace of message {msg_id} in {trace_topic!r} (is tracing enabled "
                         "on its producer and consumers?)")
    return trace
