"""The IndexFile layout: header, hash slots, chained entries.

Header, 40 bytes (``IndexHeader.java``):

======  ================  =====
offset  field             bytes
======  ================  =====
0       beginTimestamp    8
8       endTimestamp      8
16      beginPhyOffset    8
24      endPhyOffset      8
32      hashSlotCount     4
36      indexCount        4     starts at 1: entry 0 is never used, so 0 means "empty" in a slot
======  ================  =====

Then ``hashSlotNum`` slots of 4 bytes (the number of the newest entry whose key hashes there), then
``indexNum`` entries of 20 bytes:

======  ================  =====  ============================================
offset  field             bytes  notes
======  ================  =====  ============================================
0       keyHash           4      abs(Java hashCode of "topic#key"), MIN_VALUE -> 0
4       phyOffset         8      CommitLog offset of the message
12      timeDiff          4      seconds since beginTimestamp
16      prevIndex         4      previous entry in this slot's chain (0: none)
======  ================  =====  ============================================

File size = 40 + slots*4 + entries*20 (420,000,040 bytes with the defaults 5,000,000 / 20,000,000);
the file is named by its creation time ``yyyyMMddHHmmssSSS``.
"""

from __future__ import annotations

import struct

INDEX_HEADER = struct.Struct(">qqqqii")
INDEX_HEADER_SIZE = 40
INDEX_SLOT = struct.Struct(">i")
INDEX_SLOT_SIZE = 4
INDEX_ENTRY = struct.Struct(">iqii")
INDEX_ENTRY_SIZE = 20
DEFAULT_HASH_SLOT_NUM = 5_000_000
DEFAULT_INDEX_NUM = 20_000_000


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


def slot_position(key_hash: int, hash_slot_num: int) -> int:
    return INDEX_HEADER_SIZE + (key_hash % hash_slot_num) * INDEX_SLOT_SIZE


def entry_position(index_no: int, hash_slot_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index_no * INDEX_ENTRY_SIZE
