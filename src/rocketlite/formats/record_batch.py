"""Encoding a batch of records of one topic and queue in one call (``encode_batch``), for
``CommitLog.append_batch``: the per-record work (BODYCRC, lengths, queue and CommitLog offsets)
without a ``Struct.pack`` per record. The layout is ``message_record``'s (``batch_struct``); the
pure function here is the reference, and ``_record_c.encode_batch`` its compiled twin with the
same signature and the same bytes (``tests/unit/native/test_record_twin.py``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat
from operator import and_, attrgetter

from rocketlite.common import native
from rocketlite.formats import message_record as rec

_size = attrgetter("size")


def _encode_batch_py(bodies: Sequence[bytes], props: Sequence[bytes], flags: Sequence[int] | None,
                     lo: int, hi: int, queue_id: int, queue_offset: int, offset: int, mid: bytes,
                     magic: bytes, topic_block: bytes) -> bytes:
    """Records ``lo`` to ``hi`` (excluded) of a batch, back to back: record ``i`` takes queue
    offset ``queue_offset + i - lo`` and starts at CommitLog ``offset`` plus the sizes before it.
    ``mid`` is fields 8-14 (``batch_mid``), ``magic`` the 4-byte magic code, ``topic_block``
    field 16 (``topic_block``); ``flags`` None means 0 for every record."""
    k = hi - lo
    bs, ps = bodies[lo:hi], props[lo:hi]
    blens = list(map(len, bs))
    plens = list(map(len, ps))
    if k and blens.count(blens[0]) == k and plens.count(plens[0]) == k:  # one shape: one Struct
        structs = [rec.batch_struct(len(mid), blens[0], len(topic_block), plens[0])] * k
    else:
        structs = list(map(rec.batch_struct, repeat(len(mid), k), blens,
                           repeat(len(topic_block), k), plens))
    sizes = list(map(_size, structs))
    return b"".join(map(
        struct.Struct.pack, structs, sizes, repeat(magic, k),
        map(and_, map(rec.crc32, bs), repeat(0x7FFFFFFF)), repeat(queue_id, k),
        repeat(0, k) if flags is None else flags[lo:hi], range(queue_offset, queue_offset + k),
        accumulate(sizes, initial=offset), repeat(mid, k), blens, bs, repeat(topic_block, k),
        plens, ps,
    ))


encode_batch: Callable[..., bytes] = _encode_batch_py
_c = native.load("rocketlite.formats._record_c")
if _c is not None:
    encode_batch = _c.encode_batch
