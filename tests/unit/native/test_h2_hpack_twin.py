"""The compiled ``scan`` (``proxy.h2._hpack_c``) against the pure ``_scan_py``: the same fields,
list size and stop for any bytes from any position, with a cache of some of the block's literals
and a dynamic table."""

from __future__ import annotations

from collections import deque

import hpack
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.proxy.h2 import hpack_decode as ref

C = twin("rocketlite.proxy.h2._hpack_c")

fields = st.tuples(st.sampled_from(["x-mq-client-id", "content-type", "a", ":path"]),
                   st.text(max_size=140))


@given(st.lists(fields, max_size=8), st.booleans(), st.binary(max_size=8),
       st.lists(fields, max_size=4), st.integers(0, 3))
def test_scan(headers: list[tuple[str, str]], huffman: bool, noise: bytes,
              table_fields: list[tuple[str, str]], cached_every: int) -> None:
    enc = hpack.Encoder()
    block = b"".join(enc.encode([hpack.NeverIndexedHeaderTuple(n, v) if i % 2 else (n, v)],
                                huffman=huffman) for i, (n, v) in enumerate(headers)) + noise
    table = deque(((n, v), len(n) + len(v) + 32) for n, v in table_fields)
    cache = {}
    for i in range(0, len(block), 3):  # some byte ranges, some of them a whole literal
        for j in range(i + 1, min(len(block), i + 40) + 1, max(1, cached_every * 7)):
            cache[block[i:j]] = ("k", block[i:j].hex())
    for pos in range(len(block) + 1):
        assert C.scan(block, pos, cache, ref.STATIC, table) == \
            ref._scan_py(block, pos, cache, ref.STATIC, table)


@given(st.binary(max_size=40))
def test_scan_any_bytes(data: bytes) -> None:
    table = deque([(("n", "v"), 34)])
    for pos in range(len(data) + 1):
        assert C.scan(data, pos, {}, ref.STATIC, table) == \
            ref._scan_py(data, pos, {}, ref.STATIC, table)
