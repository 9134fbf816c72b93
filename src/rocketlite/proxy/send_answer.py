"""The bytes of a ``SendMessageResponse`` written without protobuf objects: the hot answer of the
native server's SendMessage batches (``producer.send_messages``). Filling a response with
``entries.add()`` and ``CopyFrom`` cost about as much as storing the message; this writes the
same bytes protobuf would (proto3 wire format: fields in number order, defaults left out), which
``tests/unit/proxy/test_send_answer.py`` checks against ``SerializeToString``.

    SendMessageResponse  1: Status status            2: repeated SendResultEntry entries
    SendResultEntry      1: Status status   2: string message_id   3: string transaction_id
                         4: int64 offset    5: string recall_handle
    Status               1: Code code (enum)          2: string message

A field is its key (``number << 3 | wire type``: 0 varint, 2 length-delimited) then a varint or
a varint length and the bytes; a negative int64 is its 64-bit two's complement (10 bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

_MASK64: Final = (1 << 64) - 1


class Encoded:
    """A response already serialized: what the native server sends (``SerializeToString``)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializeToString(self) -> bytes:  # protobuf's name: the server calls it
        return self.data


_SMALL: Final = [bytes((i,)) for i in range(0x80)]


def varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _SMALL[value]
    if 0 < value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    if 0 < value < 0x200000:
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14))
    value &= _MASK64
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(key: int, data: bytes) -> bytes:
    return _SMALL[key] + varint(len(data)) + data


def status(code: int, message: str) -> bytes:
    """A ``Status`` message's bytes."""
    out = b""
    if code:
        out += b"\x08" + varint(code)
    if message:
        out += _field(0x12, message.encode())
    return out


def entry(status_field: bytes, message_id: str, transaction_id: str, offset: int,
          recall_handle: str) -> bytes:
    """A ``SendResultEntry``'s bytes; ``status_field`` is its status already as field 1
    (``status_field(status(...))``), the same for every entry of an answer."""
    out = status_field
    if message_id:
        out += _field(0x12, message_id.encode())
    if transaction_id:
        out += _field(0x1A, transaction_id.encode())
    if offset:
        out += b"\x20" + varint(offset)
    if recall_handle:
        out += _field(0x2A, recall_handle.encode())
    return out


def status_field(status_bytes: bytes) -> bytes:
    """``status_bytes`` as field 1 of a response or an entry (present even when empty, as a set
    message field is)."""
    return _field(0x0A, status_bytes)


def response(status_bytes: bytes, entries: Sequence[bytes]) -> bytes:
    """A ``SendMessageResponse``'s bytes from its status and its entries' bytes."""
    return status_field(status_bytes) + b"".join([_field(0x12, e) for e in entries])


def plain_ok(ok_field: bytes, message_ids: Sequence[str], offsets: Sequence[int]) -> bytes:
    """``response(status, [entry(ok_field, id, "", offset, "") ...])`` where ``ok_field`` is
    ``status_field(status)``, inline: the answer of a send whose messages are neither
    transactions nor timed."""
    parts = [ok_field]
    small = _SMALL
    for mid, offset in zip(message_ids, offsets, strict=True):
        raw = mid.encode()
        n = len(raw)
        body = b"".join((ok_field, b"\x12" if n else b"", small[n] if n < 0x80 else varint(n),
                         raw)) if n else ok_field
        if offset:
            body += b"\x20" + varint(offset)
        n = len(body)
        parts.append(b"\x12" + small[n] if n < 0x80 else b"\x12" + varint(n))
        parts.append(body)
    return b"".join(parts)
