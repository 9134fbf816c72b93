"""Messages as the client sees them: ``Message`` to send, ``MessageExt`` received, and the pieces
of the wire format that belong to a client (property assembly, UNIQ_KEY ids, body compression).

A ``Message`` carries its tags, keys, delay and user properties as fields; ``wire_properties``
turns them into RocketMQ's property map (``TAGS``, ``KEYS`` space separated, ``WAIT``, ``DELAY``,
``TIMER_DELIVER_MS``, then user properties). User properties may not reuse a name the system
owns (Java's ``MessageConst.STRING_HASH_SET``) nor contain the separators ``\\x01``/``\\x02``.

UNIQ_KEY (``MessageClientIDSetter``): 16 bytes in upper-case hex::

    IP (4)  PID (2)  RANDOM (4, Java's class loader hash)  MS SINCE MONTH START (4)  COUNTER (2)

Compression (``MessageSysFlag``): bit 0x1 marks a compressed body, bits 8-10 name the codec
(0 or 0x300 zlib, 0x100 LZ4 frame, 0x200 zstd frame). Java compresses bodies of 4 KiB or more.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar, overload

import lz4.frame
import zstandard

from rocketlite.client.errors import MQClientError
from rocketlite.client.send_codec import UniqKeys, UniqKeysPy
from rocketlite.common import native
from rocketlite.common.errors import CorruptRecordError
from rocketlite.formats import properties as props
from rocketlite.formats.message_id import encode_message_id
from rocketlite.formats.message_record import SYSFLAG_COMPRESSED, crc32, decode_record, unpack_v4
from rocketlite.formats.properties import decode_properties

# Property names beyond those formats.properties names (MessageConst.java).
RECONSUME_TIME: Final = "RECONSUME_TIME"
MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
TRANSACTION_ID: Final = "__transactionId__"
TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
CONSUME_START_TIME: Final = "CONSUME_START_TIME"
SHARDING_KEY: Final = "__SHARDINGKEY"

RESERVED_PROPERTIES: Final = frozenset({
    props.KEYS, props.TAGS, props.WAIT, props.DELAY, props.RETRY_TOPIC, props.REAL_TOPIC,
    props.REAL_QID, props.TRAN_MSG, props.PGROUP, props.MIN_OFFSET, props.MAX_OFFSET,
    props.ORIGIN_MESSAGE_ID, props.UNIQ_KEY, "BUYER_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", RECONSUME_TIME, "MSG_REGION", "TRACE_ON", MAX_RECONSUME_TIMES, CONSUME_START_TIME,
    TRANSACTION_ID, TRANSACTION_CHECK_TIMES, "INSTANCE_ID", "INNER_NUM", "INNER_BASE", "CLUSTER",
    TIMER_DELIVER_MS, TIMER_DELAY_SEC, "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", "__STARTDELIVERTIME", "POP_CK", "1ST_POP_TIME",
})

COMPRESSION_TYPE_MASK: Final = 0x700
COMPRESSION_LZ4: Final = 0x100
COMPRESSION_ZSTD: Final = 0x200
COMPRESSION_ZLIB: Final = 0x300
_CODECS: Final = {"zlib": COMPRESSION_ZLIB, "lz4": COMPRESSION_LZ4, "zstd": COMPRESSION_ZSTD}


@dataclass(slots=True)
class Message:
    """A message to send. ``keys`` are indexed by the broker (query by key); ``tags`` filter on
    consume; ``delay_level`` (1-18) and ``deliver_time_ms`` (epoch ms) delay delivery.

    ``uniq_key`` presets the UNIQ_KEY (the message id) instead of the producer's generated one, as
    Java keeps a UNIQ_KEY already on a message (``MessageClientIDSetter.setUniqID``): a writer
    that may send the same record again (a retried Spark task) gives both copies one id, so
    consumers can deduplicate and the broker's index finds either by it."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: Sequence[str] | str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_level: int = 0
    deliver_time_ms: int | None = None
    wait_store_msg_ok: bool = True
    uniq_key: str | None = None

    def key_list(self) -> list[str]:
        if self.keys is None:
            return []
        if isinstance(self.keys, str):
            return [k for k in self.keys.split(props.KEY_SEPARATOR) if k]
        return [k for k in self.keys if k]

    def wire_properties(self) -> dict[str, str]:
        """The property map sent to the broker (without UNIQ_KEY, which the producer adds)."""
        out: dict[str, str] = {}
        if (not self.tags and not self.keys and not self.properties and self.wait_store_msg_ok
                and self.delay_level <= 0 and self.deliver_time_ms is None):
            return out  # a plain message: nothing to check
        if self.tags:
            out[props.TAGS] = self.tags
        keys = self.key_list()
        if keys:
            out[props.KEYS] = props.KEY_SEPARATOR.join(keys)
        if not self.wait_store_msg_ok:
            out[props.WAIT] = "false"
        if self.delay_level > 0:
            out[props.DELAY] = str(self.delay_level)
        if self.deliver_time_ms is not None:
            out[TIMER_DELIVER_MS] = str(self.deliver_time_ms)
        for name, value in self.properties.items():
            if name in RESERVED_PROPERTIES:
                raise MQClientError(f"property {name!r} is reserved by RocketMQ; set it through Message")
            out[name] = value
        for name, value in out.items():
            if _bad_text(name) or _bad_text(value):
                raise MQClientError(f"property {name!r}: names and values must be non-empty and free "
                                    "of the separators \\x01 and \\x02")
        return out


def _bad_text(s: str) -> bool:
    return not s or "\x01" in s or "\x02" in s


_UNIQ_KEY_TEXT = re.compile(r"[0-9A-Za-z_.:-]{1,128}")


def check_uniq_key(uniq: str) -> None:
    """A preset UNIQ_KEY: 1-128 characters of letters, digits, ``_ . : -`` (RocketMQ's own are 32
    upper-case hex digits); anything else could break the property string or the index."""
    if _UNIQ_KEY_TEXT.fullmatch(uniq) is None:
        raise MQClientError(f"uniq_key {uniq!r} is invalid: 1-128 letters, digits, '_', '.', ':' or '-'")


T = TypeVar("T")


class _Lazy(Generic[T]):
    """A field of ``MessageExt`` kept in the slot of its name with a leading ``_``; None there
    means not made yet: ``make(message)`` makes it on first read (from the record's bytes)."""

    def __init__(self, make: Callable[[MessageExt], T]) -> None:
        self.make = make
        self.slot: Any = None

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = owner.__dict__["_" + name]  # the slot's member descriptor

    @overload
    def __get__(self, obj: None, owner: type) -> _Lazy[T]: ...
    @overload
    def __get__(self, obj: MessageExt, owner: type) -> T: ...
    def __get__(self, obj: MessageExt | None, owner: type) -> T | _Lazy[T]:
        if obj is None:
            return self
        value: T | None = self.slot.__get__(obj, owner)
        if value is None:
            value = self.make(obj)
            self.slot.__set__(obj, value)
        return value

    def __set__(self, obj: MessageExt, value: T) -> None:
        self.slot.__set__(obj, value)


class MessageExt:
    """A stored message as pulled or queried. ``msg_id`` is the UNIQ_KEY when the producer set one,
    else the broker's offset id (``offset_msg_id``: store host, port and CommitLog offset).

    Built by ``decode_messages`` from a pull's records, the properties, the two hosts and the ids
    are kept as the record's bytes and made into text on first access (most consumers read the
    body and nothing else); the constructor takes them made."""

    __slots__ = (  # noqa: RUF023 - the fields, then the lazy ones with what they are made from
        "topic", "body", "queue_id", "queue_offset", "commit_log_offset", "sys_flag", "flag",
        "born_timestamp", "store_timestamp", "reconsume_times", "prepared_transaction_offset",
        "body_crc", "broker_name",
        # made on first access from the record's bytes when None:
        "_properties", "_raw_properties", "_born_host", "_born_raw", "_store_host", "_store_raw",
        "_msg_id", "_offset_msg_id",
    )
    FIELDS: Final = (
        "topic", "body", "properties", "queue_id", "queue_offset", "commit_log_offset", "sys_flag",
        "flag", "born_timestamp", "store_timestamp", "born_host", "store_host", "reconsume_times",
        "prepared_transaction_offset", "body_crc", "msg_id", "offset_msg_id", "broker_name",
    )
    """The public fields, in the constructor's order (equality and repr compare them)."""
    DECODED: Final = (
        "topic", "body", "_raw_properties", "queue_id", "queue_offset", "commit_log_offset",
        "sys_flag", "flag", "born_timestamp", "store_timestamp", "_born_raw", "_store_raw",
        "reconsume_times", "prepared_transaction_offset", "body_crc", "broker_name",
    )
    """The slots a record decoder sets (``_decoded``) from the record's fields."""
    LAZY: Final = ("_properties", "_born_host", "_store_host", "_msg_id", "_offset_msg_id")
    """The slots a record decoder leaves None: made from the ones above on first access."""

    topic: str
    body: bytes
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    flag: int
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int
    broker_name: str
    _properties: dict[str, str] | None
    _raw_properties: bytes
    _born_host: str | None
    _born_raw: bytes
    _store_host: str | None
    _store_raw: bytes
    _msg_id: str | None
    _offset_msg_id: str | None

    def __init__(self, topic: str, body: bytes, properties: dict[str, str], queue_id: int,
                 queue_offset: int, commit_log_offset: int, sys_flag: int, flag: int,
                 born_timestamp: int, store_timestamp: int, born_host: str, store_host: str,
                 reconsume_times: int, prepared_transaction_offset: int, body_crc: int,
                 msg_id: str, offset_msg_id: str, broker_name: str = "") -> None:
        self.topic = topic
        self.body = body
        self._properties = properties
        self._raw_properties = b""
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.sys_flag = sys_flag
        self.flag = flag
        self.born_timestamp = born_timestamp
        self.store_timestamp = store_timestamp
        self._born_host, self._born_raw = born_host, b""
        self._store_host, self._store_raw = store_host, b""
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.body_crc = body_crc
        self._msg_id = msg_id
        self._offset_msg_id = offset_msg_id
        self.broker_name = broker_name

    @classmethod
    def _decoded(cls, values: Sequence[object]) -> MessageExt:
        """A message from a record's fields in ``DECODED`` order (what the compiled decoder
        does through the slots)."""
        m = cls.__new__(cls)
        for name, value in zip(cls.DECODED, values, strict=True):
            setattr(m, name, value)
        for name in cls.LAZY:
            setattr(m, name, None)
        return m

    properties: _Lazy[dict[str, str]] = _Lazy(
        lambda m: decode_properties(m._raw_properties.decode("utf-8", "replace")))
    born_host: _Lazy[str] = _Lazy(lambda m: _host8(m._born_raw)[0])
    store_host: _Lazy[str] = _Lazy(lambda m: _host8(m._store_raw)[0])
    offset_msg_id: _Lazy[str] = _Lazy(lambda m: f"{_host8(m._store_raw)[1]}{m.commit_log_offset:016X}")
    msg_id: _Lazy[str] = _Lazy(lambda m: m.properties.get(props.UNIQ_KEY) or m.offset_msg_id)

    @property
    def tags(self) -> str | None:
        return self.properties.get(props.TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(props.KEYS, "").split(props.KEY_SEPARATOR) if k]

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(props.UNIQ_KEY)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it was

    def __repr__(self) -> str:
        return "MessageExt(" + ", ".join(f"{n}={v!r}" for n, v in zip(self.FIELDS, self._values(),
                                                                       strict=True)) + ")"


_HOSTS: dict[tuple[bytes, int], str] = {}  # "ip:port" by address: a pull repeats a few hosts


def _host(ip: bytes, port: int) -> str:
    key = (ip, port)
    text = _HOSTS.get(key)
    if text is None:
        if len(_HOSTS) >= 4096:
            _HOSTS.clear()
        text = _HOSTS[key] = _format_host(ip, port)
    return text


def _format_host(ip: bytes, port: int) -> str:
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    import ipaddress

    return f"[{ipaddress.IPv6Address(ip)}]:{port}"


def decode_messages(body: bytes, broker_name: str = "", *, verify_crc: bool = True) -> list[MessageExt]:
    """Records back to back (a pull or query reply body) -> messages, bodies decompressed.

    Raises ``MQClientError`` on a corrupted record (with its position)."""
    if body.__class__ is not bytes:
        body = bytes(body)
    out: list[MessageExt] = []
    pos, end = 0, len(body)
    while pos < end:
        pos = _run(body, pos, end, broker_name, verify_crc, out)  # the common records
        if pos >= end:
            break
        one = _decode_one(body, pos, end, broker_name, verify_crc)  # any other one
        if one is None:
            break
        out.append(one[0])
        pos += one[1]
    return out


def iter_messages(body: bytes, broker_name: str = "", *, verify_crc: bool = True) -> Iterator[MessageExt]:
    """``decode_messages`` one message at a time."""
    yield from decode_messages(body, broker_name, verify_crc=verify_crc)


_HOST8: dict[bytes, tuple[str, str]] = {}  # 8 record bytes (IPv4, port) -> ("ip:port", id prefix)


def _host8(raw: bytes) -> tuple[str, str]:
    """A record's IPv4 host and port as text, and as the hex prefix of an offset message id."""
    out = _HOST8.get(raw)
    if out is None:
        if len(_HOST8) >= 4096:
            _HOST8.clear()
        out = _HOST8[raw] = (_format_host(raw[:4], int.from_bytes(raw[4:], "big", signed=True)),
                             raw.hex().upper())
    return out


def _run_py(body: bytes, pos: int, end: int, broker_name: str, verify_crc: bool,
            out: list[MessageExt]) -> int:
    """Decode the common records from ``pos`` (IPv4 hosts, a V1 topic, an uncompressed body, a
    whole frame, with ``verify_crc`` a matching BODYCRC) into ``out``; return where the first
    other one starts (or ``end``). One struct unpack per record, no intermediate object."""
    decoded = MessageExt._decoded
    while pos < end:
        fast = unpack_v4(body, pos, end, verify_crc)
        if fast is None or fast[0][6] < 0 or fast[0][7] & SYSFLAG_COMPRESSED:
            return pos
        f, payload, topic, text = fast
        pos += f[0]
        m = decoded((topic, payload, b"", f[3], f[5], f[6], f[7], f[4], f[8], f[10], f[9], f[11], f[12],
                     f[13], f[2], broker_name))
        m._properties = decode_properties(text)  # the reference parses at once; the twin on use
        out.append(m)
    return pos


def _decode_one(body: bytes, pos: int, end: int, broker_name: str, verify_crc: bool
                ) -> tuple[MessageExt, int] | None:
    """The record at ``pos`` by the general path (any shape, compression): (message, its size),
    or None at a BLANK record. Raises ``MQClientError`` for a corrupted record."""
    try:
        rec = decode_record(body, pos, end, verify_crc)
    except CorruptRecordError as e:
        raise MQClientError(f"corrupted message at byte {pos} of a {end}-byte reply: {e}") from e
    if rec is None:
        return None
    properties = decode_properties(rec.properties_text)
    payload = rec.body
    if rec.sys_flag & SYSFLAG_COMPRESSED:
        payload = decompress(payload, rec.sys_flag)
    offset_id = encode_message_id(rec.store_host, rec.store_port, rec.commit_log_offset)
    return MessageExt(
        topic=rec.topic, body=payload, properties=properties, queue_id=rec.queue_id,
        queue_offset=rec.queue_offset, commit_log_offset=rec.commit_log_offset,
        sys_flag=rec.sys_flag, flag=rec.flag, born_timestamp=rec.born_timestamp,
        store_timestamp=rec.store_timestamp, born_host=_host(rec.born_host, rec.born_port),
        store_host=_host(rec.store_host, rec.store_port), reconsume_times=rec.reconsume_times,
        prepared_transaction_offset=rec.prepared_transaction_offset, body_crc=rec.body_crc,
        msg_id=properties.get(props.UNIQ_KEY) or offset_id, offset_msg_id=offset_id,
        broker_name=broker_name,
    ), rec.total_size


# The compiled twin of ``_run_py`` (``_message_c.pyx``), unless ROCKETLITE_PURE or not built.
_run: Callable[[bytes, int, int, str, bool, list[MessageExt]], int] = _run_py
_c = native.load("rocketlite.client._message_c")
if _c is not None:
    _run = _c.Decoder(MessageExt, MessageExt.DECODED, MessageExt.LAZY, crc32).run


# ------------------------------------------------------------------------------------ compression


def compression_flag(codec: str) -> int:
    """The sysFlag bits for ``codec`` ("zlib", "lz4" or "zstd"), compressed bit included."""
    try:
        return _CODECS[codec] | SYSFLAG_COMPRESSED
    except KeyError:
        raise MQClientError(f"unknown compression {codec!r}; use one of {sorted(_CODECS)}") from None


def compress(body: bytes, codec: str, level: int = 5) -> bytes:
    if codec == "zlib":
        return zlib.compress(body, level)
    if codec == "lz4":
        return bytes(lz4.frame.compress(body, compression_level=level))
    if codec == "zstd":
        return zstandard.ZstdCompressor(level=level).compress(body)
    raise MQClientError(f"unknown compression {codec!r}; use one of {sorted(_CODECS)}")


def decompress(body: bytes, sys_flag: int, max_size: int = 64 * 1024 * 1024) -> bytes:
    """Undo the compression ``sys_flag`` names; a body that does not decompress (or would exceed
    ``max_size``) raises ``MQClientError``."""
    kind = sys_flag & COMPRESSION_TYPE_MASK
    try:
        if kind in (0, COMPRESSION_ZLIB):
            d = zlib.decompressobj()
            out = d.decompress(body, max_size)
            if d.unconsumed_tail:
                raise MQClientError(f"a compressed body inflates beyond {max_size} bytes")
            return out
        if kind == COMPRESSION_LZ4:
            return bytes(lz4.frame.decompress(body))
        if kind == COMPRESSION_ZSTD:
            return zstandard.ZstdDecompressor().decompress(body, max_output_size=max_size)
    except (zlib.error, RuntimeError, zstandard.ZstdError) as e:
        raise MQClientError(f"cannot decompress a body (sysFlag {sys_flag:#x}): {e}") from e
    raise MQClientError(f"unknown compression type {kind:#x} in sysFlag {sys_flag:#x}")


# ---------------------------------------------------------------------------------------- UNIQ_KEY


def UniqKeyGenerator(ip: bytes = b"\x7f\x00\x00\x01") -> UniqKeysPy:
    """``MessageClientIDSetter``: a fixed prefix (IP, pid, a random int) + time since the start of
    the month in ms + a 16-bit counter (from a random start), as a ``send_codec.UniqKeys``.

    The time field is four bytes: Java casts the long difference to ``int``, so past 2^31 ms
    (about 24.86 days into a month) it wraps negative; the same bits come out here by keeping the
    low 32 bits of the difference."""
    prefix = (ip + struct.pack(">H", os.getpid() & 0xFFFF) + secrets.token_bytes(4)).hex().upper()
    return UniqKeys(prefix, secrets.randbelow(0x10000), month_bounds)


def month_bounds(now_ms: float) -> tuple[float, float]:
    """The start of the local month holding ``now_ms`` and of the next one, in epoch ms."""
    now = dt.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (start + dt.timedelta(days=32)).replace(day=1)
    return start.timestamp() * 1000, nxt.timestamp() * 1000


_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")


def check_topic(topic: str) -> None:
    """Java's ``Validators.checkTopic``: 1-127 characters of ``[%|a-zA-Z0-9_-]``."""
    if _TOPIC.fullmatch(topic) is None:
        raise MQClientError(f"topic {topic!r} is invalid: 1-127 characters of letters, digits, %, |, _ or -")
