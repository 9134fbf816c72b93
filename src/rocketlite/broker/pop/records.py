"""The POP path's records, pure: the checkpoint (CK) and ack JSON written to the revive topic, the
receipt handle (RocketMQ's extraInfo) and the pop reply's offset-info strings.

Facts from apache/rocketmq 5 (``PopCheckPoint``, ``AckMsg``, ``BatchAckMsg``, ``ExtraInfoUtil``,
``KeyBuilder``, ``PopAckConstants``):

CK JSON (fastjson, short keys; sorted here as fastjson sorts them)::

    bm  bitMap (int)          acked bits, bit i = the i-th message of the CK
    bn  brokerName
    c   consumer group
    d   queueOffsetDiff       offsets relative to ``so``, one per message (empty: contiguous)
    it  invisibleTime (ms)
    n   num                   messages in the CK (at most 32: the bitmap is an int)
    pt  popTime (ms)
    q   queueId
    ro  reviveOffset          the CK message's offset in its revive queue
    rp  rePutTimes
    so  startOffset           where the pop's read of the queue began
    t   topic                 the topic read (the retry topic for a retry)

Ack JSON: ``ao`` ackOffset, ``so``, ``c``, ``t``, ``q``, ``pt``, ``bn``; a batch ack (tag ``bAck``)
has ``aol`` (the acked offsets) instead of ``ao``. Revive time = ``pt + it``.

Receipt handle: ``ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId
msgQueueOffset`` separated by one space; retryFlag ``0`` normal topic, ``1`` the V1 retry topic
``%RETRY%{group}_{topic}`` (``2``, V2's ``%RETRY%{group}+{topic}``, is read but not written);
reviveQid 999 marks an orderly (FIFO) pop. UNIQ_KEYs: ``topic@queueId@startOffset@group@popTime@
brokerName@ck`` and ``topic@queueId@ackOffset@group@popTime@brokerName@ack``.

Limits: a handle is at most ``MAX_HANDLE_LENGTH`` characters, a record's JSON at most
``MAX_RECORD_BYTES``, a CK at most ``MAX_CK_NUM`` messages; anything else is refused with
``InvalidReceiptHandle`` or ``RecordError`` saying why.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from rocketlite.broker.pop.errors import InvalidReceiptHandle
from rocketlite.common.errors import FormatError

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE
RETRY_TOPIC_PREFIX = "%RETRY%"
FIRST_POP_TIME = "1ST_POP_TIME"  # MessageConst.PROPERTY_FIRST_POP_TIME
KEY_SEP = "@"
MAX_HANDLE_LENGTH = 512
_HANDLE = re.compile(r"(\d{1,18}) (\d{1,18}) (\d{1,18}) (\d{1,9}) ([012]) ([^ ]{1,200}) (\d{1,9})"
                     r"(?: (\d{1,18}))?", re.ASCII)
MAX_RECORD_BYTES = 16 * 1024
MAX_CK_NUM = 32
RETRY_NONE, RETRY_V1, RETRY_V2 = 0, 1, 2


class RecordError(FormatError):
    """A CK or ack record in the revive topic that is not RocketMQ's JSON; the message says why."""


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str) -> str:
    """``KeyBuilder.buildPopRetryTopicV1``: ``%RETRY%{group}_{topic}``."""
    return f"{RETRY_TOPIC_PREFIX}{group}_{topic}"


def _load(data: bytes | str, what: str) -> dict[str, Any]:
    if len(data) > MAX_RECORD_BYTES:
        raise RecordError(f"{what} record of {len(data)} bytes, more than {MAX_RECORD_BYTES}")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise RecordError(f"{what} record is not JSON: {e}") from e
    if not isinstance(obj, dict):
        raise RecordError(f"{what} record is not a JSON object")
    return obj


def _get(obj: dict[str, Any], key: str, typ: type, what: str, default: Any = ...) -> Any:
    v = obj.get(key, default)
    if v is ...:
        raise RecordError(f"{what} record lacks {key!r}")
    if typ is int and (not isinstance(v, int) or isinstance(v, bool)):
        raise RecordError(f"{what} record: {key!r} is not an integer: {v!r}")
    if typ is str and not isinstance(v, str):
        raise RecordError(f"{what} record: {key!r} is not a string: {v!r}")
    return v


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


@dataclass(slots=True)
class PopCheckPoint:
    """One pop of one queue: which messages it hid, until when, and which are acked."""

    start_offset: int
    pop_time: int
    invisible_time: int
    num: int
    queue_id: int
    topic: str
    cid: str
    broker_name: str
    queue_offset_diff: list[int] = field(default_factory=list)
    bit_map: int = 0
    revive_offset: int = 0
    re_put_times: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.num <= MAX_CK_NUM:
            raise RecordError(f"CK with {self.num} messages: must be 1..{MAX_CK_NUM}")
        if self.queue_offset_diff and len(self.queue_offset_diff) != self.num:
            raise RecordError(f"CK with n={self.num} but {len(self.queue_offset_diff)} offsets")

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def offsets(self) -> list[int]:
        """The queue offsets of the CK's messages, in order."""
        if not self.queue_offset_diff:
            return [self.start_offset + i for i in range(self.num)]
        return [self.start_offset + d for d in self.queue_offset_diff]

    def index_of(self, offset: int) -> int:
        """The bit of ``offset``, -1 if the CK does not hold it."""
        if not self.queue_offset_diff:
            i = offset - self.start_offset
            return i if 0 <= i < self.num else -1
        try:
            return self.queue_offset_diff.index(offset - self.start_offset)
        except ValueError:
            return -1

    def acked(self, i: int) -> bool:
        return bool(self.bit_map >> i & 1)

    def set_acked(self, i: int) -> None:
        self.bit_map |= 1 << i

    @property
    def all_acked(self) -> bool:
        return self.bit_map == (1 << self.num) - 1

    @property
    def key(self) -> tuple[str, str, int, int, int, str]:
        """What pairs a CK with its acks: topic, group, queue, start offset, pop time, broker."""
        return (self.topic, self.cid, self.queue_id, self.start_offset, self.pop_time,
                self.broker_name)

    def unique_id(self) -> str:
        return KEY_SEP.join((self.topic, str(self.queue_id), str(self.start_offset), self.cid,
                             str(self.pop_time), self.broker_name, CK_TAG))

    def to_json(self) -> bytes:
        return _dump({"so": self.start_offset, "pt": self.pop_time, "it": self.invisible_time,
                      "bm": self.bit_map, "n": self.num, "q": self.queue_id, "t": self.topic,
                      "c": self.cid, "ro": self.revive_offset, "d": self.queue_offset_diff,
                      "bn": self.broker_name, "rp": self.re_put_times})

    @classmethod
    def from_json(cls, data: bytes | str) -> PopCheckPoint:
        o = _load(data, "CK")
        diff = o.get("d") or []
        if not isinstance(diff, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) for x in diff):
            raise RecordError(f"CK record: 'd' is not a list of integers: {diff!r}")
        return cls(
            start_offset=_get(o, "so", int, "CK"), pop_time=_get(o, "pt", int, "CK"),
            invisible_time=_get(o, "it", int, "CK"), num=_get(o, "n", int, "CK"),
            queue_id=_get(o, "q", int, "CK"), topic=_get(o, "t", str, "CK"),
            cid=_get(o, "c", str, "CK"), broker_name=_get(o, "bn", str, "CK", ""),
            queue_offset_diff=list(diff), bit_map=_get(o, "bm", int, "CK", 0),
            revive_offset=_get(o, "ro", int, "CK", 0), re_put_times=_get(o, "rp", int, "CK", 0),
        )


@dataclass(frozen=True, slots=True)
class AckMsg:
    """An ack of one message (tag ``ack``) or, with ``ack_offsets``, several of one CK (``bAck``)."""

    ack_offset: int
    start_offset: int
    cid: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str
    ack_offsets: tuple[int, ...] = ()

    @property
    def key(self) -> tuple[str, str, int, int, int, str]:
        """The acked CK's ``PopCheckPoint.key``."""
        return (self.topic, self.cid, self.queue_id, self.start_offset, self.pop_time,
                self.broker_name)

    @property
    def offsets(self) -> tuple[int, ...]:
        return self.ack_offsets or (self.ack_offset,)

    @property
    def tag(self) -> str:
        return BATCH_ACK_TAG if self.ack_offsets else ACK_TAG

    def unique_id(self) -> str:
        return KEY_SEP.join((self.topic, str(self.queue_id), str(self.offsets[0]), self.cid,
                             str(self.pop_time), self.broker_name, self.tag))

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {"so": self.start_offset, "c": self.cid, "t": self.topic,
                               "q": self.queue_id, "pt": self.pop_time, "bn": self.broker_name}
        if self.ack_offsets:
            obj["aol"] = list(self.ack_offsets)
        else:
            obj["ao"] = self.ack_offset
        return _dump(obj)

    @classmethod
    def from_json(cls, data: bytes | str) -> AckMsg:
        o = _load(data, "ack")
        aol = o.get("aol") or []
        if not isinstance(aol, list) or len(aol) > MAX_CK_NUM or not all(
                isinstance(x, int) and not isinstance(x, bool) for x in aol):
            raise RecordError(f"ack record: 'aol' is not a list of at most {MAX_CK_NUM} "
                              f"integers: {aol!r}")
        return cls(
            ack_offset=_get(o, "ao", int, "ack", aol[0] if aol else ...),
            start_offset=_get(o, "so", int, "ack"), cid=_get(o, "c", str, "ack"),
            topic=_get(o, "t", str, "ack"), queue_id=_get(o, "q", int, "ack"),
            pop_time=_get(o, "pt", int, "ack"), broker_name=_get(o, "bn", str, "ack", ""),
            ack_offsets=tuple(aol),
        )


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """RocketMQ's extraInfo: what an ack or change of invisible time needs to find the CK."""

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
        return self.pop_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        """The topic the message was popped from (``ExtraInfoUtil.getRealTopic``); ``topic`` may
        be the consumer's topic (gRPC) or already the retry topic (the Java Remoting client
        sends the real topic in ACK_MESSAGE)."""
        if self.retry == RETRY_NONE or topic.startswith(RETRY_TOPIC_PREFIX):
            return topic
        if self.retry == RETRY_V1:
            return pop_retry_topic(topic, group)
        if self.retry == RETRY_V2:
            return f"{RETRY_TOPIC_PREFIX}{group}+{topic}"
        return topic

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
        names = ("ckQueueOffset", "popTime", "invisibleTime", "reviveQid", "retryFlag")
        nums: list[int] = []
        for name, p in zip((*names, "", "queueId", "msgQueueOffset"), parts, strict=False):
            if name == "":
                continue
            if not p.isascii() or not p.lstrip("-").isdigit() or len(p) > 20:
                raise InvalidReceiptHandle(f"the receipt handle's {name} is not a number: {p!r}")
            nums.append(int(p))
        ck, pt, it, rq, retry, qid = nums[:6]
        if retry not in (RETRY_NONE, RETRY_V1, RETRY_V2):
            raise InvalidReceiptHandle(f"the receipt handle's retryFlag is {retry}, not 0, 1 or 2")
        if min(ck, pt, it, rq, qid) < 0 or (len(nums) > 6 and nums[6] < 0):
            raise InvalidReceiptHandle(f"the receipt handle has a negative field: {text[:80]!r}")
        return cls(ck, pt, it, rq, retry, parts[5], qid, nums[6] if len(nums) > 6 else None)


def start_offset_info(entries: list[tuple[bool, int, int]]) -> str:
    """``ExtraInfoUtil.buildStartOffsetInfo`` for (retry, queueId, startOffset) entries."""
    return ";".join(f"{int(r)} {q} {o}" for r, q, o in entries)


def msg_offset_info(entries: list[tuple[bool, int, list[int]]]) -> str:
    """``ExtraInfoUtil.buildMsgOffsetInfo`` for (retry, queueId, message offsets) entries."""
    return ";".join(f"{int(r)} {q} {','.join(map(str, offs))}" for r, q, offs in entries)


def order_count_info(entries: list[tuple[bool, int, int, int]]) -> str:
    """``buildQueueOffsetOrderCountInfo`` for (retry, queueId, queueOffset, count) entries."""
    return ";".join(f"{int(r)} qo{q}%{o} {c}" for r, q, o, c in entries)


MAX_BATCH_ACKS = 1024  # entries of one BATCH_ACK_MESSAGE body
MAX_BITSET_BYTES = 128  # an entry's offsets lie within 1024 of its CK's start
MAX_BATCH_ACK_OFFSETS = 32 * MAX_BATCH_ACKS  # acked offsets of one body


@dataclass(frozen=True, slots=True)
class BatchAck:
    """One entry of BATCH_ACK_MESSAGE's body (``BatchAck``: ``c t r so q rq pt it b``); ``b`` is
    a Java ``BitSet`` as fastjson writes it (base64 of ``toByteArray``, little-endian), bit i
    acking queue offset ``so + i``."""

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


def _bitset(v: Any) -> int:
    if isinstance(v, str):
        try:
            raw = base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError) as e:
            raise RecordError(f"batch ack: 'b' is not base64: {e}") from e
    elif isinstance(v, list) and all(isinstance(x, int) and -128 <= x < 256 for x in v):
        raw = bytes(x & 0xFF for x in v)
    else:
        raise RecordError(f"batch ack: 'b' is not a BitSet: {str(v)[:80]!r}")
    if len(raw) > MAX_BITSET_BYTES:
        raise RecordError(f"batch ack: a BitSet of {len(raw)} bytes, more than "
                          f"{MAX_BITSET_BYTES}")
    return int.from_bytes(raw, "little")


def parse_batch_ack_body(data: bytes) -> tuple[str, list[BatchAck]]:
    """BATCH_ACK_MESSAGE's body (``BatchAckMessageRequestBody``): broker name and entries."""
    if len(data) > MAX_BATCH_ACKS * 512:
        raise RecordError(f"batch ack body of {len(data)} bytes is too large")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise RecordError(f"batch ack body is not JSON: {e}") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("acks"), list):
        raise RecordError("batch ack body lacks its 'acks' list")
    acks = obj["acks"]
    if len(acks) > MAX_BATCH_ACKS:
        raise RecordError(f"batch ack body with {len(acks)} entries, more than {MAX_BATCH_ACKS}")
    out = []
    for a in acks:
        if not isinstance(a, dict):
            raise RecordError("batch ack entry is not a JSON object")
        r = a.get("r", "0")
        if r not in ("0", "1", "2"):
            raise RecordError(f"batch ack: 'r' is {r!r}, not \"0\", \"1\" or \"2\"")
        out.append(BatchAck(
            _get(a, "c", str, "batch ack"), _get(a, "t", str, "batch ack"), int(r),
            _get(a, "so", int, "batch ack"), _get(a, "q", int, "batch ack"),
            _get(a, "rq", int, "batch ack"), _get(a, "pt", int, "batch ack"),
            _get(a, "it", int, "batch ack"), _bitset(a.get("b", ""))))
    total = sum(a.bits.bit_count() for a in out)
    if total > MAX_BATCH_ACK_OFFSETS:
        raise RecordError(f"batch ack body acks {total} offsets, more than "
                          f"{MAX_BATCH_ACK_OFFSETS}")
    broker = obj.get("brokerName")
    return (broker if isinstance(broker, str) else ""), out
