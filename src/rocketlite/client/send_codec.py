"""The producer's send frames and send replies without the generic command codec.

``SendFrame`` is the template of one (topic, queue) lane: a SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE)
request with a ROCKETMQ binary header (the layout in ``protocol/command.py``) whose ext fields are
``SendMessageRequestHeaderV2``'s one-letter names in the order the producer has always written them::

    a group, b topic, c create-topic key, d default queue count, e queue id,   -- fixed
    f sysFlag, g bornTimestamp, h flag, i properties,                          -- per message
    j reconsumeTimes (0), k unitMode (false), m batch, n broker name           -- fixed

The fixed entries are encoded once; ``frame`` writes the length field, the header length with the
serialize type, the fixed 13 bytes, the varying entries and the body into one ``bytes``, equal byte
for byte to ``RemotingCommand.encode()`` of the same command (checked by a hypothesis test).

``send_reply`` reads a SEND reply's ``SendMessageResponseHeader`` (msgId, queueId, queueOffset,
transactionId, MSG_REGION) straight from the reply's ext fields: ``None`` for a malformed one.
``ResultReader.read`` makes the producer's ``SendResult`` of it and the reply's ``recallHandle``
(the compiled twin fills the slots of the frozen dataclass directly).

``uniq_key`` spells ``MessageClientIDSetter``'s id: the fixed hex prefix, then the time field (low
32 bits) and the counter (low 16 bits) in upper-case hex. ``UniqKeys`` is a generator of them: a
prefix, a counter, and the month's bounds in epoch ms (from ``roll(now_ms)``, called again when the
month ends); ``at(now_ms)`` makes the next id for a given time, ``next()`` for the wall clock (the
compiled twin reads it with ``clock_gettime``: no Python frame per message).

``PlainPrep.prepare`` is ``Producer._prepare``'s fast path for a plain message (no tags, keys,
properties, delay, preset UNIQ_KEY; a checked topic; a bytes body within the size limit and under
the compression threshold; an int32 flag): the prepared send with UNIQ_KEY as its only property,
or None for anything else, which the general path prepares (or refuses). The compiled twin sets
the slots of the prepared class directly (no ``__init__`` frame).

Each has a compiled twin in ``_send_c.pyx`` (same signatures, same results:
``tests/unit/native/test_send_twin.py``); ``SendFrame``, ``send_reply``, ``uniq_key`` and
``UniqKeys``, ``PlainPrep`` below are the ones that run (compiled unless ``ROCKETLITE_PURE``).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any, Final

from rocketlite.common import native
from rocketlite.common.errors import ProtocolError
from rocketlite.protocol.codes import CURRENT_VERSION, LanguageCode, RequestCode

__all__ = ["PlainPrep", "PlainPrepPy", "ResultReader", "ResultReaderPy", "SendFrame", "SendFramePy",
           "UniqKeys", "UniqKeysPy", "send_reply", "send_reply_py", "uniq_key", "uniq_key_py"]

_HEAD: Final = struct.Struct(">iIhbhiiii")
"""length, oriHeaderLen, code, language, version, opaque, flag, remarkLen, extLen."""
_HEAD_SIZE: Final = 29
_ENTRY: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_ROCKETMQ: Final = 1 << 24
_HEADER_LEN_MAX: Final = 0xFFFFFF
_INT32_MAX: Final = 0x7FFFFFFF
_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_PYTHON: Final = int(LanguageCode.PYTHON)
_F: Final = b"\x00\x01f"
_G: Final = b"\x00\x01g"
_H: Final = b"\x00\x01h"
_I: Final = b"\x00\x01i"


def _entry(key: str, value: str) -> bytes:
    kb = key.encode()
    vb = value.encode()
    return _ENTRY.pack(len(kb)) + kb + _I32.pack(len(vb)) + vb


def _decimal(v: int) -> bytes:
    if not _I64_MIN <= v <= _I64_MAX:
        raise OverflowError(f"{v} does not fit an int64")
    return b"%d" % v


class SendFramePy:
    """The frames of one lane (see the module docstring). ``properties`` is the UTF-8 of the
    message's property string, UNIQ_KEY included."""

    __slots__ = ("_code", "_prefix", "_suffix")

    def __init__(self, group: str, topic: str, create_topic_key: str, default_queue_nums: int,
                 queue_id: int, broker_name: str, batch: bool) -> None:
        self._code = int(RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2)
        self._prefix = b"".join((
            _entry("a", group), _entry("b", topic), _entry("c", create_topic_key),
            _entry("d", str(default_queue_nums)), _entry("e", str(queue_id))))
        self._suffix = b"".join((
            _entry("j", "0"), _entry("k", "false"), _entry("m", "true" if batch else "false"),
            _entry("n", broker_name)))

    def frame(self, opaque: int, sys_flag: int, born_ms: int, flag: int, properties: bytes,
              body: bytes) -> bytes:
        f = _decimal(sys_flag)
        g = _decimal(born_ms)
        h = _decimal(flag)
        prefix = self._prefix
        suffix = self._suffix
        ext_len = len(prefix) + len(suffix) + 4 * 7 + len(f) + len(g) + len(h) + len(properties)
        hlen = 21 + ext_len
        if hlen > _HEADER_LEN_MAX:
            raise ProtocolError(f"header of {hlen} bytes does not fit the 24-bit header length")
        length = 4 + hlen + len(body)
        if length > _INT32_MAX:
            raise ProtocolError(f"frame of {length} bytes does not fit the int32 length")
        pack = _I32.pack
        return b"".join((
            _HEAD.pack(length, _ROCKETMQ | hlen, self._code, _PYTHON, CURRENT_VERSION, opaque, 0, 0,
                       ext_len),
            prefix, _F, pack(len(f)), f, _G, pack(len(g)), g, _H, pack(len(h)), h,
            _I, pack(len(properties)), properties, suffix, body))


def send_reply_py(ext: dict[str, str]) -> tuple[str, int, int, str | None, str | None] | None:
    """(msgId, queueId, queueOffset, transactionId, MSG_REGION) of a SEND reply's ext fields;
    None when msgId is missing or queueId/queueOffset are not decimal int32/int64."""
    msg_id = ext.get("msgId")
    queue_id = _parse_int(ext.get("queueId"), 31)
    queue_offset = _parse_int(ext.get("queueOffset"), 63)
    if msg_id is None or queue_id is None or queue_offset is None:
        return None
    return msg_id, queue_id, queue_offset, ext.get("transactionId"), ext.get("MSG_REGION")


def _parse_int(s: str | None, bits: int) -> int | None:
    """Java's ``Integer/Long.parseInt`` of ASCII decimal: an optional sign, then 1+ digits."""
    if s is None:
        return None
    digits = s[1:] if s[:1] in ("-", "+") else s
    if not digits or not digits.isascii() or not digits.isdigit() or len(digits) > 19:
        return None
    v = int(s)
    if not -(1 << bits) <= v < (1 << bits):
        return None
    return v


class ResultReaderPy:
    """Built once with the result class (fields: status, msg_id, offset_msg_id, queue,
    queue_offset, transaction_id, region_id, recall_handle) and the queue class (topic,
    brokerName, queueId). ``recall_handle`` is the reply's ``recallHandle``, else None."""

    __slots__ = ("queue_cls", "result_cls")

    def __init__(self, result_cls: type, queue_cls: type) -> None:
        self.result_cls = result_cls
        self.queue_cls = queue_cls

    def read(self, ext: dict[str, str], status: object, uniq_key: str, mq: Any) -> Any:
        """The result of a SEND reply with ``ext`` to a send to ``mq`` (the queue the broker
        names, if another), or None for a malformed reply."""
        header = send_reply_py(ext)
        if header is None:
            return None
        msg_id, queue_id, queue_offset, transaction_id, region_id = header
        if queue_id != mq.queueId:
            mq = self.queue_cls(mq.topic, mq.brokerName, queue_id)
        return self.result_cls(status, uniq_key, msg_id, mq, queue_offset, transaction_id, region_id,
                               ext.get("recallHandle"))


def uniq_key_py(prefix: str, since: int, counter: int) -> str:
    return f"{prefix}{since & 0xFFFFFFFF:08X}{counter & 0xFFFF:04X}"


class UniqKeysPy:
    """UNIQ_KEYs from ``prefix`` and a counter starting at ``counter`` (see the module docstring):
    the time field is ``int(now_ms - month_start_ms)``, its low 32 bits (Java's int cast)."""

    __slots__ = ("_counter", "_month_start_ms", "_next_month_ms", "_prefix", "_roll")

    def __init__(self, prefix: str, counter: int, roll: Callable[[float], tuple[float, float]]) -> None:
        self._prefix = prefix
        self._counter = counter
        self._roll = roll
        self._month_start_ms = 0.0
        self._next_month_ms = 0.0

    def at(self, now_ms: float) -> str:
        if now_ms >= self._next_month_ms:
            self._month_start_ms, self._next_month_ms = self._roll(now_ms)
        counter = self._counter
        self._counter = counter + 1
        return uniq_key_py(self._prefix, int(now_ms - self._month_start_ms), counter)

    def next(self) -> str:
        return self.at(time.time() * 1000)

    def many(self, n: int) -> list[str]:
        return [self.next() for _ in range(n)]


class PlainPrepPy:
    """Built with the message class (only exactly it is plain), the prepared class (fields:
    topic, body, properties, sys_flag, flag, uniq_key, batch, wire), a ``UniqKeys`` and the
    producer's set of checked topic names (see the module docstring)."""

    __slots__ = ("cls", "message_cls", "uniq_keys", "valid_topics")

    def __init__(self, message_cls: type, cls: type, uniq_keys: Any, valid_topics: set[str]) -> None:
        self.message_cls: Any = message_cls  # Any: an ``is`` test against a type narrows to object
        self.cls = cls
        self.uniq_keys = uniq_keys
        self.valid_topics = valid_topics

    def prepare(self, msg: Any, max_size: int, compress_over: int) -> Any:
        if msg.__class__ is not self.message_cls:
            return None
        if (msg.tags is not None or msg.keys is not None or msg.deliver_time_ms is not None
                or msg.uniq_key is not None or msg.wait_store_msg_ok is not True):
            return None
        properties = msg.properties
        delay = msg.delay_level
        flag = msg.flag
        if properties.__class__ is not dict or properties or delay.__class__ is not int or delay > 0:
            return None
        if flag.__class__ is not int or not -0x80000000 <= flag <= 0x7FFFFFFF:
            return None
        topic = msg.topic
        body = msg.body
        if topic.__class__ is not str or topic not in self.valid_topics or body.__class__ is not bytes:
            return None
        size = len(body)
        if not size or size > max_size or size >= compress_over:
            return None
        uniq = self.uniq_keys.next()
        text = f"UNIQ_KEY\x01{uniq}\x02"
        return self.cls(topic, body, text, 0, flag, uniq, False, text.encode())


SendFrame: type[SendFramePy] = SendFramePy
ResultReader: type[ResultReaderPy] = ResultReaderPy
send_reply = send_reply_py
uniq_key = uniq_key_py
UniqKeys: type[UniqKeysPy] = UniqKeysPy
PlainPrep: type[PlainPrepPy] = PlainPrepPy
_c = native.load("rocketlite.client._send_c")
if _c is not None:
    SendFrame = _c.SendFrame
    ResultReader = _c.ResultReader
    send_reply = _c.send_reply
    uniq_key = _c.uniq_key
    UniqKeys = _c.UniqKeys
    PlainPrep = _c.PlainPrep
