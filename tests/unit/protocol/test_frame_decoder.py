"""FrameDecoder: splitting a byte stream into commands, recoverable and fatal errors."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.common.errors import FrameTooLargeError, ProtocolError
from rocketlite.protocol.codes import SerializeType
from rocketlite.protocol.command import FRAME_MAX_LENGTH, FrameDecoder, RemotingCommand

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    return RemotingCommand(
        code=draw(st.integers(-(2**15), 2**15 - 1)),
        opaque=draw(st.integers(-(2**31), 2**31 - 1)),
        flag=draw(st.integers(0, 3)),
        remark=draw(st.none() | TEXT.filter(bool)),
        ext_fields=draw(st.dictionaries(TEXT, TEXT, max_size=5)),
        body=draw(st.binary(max_size=200)),
        serialize_type=draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ])),
    )


def frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    """A whole frame, length field included, around a hand-written header."""
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def feed_all(decoder: FrameDecoder, pieces: list[bytes]) -> list[RemotingCommand | ProtocolError]:
    out: list[RemotingCommand | ProtocolError] = []
    for piece in pieces:
        out += decoder.feed(piece)
    return out


@given(st.lists(commands(), max_size=8), st.lists(st.integers(0, 4000), max_size=20))
def test_any_chunking_yields_the_same_commands(cmds: list[RemotingCommand], cuts: list[int]) -> None:
    stream = b"".join(c.encode() for c in cmds)
    bounds = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    pieces = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    decoder = FrameDecoder()
    assert feed_all(decoder, pieces) == cmds
    assert decoder.buffered == 0


@given(st.lists(commands(), min_size=1, max_size=4))
def test_byte_by_byte(cmds: list[RemotingCommand]) -> None:
    stream = b"".join(c.encode() for c in cmds)
    decoder = FrameDecoder()
    assert feed_all(decoder, [stream[i : i + 1] for i in range(len(stream))]) == cmds


def test_feed_accepts_bytearray_and_memoryview() -> None:
    cmd = RemotingCommand.request(10, {"a": "b"}, b"body")
    data = bytearray(cmd.encode() * 2)
    decoder = FrameDecoder()
    assert decoder.feed(memoryview(data)[:10]) == []
    assert decoder.feed(data[10:]) == [cmd, cmd]
    data[:] = b"\x00" * len(data)  # nothing decoded refers to the caller's buffer
    assert decoder.buffered == 0


def test_partial_frame_is_held_back() -> None:
    cmd = RemotingCommand.request(10, body=b"x" * 1000)
    data = cmd.encode()
    decoder = FrameDecoder()
    assert decoder.feed(data[:3]) == []
    assert decoder.feed(data[3:500]) == []
    assert decoder.buffered == 500
    assert decoder.feed(data[500:] + data[:7]) == [cmd]
    assert decoder.buffered == 7
    assert decoder.feed(data[7:]) == [cmd]
    assert decoder.buffered == 0


def test_large_frame_in_small_chunks() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    cmd = RemotingCommand.request(10, {"k": "v"}, body)
    data = cmd.encode()
    decoder = FrameDecoder()
    out = feed_all(decoder, [data[i : i + 4096] for i in range(0, len(data), 4096)])
    assert out == [cmd]


def test_many_frames_in_one_feed() -> None:
    cmds = [RemotingCommand.request(10, {"i": str(i)}, b"b" * (i % 7)) for i in range(5000)]
    assert FrameDecoder().feed(b"".join(c.encode() for c in cmds)) == cmds


# -- recoverable errors: one bad frame, the stream goes on ---------------------------------------


def test_bad_header_is_returned_in_place_and_decoding_continues() -> None:
    good = RemotingCommand.request(10, {"a": "1"})
    bad_json = frame(b'{"code":"x","opaque":5}')
    bad_type = frame(b"{}", stype=7)
    bad_binary = frame(struct.pack(">hbhii", 1, 0, 0, 6, 0) + b"\x00\x00\x00\x09", stype=1)
    stream = good.encode() + bad_json + good.encode() + bad_type + bad_binary + good.encode()
    for chunk in (len(stream), 1, 3, 17):
        decoder = FrameDecoder()
        out = feed_all(decoder, [stream[i : i + chunk] for i in range(0, len(stream), chunk)])
        assert [type(x).__name__ for x in out] == [
            "RemotingCommand", "ProtocolError", "RemotingCommand", "ProtocolError", "ProtocolError",
            "RemotingCommand",
        ]  # fmt: skip
        assert out[0] == out[2] == out[5] == good
        errors = [x for x in out if isinstance(x, ProtocolError)]
        assert [e.opaque for e in errors] == [5, None, 6]
        assert "unknown serialize type 7" in str(errors[1])


@pytest.mark.parametrize("length", [0, 1, 3])
def test_frame_shorter_than_its_header_length_field(length: int) -> None:
    good = RemotingCommand.request(1)
    decoder = FrameDecoder()
    out = decoder.feed(struct.pack(">i", length) + b"\x00" * length + good.encode())
    assert isinstance(out[0], ProtocolError) and "too short" in str(out[0])
    assert out[1:] == [good]


def test_header_longer_than_frame() -> None:
    bad = struct.pack(">iI", 4 + 2, 100) + b"{}"
    out = FrameDecoder().feed(bad + RemotingCommand.request(1).encode())
    assert isinstance(out[0], ProtocolError) and "header length 100 exceeds the 2 bytes" in str(out[0])
    assert isinstance(out[1], RemotingCommand)


# -- fatal errors: the frame boundary is lost ----------------------------------------------------


def test_oversized_length_fails_before_buffering() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameTooLargeError, match="exceeds the maximum frame of 16777216 bytes"):
        decoder.feed(struct.pack(">i", FRAME_MAX_LENGTH))
    assert decoder.buffered == 0
    with pytest.raises(ProtocolError, match="broke earlier"):
        decoder.feed(RemotingCommand.request(1).encode())


def test_oversized_length_split_across_feeds() -> None:
    decoder = FrameDecoder(max_frame=1024)
    assert decoder.feed(b"\x00\x00") == []
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(b"\x04\x00" + b"x" * 100)
    assert info.value.opaque is None


def test_max_frame_counts_the_length_field_like_netty() -> None:
    header = b'{"code":1,"opaque":1}'
    fits = frame(header, b"x" * (100 - 8 - len(header)))
    assert len(fits) == 100
    assert len(FrameDecoder(max_frame=100).feed(fits)) == 1
    with pytest.raises(FrameTooLargeError):
        FrameDecoder(max_frame=99).feed(fits)


def test_negative_length_is_fatal() -> None:
    good = RemotingCommand.request(1).encode()
    decoder = FrameDecoder()
    assert len(decoder.feed(good)) == 1
    with pytest.raises(ProtocolError, match="negative frame length -1") as info:
        decoder.feed(good + b"\xff\xff\xff\xff")  # the good frame before it goes down with the stream
    assert type(info.value) is ProtocolError and info.value.opaque is None
    with pytest.raises(ProtocolError, match="broke earlier"):
        decoder.feed(good)


def test_max_frame_must_hold_a_header() -> None:
    with pytest.raises(ValueError, match="at least 8"):
        FrameDecoder(max_frame=7)
