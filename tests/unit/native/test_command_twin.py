"""The compiled frame decoder against the pure one: the same commands, or the same errors (message
and opaque), for well-formed frames of both serializations, unusual JSON headers the pure decoder
coerces, hostile headers and random bytes; and the same split of a read into frames."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.common.errors import FrameTooLargeError, ProtocolError
from rocketlite.protocol import command as ref
from rocketlite.protocol.codes import SerializeType
from strategies import commands, json_headers

C = twin("rocketlite.protocol._command_c")
CODEC = C.Codec(ref.RemotingCommand, [f.name for f in ref.dataclasses.fields(ref.RemotingCommand)],
                ref._loads, ref._json_command, ref._binary_command, ProtocolError, ref._undecodable,
                ref._LANGUAGE_NAMES, ref._LANGUAGE_BY_VALUE, ref._OTHER)


def frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def same(item: object) -> object:
    if isinstance(item, ProtocolError):
        return (type(item).__name__, str(item), item.opaque)
    return item


def outcome(decode: object, data: bytes) -> object:
    try:
        return same(decode(data, 4, len(data)))  # type: ignore[operator]
    except ProtocolError as e:
        return same(e)


frames = st.one_of(
    (commands(SerializeType.JSON) | commands(SerializeType.ROCKETMQ)).map(lambda c: c.encode()),
    st.builds(frame, json_headers(), st.binary(max_size=16), st.sampled_from([0, 1, 2])),
    st.builds(frame, st.binary(max_size=80), st.binary(max_size=8), st.sampled_from([0, 1, 3])),
)


@given(frames)
def test_decode(data: bytes) -> None:
    assert outcome(CODEC.decode, data) == outcome(ref._decode_py, data)


@given(st.lists(frames, max_size=6), st.binary(max_size=12),
       st.one_of(st.just(0xFFFFFF), st.integers(0, 100)))
def test_split(parts: list[bytes], tail: bytes, max_header: int) -> None:
    data = b"".join(parts) + tail
    got: list[object] = []
    want: list[object] = []
    try:
        pos_c = CODEC.split(ref.FrameDecoder(1 << 16, max_header), data, 0, got)
    except ProtocolError as e:
        pos_c = same(e)
    try:
        pos_py = ref._split_py(ref.FrameDecoder(1 << 16, max_header), data, 0, want)
    except ProtocolError as e:
        pos_py = same(e)
    assert (pos_c, [same(i) for i in got]) == (pos_py, [same(i) for i in want])


def test_a_bad_length_is_the_decoders_fatal_error() -> None:
    for length, err in ((-1, ProtocolError), (1 << 20, FrameTooLargeError)):
        with pytest.raises(err):
            CODEC.split(ref.FrameDecoder(1 << 16), struct.pack(">i", length) + bytes(8), 0, [])
