"""The body of SEND_BATCH_MESSAGE (320, and 10/310 with ``batch``/``m`` true): messages back to back,
each as ``MessageDecoder.encodeMessage`` writes it (big-endian):

=====  ==============  ======  ==============================================================
#      field           size    content
=====  ==============  ======  ==============================================================
1      TOTALSIZE       4       int32, the whole entry: 20 + bodyLen + 2 + propertiesLen
2      MAGICCODE       4       int32, 0 from the clients (ignored)
3      BODYCRC         4       int32, 0 from the clients (ignored; the broker computes it)
4      FLAG            4       int32, the message's flag
5      BODYLEN         4       int32
6      BODY            n       bodyLen bytes
7      PROPERTIESLEN   2       int16 (signed, as Java reads it)
8      PROPERTIES      n       the property string, UTF-8 (``formats.properties``)
=====  ==============  ======  ==============================================================

The Java broker (``MessageExtEncoder.encode(MessageExtBatch)``) walks entries by BODYLEN and
PROPERTIESLEN and ignores TOTALSIZE; :func:`decode_batch` also requires TOTALSIZE to match them (the
Java and C++ clients always write it so), which catches a misframed body at its first entry.

:func:`message_ids` writes the reply's ``msgId``: the ids of a batch's messages, comma-separated.
Both have a compiled twin (``_message_batch_c``, bound unless ``ROCKETLITE_PURE``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from itertools import chain, repeat

from rocketlite.common import native
from rocketlite.common.errors import BodyError
from rocketlite.formats.properties import encode_properties

ENTRY_HEAD = struct.Struct(">iiiii")
"""TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN (20 bytes)."""
PROPERTIES_LEN = struct.Struct(">h")
"""PROPERTIESLEN (2 bytes)."""
ENTRY_OVERHEAD = ENTRY_HEAD.size + PROPERTIES_LEN.size  # 22: an entry with empty body and properties
MAX_PROPERTIES_LEN = 32767  # Java writes the length as a short

__all__ = [
    "ENTRY_HEAD",
    "ENTRY_OVERHEAD",
    "MAX_PROPERTIES_LEN",
    "PROPERTIES_LEN",
    "decode_batch",
    "encode_batch",
    "encode_message",
    "message_ids",
]


def _decode_batch_py(
    body: bytes, *, max_count: int | None = None
) -> tuple[list[bytes], list[bytes], list[int]]:
    """Split a batch body into columns ``(bodies, properties, flags)``, one entry per message.

    ``properties`` are the encoded property strings as bytes (what ``store.message.MessageBatch``
    takes). An empty body gives empty columns. Raises BodyError for a truncated entry, a length that
    overruns the body, a TOTALSIZE that disagrees with the lengths, or more than ``max_count``
    messages.
    """
    uniform = _decode_uniform(body, max_count)
    if uniform is not None:
        return uniform
    bodies: list[bytes] = []
    props: list[bytes] = []
    flags: list[int] = []
    add_body, add_props, add_flag = bodies.append, props.append, flags.append
    head = ENTRY_HEAD.unpack_from
    plen_of = PROPERTIES_LEN.unpack_from
    end = len(body)
    pos = 0
    while pos < end:
        if end - pos < ENTRY_OVERHEAD:
            raise _entry_error(len(bodies), pos, end)
        total, _magic, _crc, flag, blen = head(body, pos)
        b_end = pos + 20 + blen
        if blen < 0 or b_end + 2 > end:
            raise _entry_error(len(bodies), pos, end, blen)
        plen = plen_of(body, b_end)[0]
        p_end = b_end + 2 + plen
        if plen < 0 or p_end > end or total != p_end - pos:
            raise _entry_error(len(bodies), pos, end, blen, plen, total)
        add_body(body[pos + 20 : b_end])
        add_props(body[b_end + 2 : p_end])
        add_flag(flag)
        pos = p_end
    if max_count is not None and len(bodies) > max_count:
        raise BodyError(f"batch has {len(bodies)} messages, the limit is {max_count}")
    return bodies, props, flags


def _entry_error(i: int, pos: int, end: int, blen: int | None = None, plen: int | None = None,
                 total: int = 0) -> BodyError:
    """What is wrong with entry ``i`` at ``pos`` of an ``end``-byte batch: fewer than
    ENTRY_OVERHEAD bytes left (``blen`` None), a body that overruns (``plen`` None), else
    properties that overrun or a TOTALSIZE that disagrees (both twins raise it)."""
    where = f"batch entry {i} at offset {pos}: "
    if blen is None:
        return BodyError(f"{where}{end - pos} bytes left, an entry needs at least {ENTRY_OVERHEAD}")
    if plen is None:
        return BodyError(f"{where}body length {blen} overruns the {end}-byte batch")
    size = ENTRY_OVERHEAD + blen + plen
    if plen >= 0 and pos + size <= end:
        return BodyError(f"{where}TOTALSIZE {total} but body and properties make {size}")
    return BodyError(f"{where}properties length {plen} overruns the {end}-byte batch")


_UNIFORM_STRUCTS: dict[tuple[int, int], struct.Struct] = {}


def _decode_uniform(
    body: bytes, max_count: int | None
) -> tuple[list[bytes], list[bytes], list[int]] | None:
    """The columns of a batch whose entries all have the first entry's body and properties
    lengths (the usual batch), unpacked in one C-level pass with one Struct; None when the batch
    is not like that (``decode_batch`` then walks it entry by entry, and says what is wrong)."""
    end = len(body)
    if end < ENTRY_OVERHEAD:
        return None
    total, _magic, _crc, _flag, blen = ENTRY_HEAD.unpack_from(body, 0)
    if blen < 0 or ENTRY_OVERHEAD + blen > end or total <= 0 or end % total:
        return None
    (plen,) = PROPERTIES_LEN.unpack_from(body, ENTRY_HEAD.size + blen)
    if plen < 0 or total != ENTRY_OVERHEAD + blen + plen:
        return None
    n = end // total
    if max_count is not None and n > max_count:
        return None
    key = (blen, plen)
    entry = _UNIFORM_STRUCTS.get(key)
    if entry is None:
        entry = struct.Struct(f">iiiii{blen}sh{plen}s")
        if len(_UNIFORM_STRUCTS) < 1024:
            _UNIFORM_STRUCTS[key] = entry
    totals, _magics, _crcs, flags, blens, bodies, plens, props = zip(
        *entry.iter_unpack(body), strict=True)
    if totals.count(total) != n or blens.count(blen) != n or plens.count(plen) != n:
        return None
    return list(bodies), list(props), list(flags)


_IDS_STRUCTS: dict[tuple[int, int], struct.Struct] = {}
_CACHED_IDS = 1024  # batches up to this many messages keep their ids Struct


def _message_ids_py(id_head: bytes, commit_log_offsets: Sequence[int]) -> str:
    """The comma-separated message ids (``id_head``, the store's host and port, then each
    CommitLog offset as a big-endian int64; upper-case hex) of a batch reply: every id packed by
    one Struct, then one ``hex`` with a separator every id (C-level passes, no per-id
    formatting)."""
    n = len(commit_log_offsets)
    if n == 0:
        return ""
    key = (len(id_head), n)
    ids = _IDS_STRUCTS.get(key)
    if ids is None:
        ids = struct.Struct(">" + f"{len(id_head)}sq" * n)
        if n <= _CACHED_IDS:
            _IDS_STRUCTS[key] = ids
    packed = ids.pack(*chain.from_iterable(zip(repeat(id_head, n), commit_log_offsets,
                                               strict=True)))
    return packed.hex(",", len(id_head) + 8).upper()


decode_batch: Callable[..., tuple[list[bytes], list[bytes], list[int]]] = _decode_batch_py
message_ids: Callable[[bytes, Sequence[int]], str] = _message_ids_py
_c = native.load("rocketlite.protocol._message_batch_c")
if _c is not None:
    decode_batch = _c.decode_batch
    message_ids = _c.message_ids


def encode_message(body: bytes, properties: bytes | str | Mapping[str, str] = b"", flag: int = 0) -> bytes:
    """One entry, as ``MessageDecoder.encodeMessage`` writes it (MAGICCODE and BODYCRC 0)."""
    if isinstance(properties, Mapping):
        properties = encode_properties(properties)
    if isinstance(properties, str):
        properties = properties.encode("utf-8")
    if len(properties) > MAX_PROPERTIES_LEN:
        raise BodyError(f"properties are {len(properties)} bytes, the limit is {MAX_PROPERTIES_LEN}")
    total = ENTRY_OVERHEAD + len(body) + len(properties)
    if total > 0x7FFFFFFF:
        raise BodyError(f"message of {total} bytes does not fit an int32 TOTALSIZE")
    return b"".join(
        (
            ENTRY_HEAD.pack(total, 0, 0, flag, len(body)),
            body,
            PROPERTIES_LEN.pack(len(properties)),
            properties,
        )
    )


def encode_batch(
    bodies: Sequence[bytes],
    properties: Sequence[bytes | str | Mapping[str, str]] | None = None,
    flags: Sequence[int] | None = None,
) -> bytes:
    """A batch body (``MessageDecoder.encodeMessages``) from columns: one properties entry (encoded
    bytes or str, or a mapping) and one flag per body; None means empty properties / flag 0."""
    n = len(bodies)
    if (properties is not None and len(properties) != n) or (flags is not None and len(flags) != n):
        raise BodyError(
            f"a batch needs one properties entry and flag per body: {n} bodies, "
            f"{'no' if properties is None else len(properties)} properties, "
            f"{'no' if flags is None else len(flags)} flags"
        )
    return b"".join(
        encode_message(
            bodies[i],
            b"" if properties is None else properties[i],
            0 if flags is None else flags[i],
        )
        for i in range(n)
    )
