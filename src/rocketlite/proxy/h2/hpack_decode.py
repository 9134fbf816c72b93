"""``HeaderDecoder``: HPACK decoding (RFC 7541) of a connection's request header blocks, with the
fields that do not touch the dynamic table cached by their encoded bytes.

The 5.x clients send ~17 fields a call, most of them as literals without indexing that repeat
call after call (the client id, language, version, the user agent...) beside one or two that
change (``x-mq-request-id``, ``x-mq-date-time``, the signature): the ``hpack`` library's decoder
spent ~150 us on such a block, re-decoding each literal's Huffman string. Here each
representation is walked (RFC 7541 section 6), and a literal without indexing / never indexed
whose name is literal or in the static table is looked up by its bytes first.

Representations (the first octet's high bits)::

    1xxxxxxx  indexed field          7-bit index (static 1..61, then the dynamic table)
    01xxxxxx  literal, indexed       6-bit name index (0: a literal name), value; the field is
                                     added to the dynamic table
    001xxxxx  table size update      5-bit new maximum (at most SETTINGS_HEADER_TABLE_SIZE)
    0000xxxx  literal, not indexed   4-bit name index (0: a literal name), value
    0001xxxx  literal, never indexed as above

A string is ``H`` (1: Huffman) and a 7-bit-prefix length, then its octets. The static table and the
Huffman code are the ``hpack`` library's. Errors raise ``HPACKError`` (the connection answers
COMPRESSION_ERROR).

``scan`` (with a compiled twin, ``_hpack_c``) walks the common representations (indexed fields,
cached literals) in one call and stops at the first it cannot answer alone (a literal to decode
or to index, a table size update, a bad index), which ``HeaderDecoder`` handles before scanning
on."""

from __future__ import annotations

from collections import deque
from typing import Final

from hpack.huffman_table import decode_huffman
from hpack.table import HeaderTable

from rocketlite.common import native

STATIC: Final = tuple((n.decode(), v.decode()) for n, v in HeaderTable.STATIC_TABLE)
STATIC_LEN: Final = len(STATIC)  # 61
DEFAULT_TABLE_SIZE: Final = 4_096
FIELD_CACHE: Final = 1_024  # cached literal fields per connection
ENTRY_OVERHEAD: Final = 32  # RFC 7541 4.1

Field = tuple[str, str]


class HPACKError(Exception):
    pass


def _scan_py(data: bytes, pos: int, cache: dict[bytes, Field], static: tuple[Field, ...],
             table: deque[tuple[Field, int]]) -> tuple[list[Field], int, int]:
    """From ``pos``: the fields of the indexed representations and of the not-indexed literals
    found in ``cache`` (by their bytes), up to the first other representation or the end;
    ``(fields, their list size, where it stopped)``."""
    out: list[Field] = []
    size = 0
    end = len(data)
    n_static = len(static)
    while pos < end:
        b = data[pos]
        if b & 0x80:
            if b == 0xFF:
                return out, size, pos
            index = b & 0x7F
            if 0 < index <= n_static:
                field = static[index - 1]
            elif n_static < index <= n_static + len(table):
                field = table[index - n_static - 1][0]
            else:
                return out, size, pos
            pos += 1
        elif b & 0xE0:
            return out, size, pos
        else:  # a literal not indexed: looked up by its bytes (one-octet lengths only)
            stop = pos + 1
            name_index = b & 0x0F
            if name_index == 0x0F or stop >= end:
                return out, size, pos
            if name_index == 0:
                n = data[stop] & 0x7F
                stop += 1 + n
                if n == 0x7F or stop >= end:
                    return out, size, pos
            n = data[stop] & 0x7F
            stop += 1 + n
            if n == 0x7F or stop > end:
                return out, size, pos
            hit = cache.get(data[pos:stop])
            if hit is None:
                return out, size, pos
            field = hit
            pos = stop
        out.append(field)
        size += len(field[0]) + len(field[1]) + ENTRY_OVERHEAD
    return out, size, pos


_c = native.load("rocketlite.proxy.h2._hpack_c")
scan = _c.scan if _c is not None else _scan_py


class HeaderDecoder:
    """One connection's decoding context (its dynamic table and caches)."""

    __slots__ = ("_added", "_blocks", "_cache", "_max_table", "_size", "_table", "table_limit")

    def __init__(self, table_limit: int = DEFAULT_TABLE_SIZE) -> None:
        self.table_limit = table_limit  # the SETTINGS_HEADER_TABLE_SIZE we announced
        self._max_table = table_limit
        self._table: deque[tuple[Field, int]] = deque()  # newest first, with its size
        self._size = 0
        self._added = False  # the last block changed the table
        self._cache: dict[bytes, Field] = {}
        # whole blocks that left the table as it was, valid until the table changes
        self._blocks: dict[bytes, tuple[list[Field], int]] = {}

    def decode(self, data: bytes) -> tuple[list[Field], int]:
        """The fields of a header block and its list size (RFC 9113 6.5.2: name and value
        plus 32 a field, counted in characters). The list may be a cached one: not to be
        changed."""
        hit = self._blocks.get(data)
        if hit is not None:
            return hit
        self._added = False
        out, size = self._decode(data)
        if not self._added:
            if len(self._blocks) >= FIELD_CACHE:
                self._blocks.clear()
            self._blocks[data] = out, size
        else:
            self._blocks.clear()
        return out, size

    def _decode(self, data: bytes) -> tuple[list[Field], int]:
        out: list[Field] = []
        size = 0
        pos, end = 0, len(data)
        cache, table = self._cache, self._table
        while True:
            fields, n, pos = scan(data, pos, cache, STATIC, table)
            out += fields
            size += n
            if pos >= end:
                return out, size
            b = data[pos]
            if b & 0x80:
                index, pos = _integer(data, pos, 7)
                field = self._field(index)
            elif b & 0x40:
                field, pos = self._literal(data, pos, 6)
                self._add(field)
                self._added = True
            elif b & 0x20:
                limit, pos = _integer(data, pos, 5)
                if limit > self.table_limit:
                    raise HPACKError(f"a table size update to {limit} (at most "
                                     f"{self.table_limit})")
                self._max_table = limit
                self._evict(0)
                self._added = True
                continue
            else:
                start = pos
                name_index, _ = _integer(data, pos, 4)
                field, pos = self._literal(data, pos, 4)
                if name_index <= STATIC_LEN:  # the same bytes always mean this field
                    if len(cache) >= FIELD_CACHE:
                        cache.clear()
                    cache[data[start:pos]] = field
            out.append(field)
            size += len(field[0]) + len(field[1]) + ENTRY_OVERHEAD

    def _field(self, index: int) -> Field:
        if 0 < index <= STATIC_LEN:
            return STATIC[index - 1]
        i = index - STATIC_LEN - 1
        if index == 0 or i >= len(self._table):
            raise HPACKError(f"no header table entry {index}")
        return self._table[i][0]

    def _literal(self, data: bytes, pos: int, prefix: int) -> tuple[Field, int]:
        index, pos = _integer(data, pos, prefix)
        if index:
            name = self._field(index)[0]
        else:
            name, pos = _string(data, pos)
        value, pos = _string(data, pos)
        return (name, value), pos

    def _add(self, field: Field) -> None:
        entry = len(field[0].encode()) + len(field[1].encode()) + ENTRY_OVERHEAD
        if entry > self._max_table:
            self._table.clear()
            self._size = 0
            return
        self._evict(entry)
        self._table.appendleft((field, entry))
        self._size += entry

    def _evict(self, room: int) -> None:
        while self._table and self._size + room > self._max_table:
            self._size -= self._table.pop()[1]


def _integer(data: bytes, pos: int, prefix: int) -> tuple[int, int]:
    """An HPACK integer (RFC 7541 5.1) at ``pos``: (value, position after it)."""
    if pos >= len(data):
        raise HPACKError("the header block ends inside a representation")
    mask = (1 << prefix) - 1
    value = data[pos] & mask
    pos += 1
    if value < mask:
        return value, pos
    shift = 0
    while pos < len(data):
        b = data[pos]
        pos += 1
        value += (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise HPACKError("an integer over 2^28")
    raise HPACKError("the header block ends inside a representation")


def _string(data: bytes, pos: int) -> tuple[str, int]:
    huffman = pos < len(data) and data[pos] & 0x80
    length, pos = _integer(data, pos, 7)
    stop = pos + length
    if stop > len(data):
        raise HPACKError("a string runs past the header block")
    raw = data[pos:stop]
    try:
        return (decode_huffman(raw) if huffman else raw).decode(), stop
    except Exception as e:  # the library's Huffman errors, bad UTF-8
        raise HPACKError(f"a bad string: {e}") from e
