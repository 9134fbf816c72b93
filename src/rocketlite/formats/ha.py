"""The 4.x master/slave replication (HA) wire format: two frames on a plain TCP connection from
the slave to the master's ``haListenPort`` (Java's ``HAConnection``/``HAService.HAClient``).

The slave's report, slave → master, at connect, after each applied transfer and every
``haSendHeartbeatInterval``:

======  ==================  =====  ==========================================
offset  field               bytes  notes
======  ==================  =====  ==========================================
0       maxPhyOffset        8      big-endian; the slave's CommitLog max offset
======  ==================  =====  ==========================================

The master's transfer, master → slave:

======  ==================  =====  ==========================================
offset  field               bytes  notes
======  ==================  =====  ==========================================
0       phyOffset           8      big-endian; CommitLog offset of the body
8       bodySize            4      big-endian; 0 = a heartbeat
12      body                n      raw CommitLog bytes, never across a segment
======  ==================  =====  ==========================================

A body is CommitLog bytes as they are on the master's disk, cut wherever the batch size or the
segment's end falls (records may be split between frames).
"""

from __future__ import annotations

import struct

from rocketlite.common.errors import FormatError

REPORT = struct.Struct(">q")
REPORT_SIZE = 8
TRANSFER_HEADER = struct.Struct(">qi")
TRANSFER_HEADER_SIZE = 12


def encode_report(max_offset: int) -> bytes:
    return REPORT.pack(max_offset)


def decode_report(buf: bytes | bytearray | memoryview) -> int:
    """The offset of an 8-byte report; ``FormatError`` if negative."""
    (offset,) = REPORT.unpack(buf)
    if offset < 0:
        raise FormatError(f"HA report with a negative offset {offset}")
    return int(offset)


def encode_transfer_header(phy_offset: int, size: int) -> bytes:
    return TRANSFER_HEADER.pack(phy_offset, size)


def decode_transfer_header(buf: bytes | bytearray | memoryview, max_body: int) -> tuple[int, int]:
    """``(phyOffset, bodySize)`` of a 12-byte header; ``FormatError`` for a negative offset or
    a size outside ``0..max_body``."""
    phy, size = TRANSFER_HEADER.unpack(buf)
    if phy < 0:
        raise FormatError(f"HA transfer at a negative offset {phy}")
    if not 0 <= size <= max_body:
        raise FormatError(f"HA transfer of {size} bytes: expected 0..{max_body}")
    return int(phy), int(size)
