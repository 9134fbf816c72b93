"""The SEND_BATCH_MESSAGE body codec (``protocol/message_batch.py``) against its compiled twin
(``_message_batch_c``): ``decode_batch`` gives equal columns for any batch, and for any damaged or
random body the same BodyError message; ``message_ids`` writes the same string as the pure
Struct-and-hex version, and refuses an offset that is no int64 the same way."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.common.errors import BodyError
from rocketlite.protocol import message_batch as ref

C = twin("rocketlite.protocol._message_batch_c")

PROPS = st.sampled_from([b"", b"TAGS\x01TagA\x02WAIT\x01true\x02", b"KEYS\x01k\x02"]) | st.binary(
    max_size=40)
ENTRIES = st.lists(st.tuples(st.binary(max_size=64), PROPS, st.integers(-(2**31), 2**31 - 1)),
                   max_size=12)
COUNTS = st.none() | st.integers(0, 12)


def outcome(fn: object, body: bytes | bytearray, max_count: int | None) -> object:
    try:
        return fn(body, max_count=max_count)  # type: ignore[operator]
    except BodyError as e:
        return ("BodyError", str(e))


@given(ENTRIES, COUNTS)
def test_a_batch_decodes_to_its_columns(entries: list[tuple[bytes, bytes, int]],
                                        max_count: int | None) -> None:
    body = ref.encode_batch([e[0] for e in entries], [e[1] for e in entries],
                            [e[2] for e in entries])
    want = outcome(ref._decode_batch_py, body, max_count)
    assert outcome(C.decode_batch, body, max_count) == want
    if max_count is None or len(entries) <= max_count:
        assert want == ([e[0] for e in entries], [e[1] for e in entries],
                        [e[2] for e in entries])


@given(ENTRIES, st.data(), COUNTS)
def test_a_damaged_batch_gets_the_same_error(entries: list[tuple[bytes, bytes, int]],
                                             d: st.DataObject, max_count: int | None) -> None:
    body = bytearray(ref.encode_batch([e[0] for e in entries], [e[1] for e in entries],
                                      [e[2] for e in entries]))
    for _ in range(d.draw(st.integers(1, 3))):
        if body and d.draw(st.booleans()):
            body[d.draw(st.integers(0, len(body) - 1))] = d.draw(st.integers(0, 255))
        else:
            del body[d.draw(st.integers(0, len(body))):]
    data = bytes(body)
    assert outcome(C.decode_batch, data, max_count) == outcome(ref._decode_batch_py, data,
                                                               max_count)


@given(st.binary(max_size=200), COUNTS)
def test_random_bytes_get_the_same_outcome(body: bytes, max_count: int | None) -> None:
    assert outcome(C.decode_batch, body, max_count) == outcome(ref._decode_batch_py, body,
                                                               max_count)


def test_a_buffer_that_is_not_bytes_decodes_like_bytes() -> None:
    body = ref.encode_batch([b"a", b"bc"], [b"x", b"y"], [3, 4])
    want = ref._decode_batch_py(body)
    assert C.decode_batch(bytearray(body)) == ref._decode_batch_py(bytearray(body))
    assert [bytes(x) for x in C.decode_batch(bytearray(body))[0]] == want[0]


def test_equal_properties_share_one_object() -> None:
    """The compiled decode reuses the previous entry's properties when they are equal, so a
    batch whose messages share their properties costs one object (and one comparison)."""
    p = b"TAGS\x01TagA\x02"
    _, props, _ = C.decode_batch(ref.encode_batch([b"1", b"2", b"3"], [p, p, b"other"]))
    assert props == [p, p, b"other"]
    assert props[0] is props[1]


HEADS = st.binary(min_size=8, max_size=8) | st.binary(min_size=20, max_size=20)
OFFSETS = st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 2**40), max_size=40)


@given(HEADS, OFFSETS)
def test_message_ids(head: bytes, offsets: list[int]) -> None:
    want = ref._message_ids_py(head, offsets)
    assert C.message_ids(head, offsets) == want
    assert want == ",".join((head + struct.pack(">q", o)).hex().upper() for o in offsets)


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1, "1"])
def test_an_offset_that_is_not_an_int64_is_refused_alike(bad: object) -> None:
    for fn in (C.message_ids, ref._message_ids_py):
        with pytest.raises(struct.error):
            fn(b"\x7f\x00\x00\x01\x00\x00\x27\x1b", [1, bad])
