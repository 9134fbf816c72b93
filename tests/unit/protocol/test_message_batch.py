"""The SEND_BATCH_MESSAGE body codec (MessageDecoder.encodeMessages / decodeMessages)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.common.errors import BodyError
from rocketlite.formats.properties import decode_properties, encode_properties
from rocketlite.protocol import message_batch as mb
from rocketlite.protocol.message_batch import decode_batch, encode_batch, encode_message
from rocketlite.store.message import MessageBatch


def test_struct_sizes_match_the_table() -> None:
    assert mb.ENTRY_HEAD.size == 4 + 4 + 4 + 4 + 4 == 20
    assert mb.PROPERTIES_LEN.size == 2
    assert mb.ENTRY_OVERHEAD == 22
    assert mb.MAX_PROPERTIES_LEN == 2**15 - 1


def test_one_entry_byte_for_byte() -> None:
    props = b"TAGS\x01*\x02WAIT\x01true\x02"
    entry = encode_message(b"test1", props, flag=3)
    expected = (
        struct.pack(">i", 44)  # TOTALSIZE
        + struct.pack(">i", 0)  # MAGICCODE
        + struct.pack(">i", 0)  # BODYCRC
        + struct.pack(">i", 3)  # FLAG
        + struct.pack(">i", 5)
        + b"test1"  # BODYLEN, BODY
        + struct.pack(">h", len(props))
        + props  # PROPERTIESLEN, PROPERTIES
    )
    assert entry == expected
    # the C++ client's MessageBatchTest: 20 + len("test1") + 2 + len(TAGS:*;WAIT:true;) = 44, x3 = 132
    assert len(entry) == 44
    assert len(encode_batch([b"test1", b"test2", b"test3"], [props] * 3)) == 132


def test_decode_columns_feed_the_store_batch() -> None:
    body = encode_batch(
        [b"a", b"", b"ccc"],
        [{"TAGS": "x", "KEYS": "k1 k2"}, b"", "UNIQ_KEY\x01ABC\x02"],
        [0, 7, -1],
    )
    bodies, props, flags = decode_batch(body)
    assert bodies == [b"a", b"", b"ccc"]
    assert decode_properties(props[0].decode()) == {"TAGS": "x", "KEYS": "k1 k2"}
    assert props[1:] == [b"", b"UNIQ_KEY\x01ABC\x02"]
    assert flags == [0, 7, -1]
    batch = MessageBatch(topic="T", queue_id=0, bodies=bodies, properties=props, flags=flags)
    assert len(batch.bodies) == len(batch.properties) == 3


def test_empty_body_is_an_empty_batch() -> None:
    assert decode_batch(b"") == ([], [], [])
    assert encode_batch([]) == b""


def test_magic_and_crc_are_ignored() -> None:
    entry = bytearray(encode_message(b"xy", b"P\x01v\x02"))
    entry[4:12] = b"\xde\xad\xbe\xef\x01\x02\x03\x04"
    assert decode_batch(bytes(entry)) == ([b"xy"], [b"P\x01v\x02"], [0])


props_maps = st.dictionaries(
    st.text(alphabet="ABCKEYS_", min_size=1, max_size=8),
    st.text(alphabet="xyz 019é", min_size=1, max_size=20),
    max_size=4,
)


@given(
    st.lists(st.tuples(st.binary(max_size=200), props_maps, st.integers(-(2**31), 2**31 - 1)), max_size=20)
)
def test_round_trip(messages: list[tuple[bytes, dict[str, str], int]]) -> None:
    bodies = [m[0] for m in messages]
    props = [encode_properties(m[1]).encode() for m in messages]
    flags = [m[2] for m in messages]
    data = encode_batch(bodies, props, flags)
    assert len(data) == sum(22 + len(x) + len(p) for x, p in zip(bodies, props, strict=True))
    assert decode_batch(data) == (bodies, props, flags)
    assert encode_batch(bodies, [m[1] for m in messages], flags) == data


# ------------------------------------------------------------------------------------------ malformed

GOOD = encode_batch([b"hello", b"", b"x" * 40], [b"TAGS\x01a\x02", b"K\x01v\x02", b""], [1, 2, 3])
BOUNDARIES = {0, 22 + 5 + 7, 22 + 5 + 7 + 22 + 4, len(GOOD)}


@pytest.mark.parametrize("cut", range(len(GOOD)))
def test_every_truncation(cut: int) -> None:
    if cut in BOUNDARIES:
        bodies, _, _ = decode_batch(GOOD[:cut])
        assert len(bodies) == sorted(BOUNDARIES).index(cut)
    else:
        with pytest.raises(BodyError, match="batch entry"):
            decode_batch(GOOD[:cut])


def _entry(total: int, body_len: int, body: bytes, props_len: int, props: bytes) -> bytes:
    return struct.pack(">iiiii", total, 0, 0, 0, body_len) + body + struct.pack(">h", props_len) + props


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (_entry(22, -1, b"", 0, b""), "body length -1 overruns"),
        (_entry(22, 2**31 - 1, b"", 0, b""), "body length 2147483647 overruns"),
        (_entry(25, 3, b"abc", -2, b"") + b"\x00" * 10, "properties length -2 overruns"),
        (_entry(30, 3, b"abc", 5, b"ab"), "properties length 5 overruns"),
        (_entry(99, 3, b"abc", 2, b"ab"), "TOTALSIZE 99 but body and properties make 27"),
        (_entry(0, 3, b"abc", 2, b"ab"), "TOTALSIZE 0"),
        (GOOD + b"\x00" * 21, "bytes left"),
        (GOOD + b"\x00" * 22, "TOTALSIZE 0 but"),
    ],
)
def test_bad_entries(data: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        decode_batch(data)


def test_count_limit() -> None:
    data = encode_batch([b"x"] * 5)
    assert len(decode_batch(data, max_count=5)[0]) == 5
    with pytest.raises(BodyError, match="limit is 4"):
        decode_batch(data, max_count=4)


def test_encode_limits() -> None:
    with pytest.raises(BodyError, match="limit is 32767"):
        encode_message(b"", b"x" * 32768)
    assert len(encode_message(b"", b"x" * 32767)) == 22 + 32767
    with pytest.raises(BodyError, match="one properties entry and flag per body"):
        encode_batch([b"a", b"b"], [b""])
    with pytest.raises(BodyError, match="one properties entry and flag per body"):
        encode_batch([b"a"], None, [1, 2])


@given(st.binary(max_size=300))
def test_random_bytes_decode_or_raise_body_error(data: bytes) -> None:
    try:
        bodies, props, flags = decode_batch(data)
    except BodyError:
        return
    assert encode_batch(bodies, props, flags) == data


@given(st.integers(0, len(GOOD) - 1), st.integers(0, 255))
def test_flipped_byte_decodes_or_raises_body_error(at: int, value: int) -> None:
    data = bytearray(GOOD)
    data[at] = value
    with contextlib.suppress(BodyError):
        decode_batch(bytes(data))


# ------------------------------------------------------------------ equal-shaped batches (fast path)


@given(
    n=st.integers(1, 40), blen=st.integers(0, 64), props=st.sampled_from([b"", b"TAGS\x01a\x02"]),
    flags=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=40, max_size=40),
    data=st.data(),
)
def test_equal_shaped_batches_decode_in_one_pass(
    n: int, blen: int, props: bytes, flags: list[int], data: st.DataObject
) -> None:
    bodies = [data.draw(st.binary(min_size=blen, max_size=blen)) for _ in range(n)]
    encoded = encode_batch(bodies, [props] * n, flags[:n])
    assert mb._decode_uniform(encoded, None) == (bodies, [props] * n, flags[:n])
    assert decode_batch(encoded) == (bodies, [props] * n, flags[:n])
    assert mb._decode_uniform(encoded, n - 1) is None  # over the limit: the walk says so
    with pytest.raises(BodyError, match="limit"):
        decode_batch(encoded, max_count=n - 1)


def test_a_batch_that_only_looks_equal_shaped_is_walked() -> None:
    a, b = encode_message(b"xxxx", b"P\x01vw\x02"), encode_message(b"yyyyyyy", b"P\x01")
    assert len(a) == len(b)  # same TOTALSIZE, other body and properties lengths
    assert mb._decode_uniform(a + b, None) is None
    assert decode_batch(a + b) == ([b"xxxx", b"yyyyyyy"], [b"P\x01vw\x02", b"P\x01"], [0, 0])
    bad = bytearray(a + a)
    struct.pack_into(">i", bad, len(a), len(a) + 1)  # the second entry's TOTALSIZE disagrees
    assert mb._decode_uniform(bytes(bad), None) is None
    with pytest.raises(BodyError, match="TOTALSIZE"):
        decode_batch(bytes(bad))
