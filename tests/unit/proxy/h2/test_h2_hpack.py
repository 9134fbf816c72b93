"""``HeaderDecoder`` against the ``hpack`` library's decoder: the same header lists for any run
of blocks its encoder makes (Huffman or not, indexed, not indexed, never indexed, table size
changes), its caches never returning a stale field, and clear errors for bad blocks."""

from __future__ import annotations

import hpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.proxy.h2.hpack_decode import HeaderDecoder, HPACKError

names = st.sampled_from([":path", ":method", "content-type", "x-mq-client-id",
                         "x-mq-request-id", "user-agent", "grpc-timeout", "a", "b"])
values = st.text(st.characters(min_codepoint=32, max_codepoint=0x24F), max_size=12)
fields = st.tuples(names, values, st.sampled_from(["plain", "never"]))
blocks = st.lists(st.tuples(st.lists(fields, max_size=8), st.booleans(),
                            st.sampled_from([None, 0, 64, 256, 4096])), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)  # a shared machine: no per-example deadline
@given(blocks)
def test_same_lists_as_the_hpack_library(run: list[tuple[list[tuple[str, str, str]], bool,
                                                         int | None]]) -> None:
    enc = hpack.Encoder()
    ref = hpack.Decoder()
    ours = HeaderDecoder()
    for block_fields, huffman, table_size in run:
        if table_size is not None:
            enc.header_table_size = table_size
        headers = [hpack.NeverIndexedHeaderTuple(n, v) if kind == "never" else (n, v)
                   for n, v, kind in block_fields]
        for _ in range(2):  # the same list again: the caches may answer, never stale
            block = enc.encode(headers, huffman=huffman)
            want = [(n, v) for n, v in ref.decode(block)]
            got, size = ours.decode(block)
            assert got == want
            assert size == sum(len(n) + len(v) + 32 for n, v in want)


def test_literals_without_indexing_are_cached_and_dynamic_references_are_not() -> None:
    d = HeaderDecoder()
    e = hpack.Encoder()
    b1 = e.encode([("x-mq-client-id", "c1")])  # literal with indexing: enters the table
    assert d.decode(b1)[0] == [("x-mq-client-id", "c1")]
    b2 = e.encode([("x-mq-client-id", "c1")])  # now an index into the dynamic table
    assert len(b2) == 1 and d.decode(b2)[0] == [("x-mq-client-id", "c1")]
    b3 = e.encode([("x-mq-client-id", "c2")])  # another entry: index 62 is c2 now
    assert d.decode(b3)[0] == [("x-mq-client-id", "c2")]
    assert d.decode(b2)[0] == [("x-mq-client-id", "c2")]  # the same byte means c2 now


@pytest.mark.parametrize("block, words", [
    (b"\xbe", "no header table entry 62"),
    (b"\x80", "no header table entry 0"),
    (b"\x3f\xe2\x1f", "table size update to 4097"),
    (b"\x00\x05ab", "past the header block"),
    (b"\x00\x01a\x05ab", "past the header block"),
    (b"\x40\x01a\x05ab", "past the header block"),
    (b"\x00", "ends inside a representation"),
    (b"\xff\xff\xff\xff\xff\xff\x01", "integer over"),
    (b"\x00\x81\xff\x01a", "a bad string"),
])
def test_bad_blocks(block: bytes, words: str) -> None:
    with pytest.raises(HPACKError, match=words):
        HeaderDecoder().decode(block)
