"""The HTTP/2 frame codec (RFC 9113 section 4) and gRPC's message framing, for the native gRPC
server (``connection``): pure functions on bytes, no I/O.

A frame (every integer big-endian)::

    offset  size  field
    0       3     length       payload length (at most the receiver's SETTINGS_MAX_FRAME_SIZE)
    3       1     type         DATA 0, HEADERS 1, PRIORITY 2, RST_STREAM 3, SETTINGS 4,
                               PUSH_PROMISE 5, PING 6, GOAWAY 7, WINDOW_UPDATE 8, CONTINUATION 9
    4       1     flags        END_STREAM 0x1 (ACK 0x1 on SETTINGS/PING), END_HEADERS 0x4,
                               PADDED 0x8, PRIORITY 0x20
    5       4     stream id    the top bit is reserved (ignored on read, 0 on write)
    9       len   payload

A gRPC message inside a stream's DATA payloads (the "Length-Prefixed-Message")::

    offset  size  field
    0       1     compressed   0: as is, 1: compressed with grpc-encoding (refused here)
    1       4     length       message length
    5       len   message      the protobuf bytes

``split_frames`` and ``split_messages`` have a compiled twin (``_frames_c``, bound here when
built); the encoders are a few ``struct`` packs.
"""

from __future__ import annotations

import struct
from typing import Final

from rocketlite.common import native

FRAME_HEADER: Final = struct.Struct(">I B I")  # read as (length << 8 | type), flags, stream id
FRAME_HEADER_SIZE: Final = 9
MESSAGE_PREFIX: Final = struct.Struct(">BI")
MESSAGE_PREFIX_SIZE: Final = 5
PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
END_STREAM: Final = 0x1
ACK: Final = 0x1
END_HEADERS: Final = 0x4
PADDED: Final = 0x8
PRIORITY_FLAG: Final = 0x20

# SETTINGS identifiers (RFC 9113 6.5.2)
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, \
    MAX_HEADER_LIST_SIZE = range(1, 7)
DEFAULT_MAX_FRAME_SIZE: Final = 16_384
MAX_ALLOWED_FRAME_SIZE: Final = (1 << 24) - 1
DEFAULT_WINDOW: Final = 65_535
MAX_WINDOW: Final = (1 << 31) - 1

# error codes (RFC 9113 7)
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED, \
    FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, \
    ENHANCE_YOUR_CALM, INADEQUATE_SECURITY, HTTP_1_1_REQUIRED = range(14)

Frame = tuple[int, int, int, bytes]
"""(type, flags, stream id, payload) of one whole frame."""


def _split_frames_py(buf: bytes | bytearray, max_size: int) -> tuple[list[Frame], int, int]:
    """The whole frames at the start of ``buf``: ``(frames, bytes used, oversize)``. ``oversize``
    is 0, or the length a frame declares beyond ``max_size`` (the split stops before it: the
    connection ends with FRAME_SIZE_ERROR)."""
    frames: list[Frame] = []
    pos, end = 0, len(buf)
    while end - pos >= FRAME_HEADER_SIZE:
        lt, flags, sid = FRAME_HEADER.unpack_from(buf, pos)
        length = lt >> 8
        if length > max_size:
            return frames, pos, length
        stop = pos + FRAME_HEADER_SIZE + length
        if stop > end:
            break
        frames.append((lt & 0xFF, flags, sid & 0x7FFFFFFF, bytes(buf[pos + FRAME_HEADER_SIZE:stop])))
        pos = stop
    return frames, pos, 0


def _split_messages_py(buf: bytes | bytearray, max_size: int) -> tuple[list[bytes], int, int]:
    """The whole gRPC messages at the start of ``buf``: ``(messages, bytes used, refused)``.
    ``refused`` is 0, -1 for a compressed message (no grpc-encoding is accepted), or the length a
    message declares beyond ``max_size``; the split stops before it."""
    out: list[bytes] = []
    pos, end = 0, len(buf)
    while end - pos >= MESSAGE_PREFIX_SIZE:
        compressed, length = MESSAGE_PREFIX.unpack_from(buf, pos)
        if compressed:
            return out, pos, -1
        if length > max_size:
            return out, pos, length
        stop = pos + MESSAGE_PREFIX_SIZE + length
        if stop > end:
            break
        out.append(bytes(buf[pos + MESSAGE_PREFIX_SIZE:stop]))
        pos = stop
    return out, pos, 0


def frame(ftype: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return FRAME_HEADER.pack(len(payload) << 8 | ftype, flags, sid) + payload


def frame_header(length: int, ftype: int, flags: int, sid: int) -> bytes:
    return FRAME_HEADER.pack(length << 8 | ftype, flags, sid)


def message(payload: bytes) -> bytes:
    """One uncompressed gRPC message with its 5-byte prefix."""
    return MESSAGE_PREFIX.pack(0, len(payload)) + payload


def settings(values: dict[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in values.items()))


SETTINGS_ACK: Final = frame(SETTINGS, ACK, 0)


def parse_settings(payload: bytes) -> list[tuple[int, int]]:
    """The (identifier, value) pairs of a SETTINGS payload (its length a multiple of 6)."""
    return [struct.unpack_from(">HI", payload, i) for i in range(0, len(payload), 6)]


def window_update(sid: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", increment))


def rst_stream(sid: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, sid, struct.pack(">I", code))


def goaway(last_sid: int, code: int, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, struct.pack(">II", last_sid, code) + debug)


def ping_ack(payload: bytes) -> bytes:
    return frame(PING, ACK, 0, payload)


_c = native.load("rocketlite.proxy.h2._frames_c")
split_frames = _c.split_frames if _c is not None else _split_frames_py
split_messages = _c.split_messages if _c is not None else _split_messages_py
