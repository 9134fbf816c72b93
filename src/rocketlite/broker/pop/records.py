"""The POP path's records, pure: the checkpoint (CK) and ack JSON written to the revive topic.
The strings a client sees (receipt handle, the pop reply's offset-info strings, the BATCH_ACK
body) are ``protocol.pop_info``'s, shared with the client.

Facts from apache/rocketmq 5 (``PopCheckPoint``, ``AckMsg``, ``BatchAckMsg``, ``KeyBuilder``,
``PopAckConstants``):

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
has ``aol`` (the acked offsets) instead of ``ao``. Revive time = ``pt + it``. UNIQ_KEYs:
``topic@queueId@startOffset@group@popTime@brokerName@ck`` and
``topic@queueId@ackOffset@group@popTime@brokerName@ack``.

Limits: a record's JSON at most ``MAX_RECORD_BYTES``, a CK at most ``MAX_CK_NUM`` messages;
anything else is refused with ``RecordError`` saying why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rocketlite.common.errors import FormatError
from rocketlite.protocol.pop_info import MAX_POP_NUM

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
KEY_SEP = "@"
MAX_RECORD_BYTES = 16 * 1024
MAX_CK_NUM = MAX_POP_NUM  # a CK holds the messages of one pop


class RecordError(FormatError):
    """A CK or ack record in the revive topic that is not RocketMQ's JSON; the message says why."""


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


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
