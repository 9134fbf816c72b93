"""The ConsumeQueue unit: 20 bytes per message of a (topic, queue).

======  ==================  =====  ==========================================
offset  field               bytes  notes
======  ==================  =====  ==========================================
0       commitLogOffset     8      physical offset of the record
8       size                4      TOTALSIZE of the record
12      tagsCode            8      Java ``tags.hashCode()`` sign-extended (0: no tags);
                                   for delay topics, the delivery time in ms
======  ==================  =====  ==========================================

Logical offset N lives at byte N*20; a file holds 300,000 units (6,000,000 bytes) and is named by the
20-digit byte offset of its first unit. A unit whose offset is negative or size is not positive marks
the end of written data.
"""

from __future__ import annotations

import functools
import struct

CQ_UNIT = struct.Struct(">qiq")
CQ_UNIT_SIZE = 20
CQ_UNITS_PER_FILE = 300_000


def encode_cq_unit(commit_log_offset: int, size: int, tags_code: int) -> bytes:
    return CQ_UNIT.pack(commit_log_offset, size, tags_code)


def decode_cq_unit(buf: bytes | memoryview, pos: int = 0) -> tuple[int, int, int]:
    """Return (commitLogOffset, size, tagsCode)."""
    off, size, tag = CQ_UNIT.unpack_from(buf, pos)
    return int(off), int(size), int(tag)


def is_valid_unit(commit_log_offset: int, size: int) -> bool:
    return commit_log_offset >= 0 and size > 0


@functools.lru_cache(maxsize=1024)
def units_struct(count: int) -> struct.Struct:
    """A Struct packing ``count`` consecutive units in one call."""
    return struct.Struct(">" + "qiq" * count)
