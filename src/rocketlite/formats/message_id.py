"""The offset message id: store host + port + CommitLog offset, upper-case hex.

=========  ==========  =======================================
field      bytes       notes
=========  ==========  =======================================
IP         4 or 16     the store host
PORT       4           big-endian int
OFFSET     8           big-endian CommitLog physical offset
=========  ==========  =======================================

16 bytes (32 hex digits) for IPv4, 28 bytes (56 hex digits) for IPv6 (``MessageDecoder.createMessageId``).
"""

from __future__ import annotations

import struct

from rocketlite.common.errors import FormatError

_PORT_OFFSET = struct.Struct(">iq")
ID_SIZE_V4 = 16
ID_SIZE_V6 = 28


def encode_message_id(store_host: bytes, store_port: int, commit_log_offset: int) -> str:
    return (store_host + _PORT_OFFSET.pack(store_port, commit_log_offset)).hex().upper()


def decode_message_id(msg_id: str) -> tuple[bytes, int, int]:
    """Return (store host IP bytes, port, CommitLog offset). Raises FormatError."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as e:
        raise FormatError(f"message id {msg_id!r} is not hex") from e
    if len(raw) not in (ID_SIZE_V4, ID_SIZE_V6):
        raise FormatError(f"message id {msg_id!r} has {len(raw)} bytes, expected 16 or 28")
    ip = raw[:-12]
    port, offset = _PORT_OFFSET.unpack_from(raw, len(ip))
    return ip, port, offset
