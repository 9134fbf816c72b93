"""Encoding a batch of records of one topic and queue in one call (``encode_batch``), for
``CommitLog.append_batch``: the per-record work (BODYCRC, lengths, queue and CommitLog offsets)
without a ``Struct.pack`` per record. The layout is ``message_record``'s (``batch_struct``); the
pure function here is the reference, and ``_record_c.encode_batch`` its compiled twin with the
same signature and the same bytes (``tests/unit/native/test_record_twin.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rocketlite.common import native
from rocketlite.formats import message_record as rec


def _encode_batch_py(bodies: Sequence[bytes], props: Sequence[bytes], flags: Sequence[int] | None,
                     lo: int, hi: int, queue_id: int, queue_offset: int, offset: int, mid: bytes,
                     magic: bytes, topic_block: bytes) -> bytes:
    """Records ``lo`` to ``hi`` (excluded) of a batch, back to back: record ``i`` takes queue
    offset ``queue_offset + i - lo`` and starts at CommitLog ``offset`` plus the sizes before it.
    ``mid`` is fields 8-14 (``batch_mid``), ``magic`` the 4-byte magic code, ``topic_block``
    field 16 (``topic_block``); ``flags`` None means 0 for every record."""
    out = []
    for i in range(lo, hi):
        body, p = bodies[i], props[i]
        st = rec.batch_struct(len(mid), len(body), len(topic_block), len(p))
        out.append(st.pack(
            st.size, magic, rec.crc32(body) & 0x7FFFFFFF, queue_id,
            0 if flags is None else flags[i], queue_offset + i - lo, offset, mid, len(body), body,
            topic_block, len(p), p,
        ))
        offset += st.size
    return b"".join(out)


encode_batch: Callable[..., bytes] = _encode_batch_py
_c = native.load("rocketlite.formats._record_c")
if _c is not None:
    encode_batch = _c.encode_batch
