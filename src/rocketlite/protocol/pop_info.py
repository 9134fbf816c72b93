"""RocketMQ 5's POP strings, pure (sans-IO, no broker or client types): the receipt handle
(``ExtraInfoUtil``'s extraInfo, the message property ``POP_CK``), the three offset-info strings of
a POP_MESSAGE reply, and the BATCH_ACK_MESSAGE body. Both sides use them: the broker writes the
reply headers and reads handles, a Remoting client builds each popped message's handle from the
reply headers (``MQClientAPIImpl.processPopResponse``) and writes batch acks.

Receipt handle (fields separated by one space)::

    ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId [msgQueueOffset]

``ckQueueOffset`` is where the pop's read of the queue began (the CK's start offset), ``popTime``
and ``invisibleTime`` in ms, ``reviveQid`` the revive queue of the CK (999: an orderly pop, no CK),
``retryFlag`` ``0`` the topic itself, ``1`` the V1 retry topic ``%RETRY%{group}_{topic}``, ``2``
the V2 one ``%RETRY%{group}+{topic}``; ``msgQueueOffset`` the message's own queue offset (a Java
client always appends it).

Reply headers of POP_MESSAGE, entries joined by ``;``, fields by a space:

    startOffsetInfo   ``retry queueId startOffset``           one per queue read
    msgOffsetInfo     ``retry queueId off1,off2,...``          one per queue with messages
    orderCountInfo    ``retry qo{queueId}%{offset} count``     one per message (orderly pops);
                      older brokers: ``retry queueId count``   one per queue

BATCH_ACK_MESSAGE body (``BatchAckMessageRequestBody``): ``{"acks": [...], "brokerName": ...}``,
each ack (``BatchAck``) ``c`` group, ``t`` topic, ``r`` retry flag as a string, ``so`` the CK's
start offset, ``q`` queue, ``rq`` revive queue, ``pt`` pop time, ``it`` invisible time, ``b`` the
acked offsets as a Java ``BitSet`` (bit i acks offset ``so + i``) written by fastjson as the base64
of ``BitSet.toByteArray()`` (little-endian, trailing zero bytes dropped).

Limits, the same for the broker that reads and the client that writes: a pop asks for at most
``MAX_POP_NUM`` messages, hidden at most ``MAX_INVISIBLE_MS``; a handle is at most
``MAX_HANDLE_LENGTH`` characters, an info string at most ``MAX_INFO_LENGTH``, a batch-ack body at
most ``MAX_BATCH_ACK_BODY_BYTES`` bytes, ``MAX_BATCH_ACKS`` entries, ``MAX_BITSET_BYTES`` per
BitSet (offsets within ``8 * MAX_BITSET_BYTES`` of the CK's start) and ``MAX_BATCH_ACK_OFFSETS``
acked offsets; ``encode_batch_ack_body`` refuses what ``parse_batch_ack_body`` would. Anything
malformed raises ``InvalidReceiptHandle`` or ``PopInfoError`` saying why.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from rocketlite.common.errors import FormatError

ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE
RETRY_TOPIC_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
POP_CK = "POP_CK"  # MessageConst.PROPERTY_POP_CK: the handle, as a Java client keeps it
FIRST_POP_TIME = "1ST_POP_TIME"  # MessageConst.PROPERTY_FIRST_POP_TIME
RETRY_NONE, RETRY_V1, RETRY_V2 = 0, 1, 2
MAX_POP_NUM = 32  # messages of one POP_MESSAGE (maxMsgNums): a CK's bitmap is an int
MAX_INVISIBLE_MS = 12 * 3600 * 1000  # the longest invisible time of a pop or a change
MAX_HANDLE_LENGTH = 512
MAX_INFO_LENGTH = 64 * 1024
MAX_INFO_ENTRIES = 1024
MAX_BATCH_ACKS = 1024  # entries of one BATCH_ACK_MESSAGE body
MAX_BITSET_BYTES = 128  # an entry's offsets lie within 1024 of its CK's start
MAX_BATCH_ACK_OFFSETS = 32 * MAX_BATCH_ACKS  # acked offsets of one body
MAX_BATCH_ACK_BODY_BYTES = 1024 * MAX_BATCH_ACKS  # an entry with 255/127-character names fits
_MAX_DIGITS = 20
# the usual handle, matched at once; anything else takes ReceiptHandle._parse_slowly's checks
_HANDLE = re.compile(r"(\d{1,18}) (\d{1,18}) (\d{1,18}) (\d{1,9}) ([012]) ([^ ]{1,200}) (\d{1,9})"
                     r"(?: (\d{1,18}))?", re.ASCII)


class PopInfoError(FormatError):
    """An offset-info string or a batch-ack body that is not RocketMQ's; the message says why."""


class InvalidReceiptHandle(FormatError):
    """A receipt handle (extraInfo) that does not parse; the message says which field."""


def pop_retry_topic(topic: str, group: str) -> str:
    """``KeyBuilder.buildPopRetryTopicV1``: ``%RETRY%{group}_{topic}``."""
    return f"{RETRY_TOPIC_PREFIX}{group}_{topic}"


def pop_retry_topic_v2(topic: str, group: str) -> str:
    """``KeyBuilder.buildPopRetryTopicV2``: ``%RETRY%{group}+{topic}``."""
    return f"{RETRY_TOPIC_PREFIX}{group}+{topic}"


def retry_flag(topic: str) -> int:
    """``ExtraInfoUtil.getRetry(topic)``: 2 for a V2 retry topic, 1 for any other retry topic."""
    if topic.startswith(RETRY_TOPIC_PREFIX):
        return RETRY_V2 if "+" in topic else RETRY_V1
    return RETRY_NONE


def _int(text: str, what: str, exc: type[FormatError] = PopInfoError) -> int:
    digits = text[1:] if text.startswith("-") else text
    if not digits.isascii() or not digits.isdigit() or len(text) > _MAX_DIGITS:
        raise exc(f"{what} is not a number: {text[:40]!r}")
    return int(text)


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """RocketMQ's extraInfo: what an ack or a change of invisible time needs to find the CK."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: int
    broker_name: str
    queue_id: int
    msg_queue_offset: int | None = None

    @property
    def revive_time(self) -> int:
        """When the message becomes visible again (epoch ms)."""
        return self.pop_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        """The topic the message was popped from (``ExtraInfoUtil.getRealTopic``); ``topic`` may
        be the consumer's topic or already the retry topic (the Java Remoting client sends the
        real topic in ACK_MESSAGE)."""
        if self.retry == RETRY_NONE or topic.startswith(RETRY_TOPIC_PREFIX):
            return topic
        if self.retry == RETRY_V1:
            return pop_retry_topic(topic, group)
        return pop_retry_topic_v2(topic, group)

    def encode(self) -> str:
        parts = [str(self.ck_queue_offset), str(self.pop_time), str(self.invisible_time),
                 str(self.revive_qid), str(self.retry), self.broker_name, str(self.queue_id)]
        if self.msg_queue_offset is not None:
            parts.append(str(self.msg_queue_offset))
        return " ".join(parts)

    @classmethod
    def parse(cls, text: str) -> ReceiptHandle:
        m = _HANDLE.fullmatch(text)
        if m is not None:  # the usual handle: one regex, then the reasons below are not needed
            ck, pt, it, rq, retry, bn, qid, mo = m.groups()
            return cls(int(ck), int(pt), int(it), int(rq), int(retry), bn, int(qid),
                       None if mo is None else int(mo))
        return cls._parse_slowly(text)

    @classmethod
    def _parse_slowly(cls, text: str) -> ReceiptHandle:
        """``parse`` of a handle the fast pattern refused: the reason, or the handle (a field
        the pattern does not allow for, e.g. an 11-digit queue id, is checked here)."""
        if not text:
            raise InvalidReceiptHandle("the receipt handle is empty")
        if len(text) > MAX_HANDLE_LENGTH:
            raise InvalidReceiptHandle(f"the receipt handle is {len(text)} characters long, "
                                       f"more than {MAX_HANDLE_LENGTH}")
        parts = text.split(" ")
        if len(parts) not in (7, 8):
            raise InvalidReceiptHandle(f"the receipt handle has {len(parts)} space-separated "
                                       f"fields, expected 7 or 8: {text[:80]!r}")
        names = ("ckQueueOffset", "popTime", "invisibleTime", "reviveQid", "retryFlag", "",
                 "queueId", "msgQueueOffset")
        nums = [_int(p, f"the receipt handle's {name}", InvalidReceiptHandle)
                for name, p in zip(names, parts, strict=False) if name]
        ck, pt, it, rq, retry, qid = nums[:6]
        if retry not in (RETRY_NONE, RETRY_V1, RETRY_V2):
            raise InvalidReceiptHandle(f"the receipt handle's retryFlag is {retry}, not 0, 1 or 2")
        if min(nums) < 0:
            raise InvalidReceiptHandle(f"the receipt handle has a negative field: {text[:80]!r}")
        return cls(ck, pt, it, rq, retry, parts[5], qid, nums[6] if len(nums) > 6 else None)


# -- the POP_MESSAGE reply's offset-info strings ---------------------------------------------

def start_offset_info(entries: list[tuple[bool, int, int]]) -> str:
    """``ExtraInfoUtil.buildStartOffsetInfo`` for (retry, queueId, startOffset) entries."""
    return ";".join(f"{int(r)} {q} {o}" for r, q, o in entries)


def msg_offset_info(entries: list[tuple[bool, int, list[int]]]) -> str:
    """``ExtraInfoUtil.buildMsgOffsetInfo`` for (retry, queueId, message offsets) entries."""
    return ";".join(f"{int(r)} {q} {','.join(map(str, offs))}" for r, q, offs in entries)


def order_count_info(entries: list[tuple[bool, int, int, int]]) -> str:
    """``buildQueueOffsetOrderCountInfo`` for (retry, queueId, queueOffset, count) entries."""
    return ";".join(f"{int(r)} qo{q}%{o} {c}" for r, q, o, c in entries)


def _entries(text: str | None, what: str) -> list[list[str]]:
    if not text:
        return []
    if len(text) > MAX_INFO_LENGTH:
        raise PopInfoError(f"{what} of {len(text)} characters, more than {MAX_INFO_LENGTH}")
    items = text.split(";")
    if len(items) > MAX_INFO_ENTRIES:
        raise PopInfoError(f"{what} with {len(items)} entries, more than {MAX_INFO_ENTRIES}")
    out = []
    for item in items:
        fields = item.split(" ")
        if len(fields) != 3:
            raise PopInfoError(f"{what} entry {item[:80]!r} has {len(fields)} fields, not 3")
        out.append(fields)
    return out


def _retry(text: str, what: str) -> int:
    r = _int(text, f"{what}'s retry flag")
    if r not in (RETRY_NONE, RETRY_V1, RETRY_V2):
        raise PopInfoError(f"{what}'s retry flag is {r}, not 0, 1 or 2")
    return r


def _unique(out: dict[Any, Any], key: Any, what: str) -> None:
    if key in out:
        raise PopInfoError(f"{what}: duplicate entry for {key}")


def parse_start_offset_info(text: str | None) -> dict[tuple[int, int], int]:
    """``ExtraInfoUtil.parseStartOffsetInfo``: (retry, queueId) -> start offset."""
    what = "startOffsetInfo"
    out: dict[tuple[int, int], int] = {}
    for r, q, o in _entries(text, what):
        key = (_retry(r, what), _int(q, f"{what}'s queueId"))
        _unique(out, key, what)
        out[key] = _int(o, f"{what}'s offset")
    return out


def parse_msg_offset_info(text: str | None) -> dict[tuple[int, int], list[int]]:
    """``ExtraInfoUtil.parseMsgOffsetInfo``: (retry, queueId) -> the messages' offsets."""
    what = "msgOffsetInfo"
    out: dict[tuple[int, int], list[int]] = {}
    for r, q, offs in _entries(text, what):
        key = (_retry(r, what), _int(q, f"{what}'s queueId"))
        _unique(out, key, what)
        out[key] = [_int(o, f"{what}'s offset") for o in offs.split(",")]
    return out


def parse_order_count_info(text: str | None) -> dict[tuple[int, int, int | None], int]:
    """``ExtraInfoUtil.parseOrderCountInfo``: (retry, queueId, offset) -> the earlier deliveries
    of the message at that offset; offset None for an older broker's per-queue entry."""
    what = "orderCountInfo"
    out: dict[tuple[int, int, int | None], int] = {}
    for r, k, c in _entries(text, what):
        key: tuple[int, int, int | None]
        if k.startswith("qo"):
            q, sep, o = k[2:].partition("%")
            if not sep:
                raise PopInfoError(f"{what} key {k[:40]!r} is not qo<queueId>%<offset>")
            key = (_retry(r, what), _int(q, f"{what}'s queueId"), _int(o, f"{what}'s offset"))
        else:
            key = (_retry(r, what), _int(k, f"{what}'s queueId"), None)
        _unique(out, key, what)
        out[key] = _int(c, f"{what}'s count")
    return out


@dataclass(frozen=True, slots=True)
class PopReplyInfo:
    """What a POP_MESSAGE reply's header says about its messages, parsed once: each message's
    handle and (orderly pops) earlier deliveries follow from its retry flag, queue and offset."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    start_offsets: dict[tuple[int, int], int]
    msg_offsets: dict[tuple[int, int], list[int]]
    order_counts: dict[tuple[int, int, int | None], int]

    @classmethod
    def parse(cls, pop_time: int, invisible_time: int, revive_qid: int,
              start_info: str | None, msg_info: str | None,
              order_info: str | None = None) -> PopReplyInfo:
        return cls(pop_time, invisible_time, revive_qid, parse_start_offset_info(start_info),
                   parse_msg_offset_info(msg_info), parse_order_count_info(order_info))

    def handle(self, stored_topic: str, queue_id: int, queue_offset: int, broker_name: str,
               first_offset: int | None = None) -> ReceiptHandle:
        """The handle of the message stored in ``stored_topic`` (the retry topic for a retry) at
        ``queue_id``/``queue_offset`` (``processPopResponse``). Without ``startOffsetInfo`` (an
        old broker) the CK's start offset is ``first_offset``, the first offset popped from that
        queue, as the Java client takes it."""
        retry = retry_flag(stored_topic)
        start = self.start_offsets.get((retry, queue_id))
        if start is None:
            if self.start_offsets or first_offset is None:
                raise PopInfoError(f"startOffsetInfo has no entry for retry {retry} queue "
                                   f"{queue_id}")
            start = first_offset
        listed = self.msg_offsets.get((retry, queue_id))
        if listed is not None and queue_offset not in listed:
            raise PopInfoError(f"msgOffsetInfo of retry {retry} queue {queue_id} does not list "
                               f"offset {queue_offset}")
        return ReceiptHandle(start, self.pop_time, self.invisible_time, self.revive_qid, retry,
                             broker_name, queue_id, queue_offset)

    def order_count(self, stored_topic: str, queue_id: int, queue_offset: int) -> int:
        """The earlier deliveries of an orderly-popped message (0 when the reply has none)."""
        retry = retry_flag(stored_topic)
        count = self.order_counts.get((retry, queue_id, queue_offset))
        if count is None:
            count = self.order_counts.get((retry, queue_id, None), 0)
        return count


# -- BATCH_ACK_MESSAGE's body ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BatchAck:
    """One entry of BATCH_ACK_MESSAGE's body (``BatchAck``: ``c t r so q rq pt it b``): the
    acked offsets of one CK, bit i of ``bits`` acking queue offset ``start_offset + i``."""

    cid: str
    topic: str
    retry: int
    start_offset: int
    queue_id: int
    revive_qid: int
    pop_time: int
    invisible_time: int
    bits: int

    @property
    def offsets(self) -> list[int]:
        b, i, out = self.bits, 0, []
        while b:
            if b & 1:
                out.append(self.start_offset + i)
            b >>= 1
            i += 1
        return out

    def handles(self, broker_name: str) -> list[str]:
        return [ReceiptHandle(self.start_offset, self.pop_time, self.invisible_time,
                              self.revive_qid, self.retry, broker_name, self.queue_id,
                              o).encode() for o in self.offsets]

    def to_obj(self) -> dict[str, Any]:
        raw = self.bits.to_bytes((self.bits.bit_length() + 7) // 8, "little")
        return {"c": self.cid, "t": self.topic, "r": str(self.retry), "so": self.start_offset,
                "q": self.queue_id, "rq": self.revive_qid, "pt": self.pop_time,
                "it": self.invisible_time, "b": base64.b64encode(raw).decode("ascii")}


def batch_acks(group: str, topic: str, handles: list[ReceiptHandle]) -> list[BatchAck]:
    """``batchAckMessageAsync``'s grouping: one entry per CK (retry, queue, start offset, pop
    time), a bit per acked message. Every handle needs its message offset, at most
    ``8 * MAX_BITSET_BYTES`` past its CK's start."""
    merged: dict[tuple[int, int, int, int], list[Any]] = {}
    for h in handles:
        if h.msg_queue_offset is None:
            raise InvalidReceiptHandle(f"the receipt handle {h.encode()!r} has no message offset")
        bit = h.msg_queue_offset - h.ck_queue_offset
        if not 0 <= bit < 8 * MAX_BITSET_BYTES:
            raise InvalidReceiptHandle(f"the receipt handle {h.encode()!r}: its offset is "
                                       f"{bit} from its CK's start")
        key = (h.retry, h.queue_id, h.ck_queue_offset, h.pop_time)
        entry = merged.setdefault(key, [h, 0])
        entry[1] |= 1 << bit
    return [BatchAck(group, topic, h.retry, h.ck_queue_offset, h.queue_id, h.revive_qid,
                     h.pop_time, h.invisible_time, bits) for h, bits in merged.values()]


def _check_acks(acks: list[BatchAck]) -> None:
    """The bounds of a body's entries, the same whether building or reading one."""
    if len(acks) > MAX_BATCH_ACKS:
        raise PopInfoError(f"batch ack body with {len(acks)} entries, more than {MAX_BATCH_ACKS}")
    total = 0
    for a in acks:
        size = (a.bits.bit_length() + 7) // 8
        if size > MAX_BITSET_BYTES:
            raise PopInfoError(f"batch ack: a BitSet of {size} bytes, more than "
                               f"{MAX_BITSET_BYTES}")
        total += a.bits.bit_count()
    if total > MAX_BATCH_ACK_OFFSETS:
        raise PopInfoError(f"batch ack body acks {total} offsets, more than "
                           f"{MAX_BATCH_ACK_OFFSETS}")


def _check_size(size: int) -> None:
    if size > MAX_BATCH_ACK_BODY_BYTES:
        raise PopInfoError(f"batch ack body of {size} bytes, more than "
                           f"{MAX_BATCH_ACK_BODY_BYTES}")


def encode_batch_ack_body(broker_name: str, acks: list[BatchAck]) -> bytes:
    """BATCH_ACK_MESSAGE's body for ``acks`` of one broker; ``PopInfoError`` for a body the
    broker would refuse (too many entries, offsets or bytes)."""
    _check_acks(acks)
    obj = {"acks": [a.to_obj() for a in acks], "brokerName": broker_name}
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    _check_size(len(body))
    return body


def _get(obj: dict[str, Any], key: str, typ: type) -> Any:
    if key not in obj:
        raise PopInfoError(f"batch ack entry lacks {key!r}")
    v = obj[key]
    if typ is int and (not isinstance(v, int) or isinstance(v, bool)):
        raise PopInfoError(f"batch ack: {key!r} is not an integer: {v!r}")
    if typ is str and not isinstance(v, str):
        raise PopInfoError(f"batch ack: {key!r} is not a string: {v!r}")
    return v


def _bitset(v: Any) -> int:
    if isinstance(v, str):
        try:
            raw = base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError) as e:
            raise PopInfoError(f"batch ack: 'b' is not base64: {e}") from e
    elif isinstance(v, list) and all(isinstance(x, int) and -128 <= x < 256 for x in v):
        raw = bytes(x & 0xFF for x in v)
    else:
        raise PopInfoError(f"batch ack: 'b' is not a BitSet: {str(v)[:80]!r}")
    if len(raw) > MAX_BITSET_BYTES:
        raise PopInfoError(f"batch ack: a BitSet of {len(raw)} bytes, more than "
                           f"{MAX_BITSET_BYTES}")
    return int.from_bytes(raw, "little")


def parse_batch_ack_body(data: bytes) -> tuple[str, list[BatchAck]]:
    """BATCH_ACK_MESSAGE's body: the broker name ("" when absent) and the entries."""
    _check_size(len(data))
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise PopInfoError(f"batch ack body is not JSON: {e}") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("acks"), list):
        raise PopInfoError("batch ack body lacks its 'acks' list")
    acks = obj["acks"]
    if len(acks) > MAX_BATCH_ACKS:
        raise PopInfoError(f"batch ack body with {len(acks)} entries, more than {MAX_BATCH_ACKS}")
    out = []
    for a in acks:
        if not isinstance(a, dict):
            raise PopInfoError("batch ack entry is not a JSON object")
        r = a.get("r", "0")
        if r not in ("0", "1", "2"):
            raise PopInfoError(f"batch ack: 'r' is {r!r}, not \"0\", \"1\" or \"2\"")
        out.append(BatchAck(_get(a, "c", str), _get(a, "t", str), int(r), _get(a, "so", int),
                            _get(a, "q", int), _get(a, "rq", int), _get(a, "pt", int),
                            _get(a, "it", int), _bitset(a.get("b", ""))))
    _check_acks(out)
    broker = obj.get("brokerName")
    return (broker if isinstance(broker, str) else ""), out
