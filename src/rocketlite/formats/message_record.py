"""The CommitLog message record: the one module that owns its byte layout.

Every record in a CommitLog segment, every record in a PULL_MESSAGE body and every record a client
decodes has this layout (``MessageDecoder.decode`` / ``MessageExtEncoder.calMsgLength`` in Apache
RocketMQ). All integers are big-endian.

====  ===========================  =====================  ======================================
 #    field                        bytes                  notes
====  ===========================  =====================  ======================================
 1    TOTALSIZE                    4                      whole record, this field included
 2    MAGICCODE                    4                      V1 0xDAA320A7, V2 0xDAA320AB, BLANK 0xCBD43194
 3    BODYCRC                      4                      crc32(body) & 0x7FFFFFFF
 4    QUEUEID                      4
 5    FLAG                         4                      the client's flag, opaque to the store
 6    QUEUEOFFSET                  8                      logical offset in its ConsumeQueue
 7    PHYSICALOFFSET               8                      CommitLog offset of this record
 8    SYSFLAG                      4                      MessageSysFlag bits (see below)
 9    BORNTIMESTAMP                8                      ms since the epoch, set by the producer
10    BORNHOST                     4+4 or 16+4            IP then port; 16-byte IP if SYSFLAG & 0x10
11    STORETIMESTAMP               8                      ms since the epoch, set by the store
12    STOREHOST                    4+4 or 16+4            16-byte IP if SYSFLAG & 0x20
13    RECONSUMETIMES               4
14    PREPAREDTRANSACTIONOFFSET    8
15    BODYLENGTH + BODY            4 + n
16    TOPICLENGTH + TOPIC          1 + n (V1), 2 + n (V2)  V2 only when the topic is > 127 bytes
17    PROPERTIESLENGTH + PROPS     2 + n                  ``name\\x01value\\x02`` pairs, UTF-8
====  ===========================  =====================  ======================================

With IPv4 hosts and the V1 topic length, the fixed part is 91 bytes (``FIXED_SIZE_V4``), so a record is
``91 + len(body) + len(topic) + len(properties)`` bytes.

A segment's free tail is closed by a BLANK record: ``TOTALSIZE = bytes left`` and the BLANK magic code;
at least ``END_FILE_MIN_BLANK_LENGTH`` (8) bytes are always left for it.

A record is *whole* when its frame holds: the magic code, a TOTALSIZE that fits the segment and
equals the sum of its fields, and (``verify_crc``) BODYCRC over the body. What the topic and the
properties contain is never a reason to refuse a record (Java keeps such records too): readers
serve it as it is. BODYCRC does not cover them, so a write a crash cut short can leave a frame
that looks whole with zeros where the topic or properties should be; ``torn_tail`` says whether
the last record before the unwritten part of a segment is such a frame, by what a crash can leave
(whole zeroed ``TEAR_UNIT`` blocks from some block boundary to the end of the write). The store
refuses a NUL in the topic or the properties at the door, so no record it acknowledged matches.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from rocketlite.common.errors import CorruptRecordError
from rocketlite.formats.properties import decode_properties

if TYPE_CHECKING:
    import mmap

    def crc32(data: bytes | bytearray | memoryview | mmap.mmap, value: int = 0, /) -> int: ...
else:
    try:  # ISA-L's CRC32: the same polynomial as zlib, 3x faster on 128 B and 4 KiB bodies here
        from isal.isal_zlib import crc32
    except ImportError:  # pragma: no cover - isal has wheels for every platform we install on
        from zlib import crc32

Buffer: TypeAlias = "bytes | bytearray | memoryview | mmap.mmap"

MAGIC_V1 = -626843481  # 0xDAA320A7
MAGIC_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8
TOPIC_V1_MAX_BYTES = 127

# MessageSysFlag
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_NOT_TYPE = 0x0
SYSFLAG_TRANSACTION_PREPARED = 0x4
SYSFLAG_TRANSACTION_COMMIT = 0x8
SYSFLAG_TRANSACTION_ROLLBACK = 0xC
SYSFLAG_TRANSACTION_MASK = 0xC
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20

# Fields 1-9: TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
HEAD = struct.Struct(">iiiiiqqiq")
HEAD_SIZE = 48
BLANK = struct.Struct(">ii")
OFFSETS_AT = 20  # QUEUEOFFSET(8) then PHYSICALOFFSET(8)
TOTALSIZE_MAGIC = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_PORT = _I32

# With IPv4 hosts and a V1 topic length: head 48 + born 8 + store ts 8 + store 8 + reconsume 4
# + prepared 8 + body len 4 + topic len 1 + properties len 2.
FIXED_SIZE_V4 = HEAD_SIZE + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2


def body_crc(body: bytes | memoryview) -> int:
    """BODYCRC as Java's ``UtilAll.crc32`` stores it: CRC32 masked to 31 bits."""
    return crc32(body) & 0x7FFFFFFF


def host_len(v6: bool) -> int:
    return 20 if v6 else 8


def record_size(body_len: int, topic_len: int, props_len: int, sys_flag: int = 0) -> int:
    """Size in bytes of a record with these lengths (``calMsgLength``)."""
    born = 20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8
    store = 20 if sys_flag & SYSFLAG_STOREHOST_V6 else 8
    topic_prefix = 2 if topic_len > TOPIC_V1_MAX_BYTES else 1
    return (
        HEAD_SIZE + born + 8 + store + 4 + 8 + 4 + body_len + topic_prefix + topic_len + 2 + props_len
    )


_STRUCTS: dict[tuple[int, int, int, int], struct.Struct] = {}
_STRUCTS_MAX = 4096


def record_struct(sys_flag: int, body_len: int, topic_len: int, props_len: int) -> struct.Struct:
    """A Struct packing a whole record of these lengths in one call (cached per shape)."""
    key = (sys_flag & (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6), body_len, topic_len, props_len)
    st = _STRUCTS.get(key)
    if st is None:
        born = "16si" if sys_flag & SYSFLAG_BORNHOST_V6 else "4si"
        store = "16si" if sys_flag & SYSFLAG_STOREHOST_V6 else "4si"
        tl = "H" if topic_len > TOPIC_V1_MAX_BYTES else "B"
        st = struct.Struct(
            f">iiiiiqqiq{born}q{store}iqi{body_len}s{tl}{topic_len}sH{props_len}s"
        )
        if len(_STRUCTS) >= _STRUCTS_MAX:
            _STRUCTS.clear()
        _STRUCTS[key] = st
    return st


@functools.lru_cache(maxsize=_STRUCTS_MAX)
def batch_struct(mid_len: int, body_len: int, topic_block_len: int, props_len: int) -> struct.Struct:
    """A Struct packing one record of a batch in 13 fields instead of 22 (cached per shape).

    The fields a batch shares are pre-packed: SYSFLAG through PREPAREDTRANSACTIONOFFSET as one
    ``mid`` block (``batch_mid``) and TOPICLENGTH + TOPIC as one topic block (``topic_block``).
    Per record: TOTALSIZE, MAGIC (4 bytes), BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET,
    mid, BODYLENGTH, BODY, topic block, PROPERTIESLENGTH, PROPERTIES.
    """
    return struct.Struct(f">i4sIiiqq{mid_len}si{body_len}s{topic_block_len}sH{props_len}s")


def batch_mid(
    sys_flag: int, born_timestamp: int, born_host: bytes, born_port: int,
    store_timestamp: int, store_host: bytes, store_port: int,
) -> bytes:
    """Fields 8-14 of a record with no reconsume count and no prepared-transaction offset."""
    return struct.pack(
        f">iq{len(born_host)}siq{len(store_host)}siiq", sys_flag, born_timestamp, born_host,
        born_port, store_timestamp, store_host, store_port, 0, 0,
    )


def topic_block(topic: bytes) -> bytes:
    """Field 16: the topic with its 1-byte (V1) or 2-byte (V2) length prefix."""
    if len(topic) > TOPIC_V1_MAX_BYTES:
        return _U16.pack(len(topic)) + topic
    return bytes((len(topic),)) + topic


def magic_for(topic: bytes) -> int:
    return MAGIC_V2 if len(topic) > TOPIC_V1_MAX_BYTES else MAGIC_V1


def encode_record(
    *,
    topic: bytes,
    body: bytes,
    properties: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    commit_log_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    born_port: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytes:
    """Encode one record. Host flags in ``sys_flag`` must match the host byte lengths."""
    st = record_struct(sys_flag, len(body), len(topic), len(properties))
    magic = MAGIC_V2 if len(topic) > TOPIC_V1_MAX_BYTES else MAGIC_V1
    return st.pack(
        st.size,
        magic,
        body_crc(body) if crc is None else crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp,
        born_host,
        born_port,
        store_timestamp,
        store_host,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        len(body),
        body,
        len(topic),
        topic,
        len(properties),
        properties,
    )


def encode_blank(size: int) -> bytes:
    """The BLANK record that pads a segment's last ``size`` bytes (only its 8-byte head is written)."""
    return BLANK.pack(size, BLANK_MAGIC)


@dataclass(slots=True)
class MessageRecord:
    """A decoded CommitLog record."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    born_port: int
    store_timestamp: int
    store_host: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_text: str

    @property
    def properties(self) -> dict[str, str]:
        return decode_properties(self.properties_text)

    def encode(self) -> bytes:
        return encode_record(
            topic=self.topic.encode(),
            body=self.body,
            properties=self.properties_text.encode(),
            queue_id=self.queue_id,
            flag=self.flag,
            queue_offset=self.queue_offset,
            commit_log_offset=self.commit_log_offset,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            born_host=self.born_host,
            born_port=self.born_port,
            store_timestamp=self.store_timestamp,
            store_host=self.store_host,
            store_port=self.store_port,
            reconsume_times=self.reconsume_times,
            prepared_transaction_offset=self.prepared_transaction_offset,
            crc=self.body_crc,
        )


@dataclass(slots=True, frozen=True)
class RecordSummary:
    """What the dispatcher needs from a record, read without copying its body."""

    total_size: int
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    store_timestamp: int
    topic: str
    properties_text: str


def check_head(buf: Buffer, pos: int, limit: int) -> int:
    """Validate the 8 bytes at ``pos`` and return TOTALSIZE; 0 means a BLANK record (segment end).

    Raises CorruptRecordError for a wrong magic code or a size that cannot be a record.
    """
    if limit - pos < 8:
        raise CorruptRecordError(f"truncated record head at position {pos}")
    size, magic = TOTALSIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return 0
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise CorruptRecordError(f"wrong magic code {magic & 0xFFFFFFFF:#010x} at position {pos}")
    if size < FIXED_SIZE_V4 or size > limit - pos:
        raise CorruptRecordError(f"record size {size} at position {pos} exceeds {limit - pos} bytes")
    return int(size)


def _parse(buf: Buffer, pos: int, limit: int, verify_crc: bool) -> tuple[int, ...]:
    """Walk one record; return the offsets of its variable parts. Raises CorruptRecordError."""
    size = check_head(buf, pos, limit)
    if size == 0:
        return ()
    end = pos + size
    head = HEAD.unpack_from(buf, pos)
    sys_flag = head[7]
    p = pos + HEAD_SIZE
    born_at = p
    p += host_len(bool(sys_flag & SYSFLAG_BORNHOST_V6))
    store_ts_at = p
    p += 8
    store_at = p
    p += host_len(bool(sys_flag & SYSFLAG_STOREHOST_V6))
    tail_at = p  # reconsume(4) prepared(8) bodylen(4)
    p += 12
    if p + 4 > end:
        raise CorruptRecordError(f"hosts overrun record at position {pos}")
    (body_len,) = _I32.unpack_from(buf, p)
    p += 4
    body_at = p
    if body_len < 0 or body_at + body_len > end:
        raise CorruptRecordError(f"body length {body_len} overruns record at position {pos}")
    p += body_len
    if p + (2 if head[1] == MAGIC_V2 else 1) > end:
        raise CorruptRecordError(f"topic overruns record at position {pos}")
    if head[1] == MAGIC_V2:
        (topic_len,) = _U16.unpack_from(buf, p)
        p += 2
    else:
        topic_len = buf[p]
        p += 1
    topic_at = p
    p += topic_len
    if p + 2 > end:
        raise CorruptRecordError(f"topic overruns record at position {pos}")
    (props_len,) = _U16.unpack_from(buf, p)
    p += 2
    props_at = p
    if p + props_len != end:
        raise CorruptRecordError(
            f"record at position {pos}: fields add up to {p + props_len - pos} bytes, TOTALSIZE {size}"
        )
    if verify_crc:
        crc = crc32(memoryview(buf)[body_at : body_at + body_len]) & 0x7FFFFFFF
        if crc != head[2]:
            raise CorruptRecordError(f"body CRC mismatch at position {pos}")
    return (size, born_at, store_ts_at, store_at, tail_at, body_at, body_len, topic_at,
            topic_len, props_at, props_len)


# Fields 1-15 up to BODYLENGTH of a record with IPv4 hosts: one unpack for recovery's fast path.
_V4_FIXED = struct.Struct(">iiiiiqqiq8sq8siqi")
_V4_BODY_AT = _V4_FIXED.size
_HOSTS_V6 = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6


def check_record(buf: Buffer, pos: int, limit: int, verify_crc: bool = True) -> int:
    """Validate the record at ``pos``; return its size, or 0 for a BLANK record."""
    if verify_crc and limit - pos >= _V4_BODY_AT and not isinstance(buf, memoryview):
        # Recovery's common case (IPv4 hosts, V1 topic) in one unpack, without copies.
        f = _V4_FIXED.unpack_from(buf, pos)
        size, body_len = f[0], f[14]
        if f[1] == MAGIC_V1 and not f[7] & _HOSTS_V6 and FIXED_SIZE_V4 <= size <= limit - pos:
            body_at = pos + _V4_BODY_AT
            topic_at = body_at + body_len + 1
            end = pos + size
            if body_len >= 0 and topic_at + 2 <= end:
                topic_len = buf[topic_at - 1]
                props_at = topic_at + topic_len + 2
                if props_at <= end and props_at + _U16.unpack_from(buf, props_at - 2)[0] == end:
                    if crc32(memoryview(buf)[body_at : topic_at - 1]) & 0x7FFFFFFF != f[2]:
                        raise CorruptRecordError(f"body CRC mismatch at position {pos}")
                    return int(size)
        # Anything unusual (BLANK, V2, IPv6, a corrupt record) takes the full walk, which also
        # names what is wrong.
    parts = _parse(buf, pos, limit, verify_crc)
    return parts[0] if parts else 0


_QUEUE_AND_OFFSETS = struct.Struct(">i4xqq")  # QUEUEID, (FLAG), QUEUEOFFSET, PHYSICALOFFSET at byte 12


def unit_record_ok(buf: Buffer, pos: int, size: int, phys: int, queue_id: int,
                   queue_offset: int, topic: bytes) -> bool:
    """``unit_mismatch``'s common case in one unpack: True when the ``size`` bytes at ``pos`` are
    a whole record of the common shape (IPv4 hosts, V1 topic) at CommitLog offset ``phys`` of
    that queue, queue offset and topic. False says nothing more (another shape, or damage):
    ``unit_mismatch`` then walks the record. ``record_scan.unit_record_ok`` is this or its
    compiled twin."""
    if size < _V4_BODY_AT or pos < 0 or pos + size > len(buf):
        return False
    f = _V4_FIXED.unpack_from(buf, pos)
    body_len = f[14]
    topic_at = pos + _V4_BODY_AT + body_len + 1
    props_at = topic_at + len(topic) + 2
    end = pos + size
    return bool(
        f[0] == size and f[1] == MAGIC_V1 and not f[7] & _HOSTS_V6 and body_len >= 0
        and props_at <= end and buf[topic_at - 1] == len(topic)
        and props_at + _U16.unpack_from(buf, props_at - 2)[0] == end
        and f[3] == queue_id and f[5] == queue_offset and f[6] == phys
        and buf[topic_at : topic_at + len(topic)] == topic
        and crc32(memoryview(buf)[topic_at - 1 - body_len : topic_at - 1]) & 0x7FFFFFFF == f[2])


def unit_mismatch(buf: Buffer, pos: int, size: int, phys: int, queue_id: int, queue_offset: int,
                  topic: bytes) -> str | None:
    """Why the ``size`` bytes at ``pos`` are not the record a ConsumeQueue unit of ``topic``,
    ``queue_id`` at ``queue_offset`` points to (CommitLog offset ``phys``), or None if they are:
    a whole record (frame and BODYCRC) of exactly ``size`` bytes with that PHYSICALOFFSET, queue,
    queue offset and topic. What a damaged
    ConsumeQueue unit or a damaged record in a segment recovery did not re-verify would
    otherwise be served as a message (the store fuzzer found both)."""
    if unit_record_ok(buf, pos, size, phys, queue_id, queue_offset, topic):
        return None
    try:
        parts = _parse(buf, pos, pos + size, True)
    except CorruptRecordError as e:
        return str(e)
    if not parts:
        return f"a BLANK record at position {pos}"
    if parts[0] != size:
        return f"a {parts[0]}-byte record at position {pos}, the unit says {size}"
    qid, qoff, at = _QUEUE_AND_OFFSETS.unpack_from(buf, pos + 12)
    if qid != queue_id or qoff != queue_offset:
        return (f"the record at position {pos} is queue {qid} offset {qoff}, not {queue_id} "
                f"offset {queue_offset}")
    if at != phys:
        return f"the record at CommitLog offset {phys} says it is at {at}"
    topic_at, topic_len = parts[7], parts[8]
    if topic_len != len(topic) or bytes(buf[topic_at : topic_at + topic_len]) != topic:
        return f"the record at position {pos} is of another topic"
    return None


TEAR_UNIT = 512
"""The smallest block a disk or the page cache writes: a write cut short by a crash (a short
``pwrite`` after SIGKILL, pages or sectors never written before a power loss) leaves whole blocks
of zeros, each starting at a multiple of this from the start of the segment file."""


def torn_tail(buf: Buffer, pos: int, size: int) -> bool:
    """Whether the record at ``pos`` (``size`` bytes, its frame already found whole) is the last
    record of an interrupted write: its bytes end in zeros from a ``TEAR_UNIT`` boundary on, and
    those zeros cover part of its topic or properties. A record the store accepted never matches
    (it refuses a NUL there), and neither does one whose zeros are only its empty properties'
    length. Positions count from the start of the segment file (``buf`` maps it from offset 0);
    the caller asks only about the record just before where the written records stop."""
    end = pos + size
    if buf[end - 1]:
        return False  # the common case: properties end with \x02
    parts = _parse(buf, pos, end, False)
    if not parts:
        return False
    topic_at, topic_len, props_len = parts[7], parts[8], parts[10]
    last_content = end - 1 if props_len else topic_at + topic_len - 1
    if last_content < topic_at:
        return False  # no topic and no properties: nothing a tear could hide
    zeros_from = pos + len(bytes(buf[pos:end]).rstrip(b"\x00"))
    boundary = -(-zeros_from // TEAR_UNIT) * TEAR_UNIT
    return boundary <= last_content


def end_before_torn(buf: Buffer, stop: int, last_size: int) -> int:
    """Where a walk of whole records that stopped at ``stop`` (not at a BLANK) really ends:
    ``stop``, or the start of the record before it (``last_size`` bytes, 0 for none) when that
    one is ``torn_tail``. Recovery and the store readers share this rule."""
    if last_size and torn_tail(buf, stop - last_size, last_size):
        return stop - last_size
    return stop


def _host(buf: Buffer, at: int, v6: bool) -> tuple[bytes, int, int]:
    n = 16 if v6 else 4
    ip = bytes(buf[at : at + n])
    (port,) = _I32.unpack_from(buf, at + n)
    return ip, port, at + n + 4


def unpack_v4(buf: Buffer, pos: int, limit: int, verify_crc: bool = True
              ) -> tuple[tuple[Any, ...], bytes, str, str] | None:
    """The common record (IPv4 hosts, V1 topic) in one unpack, for readers that build their own
    objects (a pull reply is a run of these): ``(fields, body, topic, properties_text)`` where
    ``fields`` are fields 1-15 as ``_V4_FIXED`` unpacks them (TOTALSIZE ... BODYLENGTH, each host
    as 8 bytes: IPv4 then the big-endian port). None when the record has another shape or is
    damaged: ``decode_record``'s full walk then decodes it or names the fault."""
    if limit - pos < _V4_BODY_AT:
        return None
    f = _V4_FIXED.unpack_from(buf, pos)
    size, body_len = f[0], f[14]
    if f[1] != MAGIC_V1 or f[7] & _HOSTS_V6 or not FIXED_SIZE_V4 <= size <= limit - pos \
            or body_len < 0:
        return None
    body_at = pos + _V4_BODY_AT
    topic_at = body_at + body_len + 1
    end = pos + size
    if topic_at + 2 > end:
        return None
    topic_len = buf[topic_at - 1]
    props_at = topic_at + topic_len + 2
    if props_at > end or props_at + _U16.unpack_from(buf, props_at - 2)[0] != end:
        return None
    body = bytes(buf[body_at : topic_at - 1])
    topic_b = bytes(buf[topic_at : topic_at + topic_len])
    props_b = bytes(buf[props_at:end])
    if verify_crc and crc32(body) & 0x7FFFFFFF != f[2]:
        return None
    return f, body, topic_b.decode("utf-8", "replace"), props_b.decode("utf-8", "replace")


def decode_record(
    buf: Buffer, pos: int = 0, limit: int | None = None, verify_crc: bool = True
) -> MessageRecord | None:
    """Decode the record at ``pos``; None for a BLANK record. Raises CorruptRecordError."""
    lim = len(buf) if limit is None else limit
    fast = unpack_v4(buf, pos, lim, verify_crc)
    if fast is not None:
        f, body, topic, properties = fast
        born, store = f[9], f[11]
        return MessageRecord(
            f[0], MAGIC_V1, f[2], f[3], f[4], f[5], f[6], f[7], f[8], born[:4],
            _PORT.unpack_from(born, 4)[0], f[10], store[:4], _PORT.unpack_from(store, 4)[0],
            f[12], f[13], body, topic, properties,
        )
    parts = _parse(buf, pos, lim, verify_crc)
    if not parts:
        return None
    (size, born_at, store_ts_at, store_at, tail_at, body_at, body_len, topic_at, topic_len,
     props_at, props_len) = parts
    head = HEAD.unpack_from(buf, pos)
    sys_flag = head[7]
    born_ip, born_port, _ = _host(buf, born_at, bool(sys_flag & SYSFLAG_BORNHOST_V6))
    (store_ts,) = _I64.unpack_from(buf, store_ts_at)
    store_ip, store_port, _ = _host(buf, store_at, bool(sys_flag & SYSFLAG_STOREHOST_V6))
    (reconsume,) = _I32.unpack_from(buf, tail_at)
    (prepared,) = _I64.unpack_from(buf, tail_at + 4)
    return MessageRecord(
        total_size=size,
        magic=head[1],
        body_crc=head[2],
        queue_id=head[3],
        flag=head[4],
        queue_offset=head[5],
        commit_log_offset=head[6],
        sys_flag=sys_flag,
        born_timestamp=head[8],
        born_host=born_ip,
        born_port=born_port,
        store_timestamp=store_ts,
        store_host=store_ip,
        store_port=store_port,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        body=bytes(buf[body_at : body_at + body_len]),
        topic=bytes(buf[topic_at : topic_at + topic_len]).decode("utf-8", "replace"),
        properties_text=bytes(buf[props_at : props_at + props_len]).decode("utf-8", "replace"),
    )


def summarize_record(
    buf: Buffer, pos: int, limit: int, verify_crc: bool = False
) -> RecordSummary | None:
    """Read what dispatch needs from the record at ``pos``; None for BLANK. Raises CorruptRecordError."""
    parts = _parse(buf, pos, limit, verify_crc)
    if not parts:
        return None
    size, _, store_ts_at, _, _, _, _, topic_at, topic_len, props_at, props_len = parts
    head = HEAD.unpack_from(buf, pos)
    (store_ts,) = _I64.unpack_from(buf, store_ts_at)
    return RecordSummary(
        total_size=size,
        queue_id=head[3],
        queue_offset=head[5],
        commit_log_offset=head[6],
        sys_flag=head[7],
        store_timestamp=store_ts,
        topic=bytes(buf[topic_at : topic_at + topic_len]).decode("utf-8", "replace"),
        properties_text=bytes(buf[props_at : props_at + props_len]).decode("utf-8", "replace"),
    )


def read_store_timestamp(buf: Buffer, pos: int) -> int:
    """STORETIMESTAMP of the (already validated) record at ``pos``."""
    sys_flag = _I32.unpack_from(buf, pos + 36)[0]
    at = pos + HEAD_SIZE + host_len(bool(sys_flag & SYSFLAG_BORNHOST_V6))
    return int(_I64.unpack_from(buf, at)[0])


# Fields the dispatcher needs, read in one call from a record with IPv4 hosts:
# TOTALSIZE MAGIC [crc] QUEUEID [flag] QUEUEOFFSET PHYSICALOFFSET SYSFLAG [born ts, born host]
# STORETIMESTAMP [store host, reconsume, prepared] BODYLENGTH  -> 88 bytes
_DISPATCH_V4 = struct.Struct(">ii4xi4xqqi16xq20xi")
_V6_FLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6

DispatchTuple: TypeAlias = tuple[int, int, int, int, int, int, bytes, bytes]


def iter_dispatch(buf: bytes | mmap.mmap, pos: int, limit: int) -> Iterator[DispatchTuple]:
    """Yield ``(size, queue_id, queue_offset, commit_log_offset, sys_flag, store_timestamp,
    topic, properties)`` for each record from ``pos`` until ``limit``, a BLANK record or a record
    that does not parse (the caller tells them apart with ``check_head`` at the stop position).

    The fast path for the common shape (IPv4 hosts, V1 topic) reads the fixed part in one call and
    skips the body; other shapes go through the full parser. No CRC check: dispatch reads records
    this process wrote or recovery verified.
    """
    unpack = _DISPATCH_V4.unpack_from
    u16 = _U16.unpack_from
    while pos + 8 <= limit:
        size, magic, qid, qoff, phys, sys_flag, store_ts, body_len = unpack(buf, pos) if (
            pos + 88 <= limit) else (0, 0, 0, 0, 0, 0, 0, 0)
        if magic != MAGIC_V1 or sys_flag & _V6_FLAGS:
            try:
                s = summarize_record(buf, pos, limit)
            except CorruptRecordError:
                return
            if s is None:
                return
            yield (s.total_size, s.queue_id, s.queue_offset, s.commit_log_offset, s.sys_flag,
                   s.store_timestamp, s.topic.encode(), s.properties_text.encode())
            pos += s.total_size
            continue
        end = pos + size
        if size < FIXED_SIZE_V4 or end > limit or body_len < 0:
            return
        t = pos + 88 + body_len
        if t >= end:
            return
        topic_len = buf[t]
        p = t + 1 + topic_len
        if p + 2 > end:
            return
        (props_len,) = u16(buf, p)
        if p + 2 + props_len != end:
            return
        yield (size, qid, qoff, phys, sys_flag, store_ts, buf[t + 1 : p], buf[p + 2 : end])
        pos = end
